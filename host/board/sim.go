package board

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync"
)

// Defaults of the simulated board: an ESP32-S3 module with 8 MiB of flash and no PSRAM,
// Ethernet and Thread down, one WPA2 access point in range.
const (
	DefaultMAC  = "02:00:00:12:ab:cd"
	DefaultChip = "esp32s3"
)

// Features a board may declare (the spec's `hardware.features` set).
var knownFeatures = []string{"wifi", "ble", "bt-classic", "802.15.4", "embedded-flash", "embedded-psram"}

// State is everything the simulated board is: the control channel's GET /state document.
type State struct {
	Hardware Hardware   `json:"hardware"`
	ID       string     `json:"id"`
	Memory   Memory     `json:"memory"`
	Eth      IfState    `json:"eth"`
	Thread   IfState    `json:"thread"`
	WiFi     WiFiState  `json:"wifi"`
	GPIO     []PinState `json:"gpio"`
	Radios   Radios     `json:"radios"`
}

// MemoryUpdate changes the live heap figures; nil members keep their value.
type MemoryUpdate struct {
	FreeHeap     *int64 `json:"free_heap,omitempty"`
	FreeInternal *int64 `json:"free_internal,omitempty"`
	LargestBlock *int64 `json:"largest_block,omitempty"`
}

// MaxPresenceSeconds bounds a presence event's window (one day).
const MaxPresenceSeconds = 86400

// DefaultPresenceSeconds is the window a button press opens when it names none: the spec's
// HTTPD_RECOVERY_WINDOW_S.
const DefaultPresenceSeconds = 600

// presenceQueue bounds the presence events waiting for one slow subscriber.
const presenceQueue = 16

// stationQueue bounds the station events waiting for one slow subscriber.
const stationQueue = 64

// Sim is the simulated board. It is safe for concurrent use.
type Sim struct {
	hw Hardware

	mu     sync.Mutex
	mem    Memory
	eth    IfState
	ethNTP string // the NTP server Ethernet's DHCP lease offers
	thread IfState
	wifi   FileWiFi
	sta    station
	subs   map[*subscriber]struct{}

	gpio  gpio
	radio radios
	gatt  gattState // the BLE peripheral role (gatt.go)

	canIface string // the board file's can_iface
}

var _ Board = (*Sim)(nil)

// File is the board file: every member is optional and defaults to the value shown in
// board.example.json. Unknown members are an error so that a misspelt name is not silently
// ignored.
type File struct {
	Comment string `json:"comment,omitempty"`
	// Hardware's members stand at the top level of the file. In a file an empty PortalIP
	// derives 127.4.<id> from the MAC, or is 192.168.4.1 with PortalIface.
	Hardware
	Memory FileMemory `json:"memory"`
	Eth    FileIface  `json:"eth"`
	Thread FileIface  `json:"thread"`
	WiFi   FileWiFi   `json:"wifi"`
	// CANIface is the Linux SocketCAN interface (can0, vcan0) carrying the CAN bus; "" is
	// the simulated bus.
	CANIface string `json:"can_iface,omitempty"`
}

// FileMemory is the board file's initial heap figures.
type FileMemory struct {
	FreeHeap     int64 `json:"free_heap"`
	FreeInternal int64 `json:"free_internal"`
	LargestBlock int64 `json:"largest_block"`
}

// memory is the snapshot the file's figures start the board with.
func (m FileMemory) memory() Memory {
	return Memory{FreeHeap: m.FreeHeap, FreeInternal: m.FreeInternal, LargestBlock: m.LargestBlock}
}

