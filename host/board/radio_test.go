package board

import (
	"errors"
	"net/http"
	"testing"

	"devhost/host/api"
)

func TestCANBus(t *testing.T) {
	s, err := NewSim(DefaultFile())
	if err != nil {
		t.Fatal(err)
	}
	bad := []CANFrame{
		{ID: 0x800},                            // 12 bits without ext
		{ID: 1 << 29, Extended: true},          // 30 bits
		{ID: 1, Data: make([]byte, 9)},         // 9 bytes
		{ID: 1, Remote: true, Data: []byte{1}}, // remote frames carry no data
	}
	for _, f := range bad {
		if err := s.CANSend(f); !errors.Is(err, ErrFrame) {
			t.Errorf("send %+v: %v", f, err)
		}
		if err := s.InjectCAN(f); err == nil {
			t.Errorf("inject %+v accepted", f)
		}
	}
	for i := range keptFrames + 3 {
		if err := s.CANSend(CANFrame{ID: 0x09F11211, Extended: true, Data: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	r := s.Radios()
	if len(r.CANSent) != keptFrames || r.CANSent[0].Data[0] != 3 {
		t.Fatalf("kept %d sent frames, first %v", len(r.CANSent), r.CANSent[0])
	}
	var got []CANFrame
	cancel, _ := s.CANReceive(func(f CANFrame) { got = append(got, f) })
	if err := s.InjectCAN(CANFrame{ID: 0x123, Data: []byte{1, 2}}); err != nil {
		t.Fatal(err)
	}
	cancel()
	_ = s.InjectCAN(CANFrame{ID: 0x124})
	if len(got) != 1 || got[0].ID != 0x123 || s.Radios().CANReceived != 2 {
		t.Fatalf("received %v, count %d", got, s.Radios().CANReceived)
	}
}

func TestBLERadio(t *testing.T) {
	s, err := NewSim(DefaultFile())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.BLEAdvertise(make([]byte, 32)); !errors.Is(err, ErrFrame) {
		t.Fatalf("32-byte advert: %v", err)
	}
	if err := s.BLEAdvertise([]byte{2, 1, 6}); err != nil {
		t.Fatal(err)
	}
	if r := s.Radios(); len(r.Advertising) != 3 {
		t.Fatalf("advertising %v", r.Advertising)
	}
	_ = s.BLEStopAdvertising()
	if r := s.Radios(); r.Advertising != nil {
		t.Fatalf("still advertising %v", r.Advertising)
	}
	// Advertising no data is advertising all the same; only a stop clears it.
	if err := s.BLEAdvertise(nil); err != nil {
		t.Fatal(err)
	}
	if r := s.Radios(); r.Advertising == nil || len(r.Advertising) != 0 {
		t.Fatalf("empty advert shows as %v", r.Advertising)
	}
	if err := s.BLEScanResponse(make([]byte, 32)); !errors.Is(err, ErrFrame) {
		t.Fatalf("32-byte scan response: %v", err)
	}
	if err := s.BLEScanResponse([]byte{1, 2}); err != nil {
		t.Fatal(err)
	}
	if r := s.Radios(); len(r.ScanResponse) != 2 {
		t.Fatalf("scan response %v", r.ScanResponse)
	}
	var heard []BLEAdvert
	cancel, _ := s.BLEScan(func(a BLEAdvert) { heard = append(heard, a) })
	if s.Radios().Scanning != 1 {
		t.Fatal("scanner not counted")
	}
	if err := s.InjectAdvert(BLEAdvert{Address: "aa:bb:cc:dd:ee:ff", RSSI: -70, Data: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	if err := s.InjectAdvert(BLEAdvert{}); err == nil {
		t.Fatal("advert without an address accepted")
	}
	cancel()
	_ = s.InjectAdvert(BLEAdvert{Address: "aa:bb:cc:dd:ee:01"})
	if len(heard) != 1 || heard[0].RSSI != -70 {
		t.Fatalf("heard %v", heard)
	}
}

// With the CAN bus on a real interface, the control channel's injection refuses (409): the
// frame would reach no plugin.
func TestInjectCANRefusedOnARealBus(t *testing.T) {
	f := DefaultFile()
	f.CANIface = "vcan0"
	s, err := NewSim(f)
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *api.Error
	if err := s.InjectCAN(CANFrame{ID: 0x123, Data: []byte{1}}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Fatalf("inject with can_iface set: %v", err)
	}
}
