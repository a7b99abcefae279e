package board

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"devhost/host/api"
)

// CANFrame is one frame on the simulated CAN bus.
type CANFrame struct {
	ID       uint32 `json:"id"`
	Extended bool   `json:"ext,omitempty"`
	Remote   bool   `json:"rtr,omitempty"`
	Data     []byte `json:"data"` // at most 8 bytes; base64 in JSON
}

// BLEAdvert is an advertisement the simulated radio heard.
type BLEAdvert struct {
	Address string `json:"addr"`
	RSSI    int    `json:"rssi"`
	Data    []byte `json:"data"` // at most 31 bytes; base64 in JSON
}

// ErrFrame is a CAN frame or BLE payload the hardware cannot carry.
var ErrFrame = errors.New("board: frame does not fit the bus")

// keptFrames is how many sent frames the control channel can show.
const keptFrames = 64

// Radios is the CAN bus and BLE radio as the control channel shows them.
type Radios struct {
	CANSent     []CANFrame `json:"can_sent"`     // the last frames the device sent, oldest first
	CANReceived int        `json:"can_received"` // frames injected from the bus
	Advertising []byte     `json:"ble_advertising"`
	// ScanResponse is what the device answers an active scan with (its name, typically).
	ScanResponse []byte `json:"ble_scan_response,omitempty"`
	Scanning     int    `json:"ble_scanners"`
}

// radios is the simulated CAN transceiver and BLE radio. The outside world (tests, devctl)
// puts frames on the bus and adverts on the air through the control channel.
type radios struct {
	mu       sync.Mutex
	sent     []CANFrame
	received int
	canRx    Callbacks[func(CANFrame)]
	advert   []byte
	scanRsp  []byte
	scanners Callbacks[func(BLEAdvert)]
}

func checkFrame(f CANFrame) error {
	max := uint32(1<<11 - 1)
	if f.Extended {
		max = 1<<29 - 1
	}
	if f.ID > max || len(f.Data) > 8 || (f.Remote && len(f.Data) > 0) {
		return fmt.Errorf("%w: id %#x ext=%v rtr=%v with %d data bytes", ErrFrame, f.ID, f.Extended, f.Remote, len(f.Data))
	}
	return nil
}

// Check refuses a frame the bus cannot carry with an error wrapping ErrFrame: an id over 11
// bits (29 extended), more than 8 data bytes, or a remote frame with data. A real bus
// (package socketcan) refuses the same frames.
func (f CANFrame) Check() error { return checkFrame(f) }

// CANSend puts a frame on the bus.
func (s *Sim) CANSend(f CANFrame) error {
	if err := checkFrame(f); err != nil {
		return err
	}
	f.Data = slices.Clone(f.Data)
	s.radio.mu.Lock()
	s.radio.sent = append(s.radio.sent, f)
	if len(s.radio.sent) > keptFrames {
		s.radio.sent = s.radio.sent[len(s.radio.sent)-keptFrames:]
	}
	s.radio.mu.Unlock()
	return nil
}

// CANReceive calls fn with every frame the bus delivers until cancel.
func (s *Sim) CANReceive(fn func(CANFrame)) (cancel func(), err error) {
	return Subscribe(&s.radio.mu, &s.radio.canRx, fn), nil
}

// InjectCAN delivers a frame from the bus to every receiver.
func (s *Sim) InjectCAN(f CANFrame) error {
	if s.canIface != "" {
		// The plugins' bus is the real interface: a frame put here would reach nobody.
		return api.Errorf(http.StatusConflict, api.CodeConflict, "the CAN bus is the interface %s: put frames on it (cansend, canplayer)", s.canIface)
	}
	if err := checkFrame(f); err != nil {
		return api.Errorf(http.StatusBadRequest, api.CodeValidation, "%v", err)
	}
	s.radio.mu.Lock()
	s.radio.received++
	fns := s.radio.canRx.List()
	s.radio.mu.Unlock()
	for _, fn := range fns {
		fn(CANFrame{ID: f.ID, Extended: f.Extended, Remote: f.Remote, Data: slices.Clone(f.Data)})
	}
	return nil
}

// BLEAdvertise starts or replaces the device's advertisement.
func (s *Sim) BLEAdvertise(data []byte) error {
	if data == nil {
		data = []byte{} // advertising empty data is still advertising; nil is stopped
	}
	return s.setBLEData("advertisement", &s.radio.advert, data)
}

// BLEScanResponse sets the scan response data (empty clears it).
func (s *Sim) BLEScanResponse(data []byte) error {
	return s.setBLEData("scan response", &s.radio.scanRsp, data)
}

// setBLEData keeps a copy of an advertisement or scan response in *dst, refusing what one
// legacy advertising packet (31 bytes) cannot carry.
func (s *Sim) setBLEData(what string, dst *[]byte, data []byte) error {
	if len(data) > 31 {
		return fmt.Errorf("%w: %s of %d bytes (at most 31)", ErrFrame, what, len(data))
	}
	s.radio.mu.Lock()
	*dst = slices.Clone(data)
	s.radio.mu.Unlock()
	return nil
}

// BLEStopAdvertising ends the advertisement.
func (s *Sim) BLEStopAdvertising() error {
	s.radio.mu.Lock()
	s.radio.advert = nil
	s.radio.mu.Unlock()
	return nil
}

// BLEScan calls fn with every advertisement heard until cancel.
func (s *Sim) BLEScan(fn func(BLEAdvert)) (cancel func(), err error) {
	return Subscribe(&s.radio.mu, &s.radio.scanners, fn), nil
}

// InjectAdvert makes the radio hear an advertisement.
func (s *Sim) InjectAdvert(a BLEAdvert) error {
	if len(a.Data) > 31 || a.Address == "" {
		return api.Errorf(http.StatusBadRequest, api.CodeValidation, "an advert needs addr and at most 31 data bytes")
	}
	s.radio.mu.Lock()
	fns := s.radio.scanners.List()
	s.radio.mu.Unlock()
	for _, fn := range fns {
		fn(BLEAdvert{Address: a.Address, RSSI: a.RSSI, Data: slices.Clone(a.Data)})
	}
	return nil
}

// Radios is the radio state for the control channel.
func (s *Sim) Radios() Radios {
	s.radio.mu.Lock()
	defer s.radio.mu.Unlock()
	return Radios{CANSent: slices.Clone(s.radio.sent), CANReceived: s.radio.received,
		Advertising: slices.Clone(s.radio.advert), ScanResponse: slices.Clone(s.radio.scanRsp), Scanning: len(s.radio.scanners)}
}