// DefaultFile is the board used when no file is given.
func DefaultFile() File {
	return File{
		Hardware: Hardware{
			Chip:         DefaultChip,
			ChipRevision: 0,
			Cores:        2,
			InfoHardware: InfoHardware{
				Board:            "devhost-sim",
				MAC:              DefaultMAC,
				CPUMHz:           240,
				FlashBytes:       8 << 20,
				RAMInternalBytes: 512 << 10,
				RAMPSRAMBytes:    0,
				Features:         []string{"wifi", "ble"},
			},
		},
		Memory: FileMemory{FreeHeap: 262144, FreeInternal: 262144, LargestBlock: 110592},
		Eth:    FileIface{IP: "127.0.0.1", Netmask: "255.0.0.0", Gateway: "127.0.0.1"},
		Thread: FileIface{IP: "127.0.0.1", Netmask: "255.0.0.0", Gateway: "127.0.0.1"},
		WiFi: FileWiFi{StationIP: DefaultStationIP, Netmask: "255.0.0.0", Gateway: "127.0.0.1",
			APs: []AP{{SSID: DefaultSSID, PSK: DefaultPSK, Auth: "wpa2", BSSID: DefaultBSSID(DefaultSSID),
				Channel: DefaultChannel, RSSI: DefaultAPRSSI, Fault: FaultNone}}},
	}
}

// LoadSim builds the simulated board from a board file; an empty path is the default board.
func LoadSim(path string) (*Sim, error) {
	f := DefaultFile()
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("board file: %w", err)
		}
		if f, err = ParseFile(b); err != nil {
			return nil, fmt.Errorf("board file %s: %w", path, err)
		}
	}
	return NewSim(f)
}

// ParseFile decodes a board file over the defaults and checks it.
func ParseFile(b []byte) (File, error) {
	f := DefaultFile()
	// A file's own list of access points replaces the default one rather than merging its
	// members into the default AP; an absent (or null) list is the default one.
	f.WiFi.APs = nil
	if err := decodeStrict(b, &f); err != nil {
		return File{}, err
	}
	if f.WiFi.APs == nil {
		f.WiFi.APs = DefaultFile().WiFi.APs
	}
	if err := f.check(); err != nil {
		return File{}, err
	}
	return f, nil
}

// decodeStrict decodes exactly one JSON value, refusing unknown members and trailing data.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("empty document")
		}
		return fmt.Errorf("malformed JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("malformed JSON: trailing data after the document")
	}
	return nil
}

func (f *File) check() error {
	mac, err := net.ParseMAC(f.MAC)
	if err != nil || len(mac) != 6 {
		return fmt.Errorf("mac %q: want six bytes such as %s", f.MAC, DefaultMAC)
	}
	f.MAC = mac.String()
	switch {
	case f.Chip == "":
		return errors.New("chip: must not be empty")
	case f.ChipRevision < 0:
		return fmt.Errorf("chip_revision %d: must not be negative", f.ChipRevision)
	case f.Cores < 1:
		return fmt.Errorf("cores %d: must be at least 1", f.Cores)
	case f.CPUMHz < 1:
		return fmt.Errorf("cpu_mhz %d: must be positive", f.CPUMHz)
	case f.FlashBytes < 1:
		return fmt.Errorf("flash_bytes %d: must be positive", f.FlashBytes)
	case f.RAMInternalBytes < 1:
		return fmt.Errorf("ram_internal_bytes %d: must be positive", f.RAMInternalBytes)
	case f.RAMPSRAMBytes < 0:
		return fmt.Errorf("ram_psram_bytes %d: must not be negative (0 means no PSRAM)", f.RAMPSRAMBytes)
	}
	if f.Features == nil {
		f.Features = []string{}
	}
	for i, ft := range f.Features {
		if !slices.Contains(knownFeatures, ft) {
			return fmt.Errorf("features[%d] %q: not one of %v", i, ft, knownFeatures)
		}
		if slices.Contains(f.Features[:i], ft) {
			return fmt.Errorf("features[%d] %q: listed twice", i, ft)
		}
	}
	if f.CANIface != "" {
		if err := checkIfaceName("can_iface", f.CANIface); err != nil {
			return err
		}
	}
	if err := f.checkPortal(mac); err != nil {
		return err
	}
	mem := f.Memory.memory()
	if err := checkMemory(mem, f.RAMInternalBytes+f.RAMPSRAMBytes); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	if err := f.Eth.check(); err != nil {
		return fmt.Errorf("eth.%w", err)
	}
	if err := f.Thread.check(); err != nil {
		return fmt.Errorf("thread.%w", err)
	}
	if f.Thread.NTPServer != "" {
		return errors.New("thread.ntp_server: Thread takes its addresses from the border router, not from a DHCP lease: no NTP server is offered")
	}
	if err := f.WiFi.check(); err != nil {
		return fmt.Errorf("wifi.%w", err)
	}
	return nil
}

