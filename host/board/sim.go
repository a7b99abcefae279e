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

// Defaults of the simulated board: an ESP32-S3 module with 8 MiB of flash and no PSRAM, on a
// WiFi station link over loopback.
const (
	DefaultMAC      = "02:00:00:12:ab:cd"
	DefaultChip     = "esp32s3"
	DefaultPortalIP = "127.4.1.1"
	DefaultRSSI     = -55
)

// Features a board may declare (the spec's `hardware.features` set).
var knownFeatures = []string{"wifi", "ble", "bt-classic", "802.15.4", "embedded-flash", "embedded-psram"}

// Route is where the station link goes when it is up. A down link keeps its route so that the
// next "up" comes back on it.
type Route struct {
	Iface   string `json:"iface"` // wifi_sta, eth, thread
	IP      string `json:"ip"`
	Netmask string `json:"netmask"`
	Gateway string `json:"gateway"`
	RSSI    *int   `json:"rssi"` // wifi_sta only
}

// State is everything the simulated board is: the control channel's GET /state document.
type State struct {
	Hardware Hardware   `json:"hardware"`
	ID       string     `json:"id"`
	Memory   Memory     `json:"memory"`
	Link     Link       `json:"link"`
	Route    Route      `json:"route"`
	GPIO     []PinState `json:"gpio"`
	Radios   Radios     `json:"radios"`
}

// MemoryUpdate changes the live heap figures; nil members keep their value.
type MemoryUpdate struct {
	FreeHeap     *int64 `json:"free_heap,omitempty"`
	FreeInternal *int64 `json:"free_internal,omitempty"`
	LargestBlock *int64 `json:"largest_block,omitempty"`
}

// RouteUpdate moves the route; nil members keep their value.
type RouteUpdate struct {
	Iface   *string `json:"iface,omitempty"`
	IP      *string `json:"ip,omitempty"`
	Netmask *string `json:"netmask,omitempty"`
	Gateway *string `json:"gateway,omitempty"`
	RSSI    *int    `json:"rssi,omitempty"`
}

// MaxPresenceSeconds bounds a presence event's window (one day).
const MaxPresenceSeconds = 86400

// DefaultPresenceSeconds is the window a button press opens when it names none: the spec's
// HTTPD_RECOVERY_WINDOW_S.
const DefaultPresenceSeconds = 600

// presenceQueue bounds the presence events waiting for one slow subscriber.
const presenceQueue = 16

// Sim is the simulated board. It is safe for concurrent use.
type Sim struct {
	hw Hardware

	mu    sync.Mutex
	mem   Memory
	up    bool
	route Route
	subs  map[*subscriber]struct{}

	gpio  gpio
	radio radios
}

var _ Board = (*Sim)(nil)

// File is the board file: every member is optional and defaults to the value shown in
// board.example.json. Unknown members are an error so that a misspelt name is not silently
// ignored.
type File struct {
	Comment          string     `json:"comment,omitempty"`
	Board            string     `json:"board"`
	MAC              string     `json:"mac"`
	Chip             string     `json:"chip"`
	ChipRevision     int        `json:"chip_revision"`
	Cores            int        `json:"cores"`
	CPUMHz           int        `json:"cpu_mhz"`
	FlashBytes       int64      `json:"flash_bytes"`
	RAMInternalBytes int64      `json:"ram_internal_bytes"`
	RAMPSRAMBytes    int64      `json:"ram_psram_bytes"`
	Features         []string   `json:"features"`
	PortalIP         string     `json:"portal_ip"`
	Memory           FileMemory `json:"memory"`
	Link             FileLink   `json:"link"`
}

// FileMemory is the board file's initial heap figures.
type FileMemory struct {
	FreeHeap     int64 `json:"free_heap"`
	FreeInternal int64 `json:"free_internal"`
	LargestBlock int64 `json:"largest_block"`
}

// FileLink is the board file's initial link.
type FileLink struct {
	Up      bool   `json:"up"`
	Iface   string `json:"iface"`
	IP      string `json:"ip"`
	Netmask string `json:"netmask"`
	Gateway string `json:"gateway"`
	RSSI    *int   `json:"rssi"`
}