// NewSim builds the simulated board from a checked board file.
func NewSim(f File) (*Sim, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	mem := f.Memory.memory()
	mem.MinFreeHeap, mem.MinFreeInternal = mem.FreeHeap, mem.FreeInternal
	hw, wifi := f.Hardware, f.WiFi
	hw.Features = slices.Clone(f.Features)
	wifi.APs = slices.Clone(f.WiFi.APs)
	return &Sim{
		hw:     hw,
		mem:    mem,
		eth:    IfState{Name: IfaceEth, Up: f.Eth.Up, IP: f.Eth.IP, Netmask: f.Eth.Netmask, Gateway: f.Eth.Gateway},
		ethNTP: f.Eth.NTPServer,
		thread: IfState{Name: IfaceThread, Up: f.Thread.Up, IP: f.Thread.IP, Netmask: f.Thread.Netmask, Gateway: f.Thread.Gateway},
		wifi:   wifi,
		sta:    station{state: "idle"},
		subs:   map[*subscriber]struct{}{},

		canIface: f.CANIface,
	}, nil
}

// CANIface is the SocketCAN interface the board file puts the CAN bus on ("" is the
// simulated bus, which the control channel drives).
func (s *Sim) CANIface() string { return s.canIface }

// DerivedPortalIP is the default board's portal address: 127.4.<MAC byte 5>.<MAC byte 6>,
// so that devices with different ids run side by side on one machine.
func DerivedPortalIP(mac net.HardwareAddr) string {
	if len(mac) != 6 {
		return ""
	}
	return net.IPv4(127, 4, mac[4], mac[5]).String()
}

// Hardware is the fixed description of the board.
func (s *Sim) Hardware() Hardware {
	hw := s.hw
	hw.Features = slices.Clone(s.hw.Features)
	return hw
}

// Memory is the live heap figures with their low-water marks.
func (s *Sim) Memory() Memory {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mem
}

// State is everything the board is.
func (s *Sim) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateLocked()
}

func (s *Sim) stateLocked() State {
	hw := s.Hardware()
	return State{Hardware: hw, ID: hw.DeviceID(), Memory: s.mem, Eth: s.eth, Thread: s.thread, WiFi: s.wifiLocked(),
		GPIO: s.Pins(), Radios: s.Radios()}
}

// SetMemory changes the live heap figures and lowers the low-water marks as needed. A value
// given explicitly must be consistent (largest block ≤ free internal ≤ free heap ≤ RAM); a value
// not given is lowered to fit the others, as lowering free memory shrinks the largest block.
func (s *Sim) SetMemory(u MemoryUpdate) (Memory, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.mem
	for _, f := range []struct {
		name string
		v    *int64
		dst  *int64
	}{{"free_heap", u.FreeHeap, &m.FreeHeap}, {"free_internal", u.FreeInternal, &m.FreeInternal}, {"largest_block", u.LargestBlock, &m.LargestBlock}} {
		if f.v == nil {
			continue
		}
		if *f.v < 0 {
			return s.mem, fmt.Errorf("%s %d: must not be negative", f.name, *f.v)
		}
		*f.dst = *f.v
	}
	if u.FreeInternal == nil && m.FreeInternal > m.FreeHeap {
		m.FreeInternal = m.FreeHeap
	}
	if u.FreeHeap == nil && m.FreeHeap < m.FreeInternal {
		// Raising internal RAM above the heap total raises the total with it.
		m.FreeHeap = m.FreeInternal
	}
	if u.LargestBlock == nil && m.LargestBlock > m.FreeInternal {
		m.LargestBlock = m.FreeInternal
	}
	if err := checkMemory(m, s.hw.RAMInternalBytes+s.hw.RAMPSRAMBytes); err != nil {
		return s.mem, err
	}
	m.MinFreeHeap = min(m.MinFreeHeap, m.FreeHeap)
	m.MinFreeInternal = min(m.MinFreeInternal, m.FreeInternal)
	s.mem = m
	return m, nil
}