// DefaultFile is the board used when no file is given.
func DefaultFile() File {
	rssi := DefaultRSSI
	return File{
		Board:            "devhost-sim",
		MAC:              DefaultMAC,
		Chip:             DefaultChip,
		ChipRevision:     0,
		Cores:            2,
		CPUMHz:           240,
		FlashBytes:       8 << 20,
		RAMInternalBytes: 512 << 10,
		RAMPSRAMBytes:    0,
		Features:         []string{"wifi", "ble"},
		PortalIP:         DefaultPortalIP,
		Memory:           FileMemory{FreeHeap: 262144, FreeInternal: 262144, LargestBlock: 110592},
		Link:             FileLink{Up: true, Iface: "wifi_sta", IP: "127.0.0.1", Netmask: "255.0.0.0", Gateway: "127.0.0.1", RSSI: &rssi},
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
	f.Link.RSSI = nil // filled in below for a WiFi route, so an eth route needs no "rssi": null
	if err := decodeStrict(b, &f); err != nil {
		return File{}, err
	}
	if f.Link.Iface == "wifi_sta" && f.Link.RSSI == nil {
		r := DefaultRSSI
		f.Link.RSSI = &r
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
	ip := net.ParseIP(f.PortalIP)
	if ip == nil || ip.To4() == nil || !ip.IsLoopback() {
		return fmt.Errorf("portal_ip %q: the simulated portal needs an IPv4 loopback address (127.x.y.z)", f.PortalIP)
	}
	mem := Memory{FreeHeap: f.Memory.FreeHeap, FreeInternal: f.Memory.FreeInternal, LargestBlock: f.Memory.LargestBlock}
	if err := checkMemory(mem, f.RAMInternalBytes+f.RAMPSRAMBytes); err != nil {
		return fmt.Errorf("memory: %w", err)
	}
	r := Route{Iface: f.Link.Iface, IP: f.Link.IP, Netmask: f.Link.Netmask, Gateway: f.Link.Gateway, RSSI: f.Link.RSSI}
	if err := checkRoute(r); err != nil {
		return fmt.Errorf("link: %w", err)
	}
	return nil
}

// NewSim builds the simulated board from a checked board file.
func NewSim(f File) (*Sim, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	mem := Memory{FreeHeap: f.Memory.FreeHeap, FreeInternal: f.Memory.FreeInternal, LargestBlock: f.Memory.LargestBlock}
	mem.MinFreeHeap, mem.MinFreeInternal = mem.FreeHeap, mem.FreeInternal
	return &Sim{
		hw: Hardware{
			MAC: f.MAC, Chip: f.Chip, ChipRevision: f.ChipRevision, Cores: f.Cores, CPUMHz: f.CPUMHz,
			FlashBytes: f.FlashBytes, RAMInternalBytes: f.RAMInternalBytes, RAMPSRAMBytes: f.RAMPSRAMBytes,
			Features: slices.Clone(f.Features), Board: f.Board, PortalIP: f.PortalIP,
		},
		mem:   mem,
		up:    f.Link.Up,
		route: Route{Iface: f.Link.Iface, IP: f.Link.IP, Netmask: f.Link.Netmask, Gateway: f.Link.Gateway, RSSI: cloneInt(f.Link.RSSI)},
		subs:  map[*subscriber]struct{}{},
	}, nil
}

func cloneInt(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
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

// Link is the station link as the hardware reports it: while down the interface is `none`
// and the address strings are empty.
func (s *Sim) Link() Link {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.linkLocked()
}

func (s *Sim) linkLocked() Link {
	if !s.up {
		return Link{Up: false, Iface: "none"}
	}
	r := s.route
	return Link{Up: true, Iface: r.Iface, IP: r.IP, Netmask: r.Netmask, Gateway: r.Gateway, RSSI: cloneInt(r.RSSI)}
}

// State is everything the board is.
func (s *Sim) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateLocked()
}

func (s *Sim) stateLocked() State {
	r := s.route
	r.RSSI = cloneInt(r.RSSI)
	hw := s.hw
	hw.Features = slices.Clone(s.hw.Features)
	return State{Hardware: hw, ID: hw.DeviceID(), Memory: s.mem, Link: s.linkLocked(), Route: r, GPIO: s.Pins(), Radios: s.Radios()}
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

// SetUp brings the link up or down; an event goes out only when the link changed.
func (s *Sim) SetUp(up bool) Link {
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.linkLocked()
	s.up = up
	after := s.linkLocked()
	s.publishLinkLocked(before, after)
	return after
}

// SetRoute moves the route. While the link is up the move is an event; while down the route
// is kept for the next "up". Leaving the WiFi station drops the RSSI; coming to it without an
// RSSI takes DefaultRSSI.
func (s *Sim) SetRoute(u RouteUpdate) (Link, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.route
	r.RSSI = cloneInt(r.RSSI)
	if u.Iface != nil {
		r.Iface = *u.Iface
	}
	if u.IP != nil {
		r.IP = *u.IP
	}
	if u.Netmask != nil {
		r.Netmask = *u.Netmask
	}
	if u.Gateway != nil {
		r.Gateway = *u.Gateway
	}
	switch {
	case u.RSSI != nil:
		r.RSSI = cloneInt(u.RSSI)
	case r.Iface != "wifi_sta":
		r.RSSI = nil
	case r.RSSI == nil:
		v := DefaultRSSI
		r.RSSI = &v
	}
	if err := checkRoute(r); err != nil {
		return s.linkLocked(), err
	}
	before := s.linkLocked()
	s.route = r
	after := s.linkLocked()
	s.publishLinkLocked(before, after)
	return after, nil
}

func checkRoute(r Route) error {
	switch r.Iface {
	case "wifi_sta", "eth", "thread":
	default:
		return fmt.Errorf("iface %q: want wifi_sta, eth or thread (take the link down with net down)", r.Iface)
	}
	if ip := net.ParseIP(r.IP); ip == nil || ip.To4() == nil {
		return fmt.Errorf("ip %q: want an IPv4 address", r.IP)
	}
	mask := net.ParseIP(r.Netmask)
	if mask == nil || mask.To4() == nil {
		return fmt.Errorf("netmask %q: want an IPv4 netmask such as 255.255.255.0", r.Netmask)
	}
	if ones, bits := net.IPMask(mask.To4()).Size(); ones == 0 && bits == 0 {
		return fmt.Errorf("netmask %q: not a contiguous mask", r.Netmask)
	}
	if r.Gateway != "" {
		if ip := net.ParseIP(r.Gateway); ip == nil || ip.To4() == nil {
			return fmt.Errorf("gateway %q: want an IPv4 address or empty", r.Gateway)
		}
	}
	if r.RSSI != nil {
		if r.Iface != "wifi_sta" {
			return fmt.Errorf("rssi: only the wifi_sta route has one, not %s", r.Iface)
		}
		if *r.RSSI < -127 || *r.RSSI > 0 {
			return fmt.Errorf("rssi %d: want -127..0 dBm", *r.RSSI)
		}
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

func (s *Sim) publishLinkLocked(before, after Link) {
	if linkEqual(before, after) {
		return
	}
	l := after
	s.publishLocked(Event{Link: &l})
}

func linkEqual(a, b Link) bool {
	ra, rb := a.RSSI, b.RSSI
	a.RSSI, b.RSSI = nil, nil
	if a != b || (ra == nil) != (rb == nil) {
		return false
	}
	return ra == nil || *ra == *rb
}

// subscriber is one Subscribe call's queue. Link events coalesce: at most one, the latest,
// waits in the queue, so a slow reader skips intermediate link states but always ends with
// the current one. Presence events queue up to presenceQueue (the oldest is dropped beyond).
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
	if ev.Link != nil {
		sub.queue = slices.DeleteFunc(sub.queue, func(e Event) bool { return e.Link != nil })
	} else {
		n := 0
		for _, e := range sub.queue {
			if e.Link == nil {
				n++
			}
		}
		if n >= presenceQueue {
			i := slices.IndexFunc(sub.queue, func(e Event) bool { return e.Link == nil })
			sub.queue = slices.Delete(sub.queue, i, i+1)
		}
	}
	sub.queue = append(sub.queue, ev)
	select {
	case sub.wake <- struct{}{}:
	default:
	}
}

// Subscribe delivers hardware events until ctx ends, starting with the current link state so
// a subscriber never has to read Link separately. The channel is closed when ctx ends.
func (s *Sim) Subscribe(ctx context.Context) <-chan Event {
	out := make(chan Event)
	sub := &subscriber{wake: make(chan struct{}, 1)}
	s.mu.Lock()
	s.subs[sub] = struct{}{}
	l := s.linkLocked()
	sub.pushLocked(Event{Link: &l})
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