func checkMemory(m Memory, ram int64) error {
	switch {
	case m.FreeHeap < 0 || m.FreeInternal < 0 || m.LargestBlock < 0:
		return errors.New("figures must not be negative")
	case m.FreeHeap > ram:
		return fmt.Errorf("free_heap %d exceeds the board's RAM (%d bytes)", m.FreeHeap, ram)
	case m.FreeInternal > m.FreeHeap:
		return fmt.Errorf("free_internal %d exceeds free_heap %d", m.FreeInternal, m.FreeHeap)
	case m.LargestBlock > m.FreeInternal:
		return fmt.Errorf("largest_block %d exceeds free_internal %d", m.LargestBlock, m.FreeInternal)
	}
	return nil
}

// Press is a hardware presence event asking for a recovery window of seconds (0 means
// DefaultPresenceSeconds).
func (s *Sim) Press(seconds int) error {
	if seconds == 0 {
		seconds = DefaultPresenceSeconds
	}
	if seconds < 1 || seconds > MaxPresenceSeconds {
		return fmt.Errorf("seconds %d: want 1..%d", seconds, MaxPresenceSeconds)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.publishLocked(Event{Presence: seconds})
	return nil
}

// subscriber is one Subscribe call's queue. Interface events coalesce per interface: at most
// one, the latest, waits for each, so a slow reader skips intermediate states but always ends
// with the current one. Presence and station events queue (presenceQueue and stationQueue at
// most; the oldest of the kind is dropped beyond).
type subscriber struct {
	queue []Event // guarded by Sim.mu
	wake  chan struct{}
}

func (s *Sim) publishLocked(ev Event) {
	for sub := range s.subs {
		sub.pushLocked(ev)
	}
}

func (sub *subscriber) pushLocked(ev Event) {
	switch {
	case ev.Iface != nil:
		sub.queue = slices.DeleteFunc(sub.queue, func(e Event) bool { return e.Iface != nil && e.Iface.Name == ev.Iface.Name })
	case ev.Station != nil:
		sub.dropOldest(func(e Event) bool { return e.Station != nil }, stationQueue)
	default:
		sub.dropOldest(func(e Event) bool { return e.Presence > 0 }, presenceQueue)
	}
	sub.queue = append(sub.queue, ev)
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

func (sub *subscriber) dropOldest(kind func(Event) bool, max int) {
	n := 0
	for _, e := range sub.queue {
		if kind(e) {
			n++
		}
	}
	if n >= max {
		i := slices.IndexFunc(sub.queue, kind)
		sub.queue = slices.Delete(sub.queue, i, i+1)
	}
}

// Subscribe delivers hardware events until ctx ends, starting with the current Ethernet and
// Thread states so a subscriber never has to read them separately. The channel is closed when
// ctx ends.
func (s *Sim) Subscribe(ctx context.Context) <-chan Event {
	out := make(chan Event)
	sub := &subscriber{wake: make(chan struct{}, 1)}
	s.mu.Lock()
	s.subs[sub] = struct{}{}
	eth, thread := s.eth, s.thread
	sub.pushLocked(Event{Iface: &eth})
	sub.pushLocked(Event{Iface: &thread})
	s.mu.Unlock()
	go func() {
		defer close(out)
		defer func() {
			s.mu.Lock()
			delete(s.subs, sub)
			s.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-sub.wake:
			}
			for {
				s.mu.Lock()
				if len(sub.queue) == 0 {
					s.mu.Unlock()
					break
				}
				ev := sub.queue[0]
				sub.queue = sub.queue[1:]
				s.mu.Unlock()
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}
