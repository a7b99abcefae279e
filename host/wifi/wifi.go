// Package wifi is the WiFi station manager: it joins one of the four configured networks
// through the radio driver, retries in rounds with backoff, reports the station to the network
// layer while connected, decides when the setup portal is up, and serves GET /wifi/status,
// POST /wifi/scan and GET /wifi/scan with the `wifi` and `wifi_scan` events.
//
// The state machine is the spec's "WiFi station" table, one method per row (machine.go). Its
// inputs (driver events, timers, configuration changes) are handled one at a time by Run's
// goroutine, so the table is the only place state changes.
//
// Choices where the spec is silent:
//   - Timeouts: connecting gives up after wifi.connect_tmo_s (default 15 s, reason 1002) and
//     obtaining_ip after wifi.dhcp_tmo_s (default 30 s, reason 1001): an ESP32 associates in
//     a few seconds and a marina DHCP server can be slow, so both leave room.
//   - `round` is the 0-based round in progress (in `backoff`, the round that just failed),
//     so the backoff delay is 1 s × 2^round, capped, then ±25 % jitter. `attempt` counts
//     connection attempts since the station was last connected (the one that succeeded
//     included); a configuration change or a drop starts the count again.
//   - `network_index` is the slot being tried or held (-1 when none); in `backoff` the slot
//     last tried. `reason` is the last disconnect reason and stays after a reconnect; code 0
//     with an empty text before any. `backoff_ms` is the time left. `disconnect_count`
//     counts losses of an association (drops, IP lost, DHCP timeouts), not refused attempts.
//   - A retried drop continues the round with the slots after the dropped one, then backs off.
//   - A configuration change restarts from network 0 at once (reason 1004, round 0) unless the
//     network in use, or being joined, is still listed with the same SSID, password and BSSID
//     pin; a change that leaves the list and the addressing alone never interrupts a backoff.
//   - Addressing (wifi.ip_mode, ip, netmask, gateway) is read at each attempt: a live
//     connection keeps the address it has until it reconnects (ip_mode and gateway are
//     restart-required keys; the next boot or the next attempt applies them).
//   - A slot whose password is outside 8..63 is skipped with one warning per configuration; a
//     static ip/netmask that does not parse falls back to DHCP with one warning per value.
//   - The portal: once up it stays up while the station retries, so an installer who typed new
//     credentials on it does not lose it before the station has joined; it goes down when the
//     station is connected or wifi.portal_enabled is off. "Retrying without success" counts
//     from when the station started trying: at boot, when configured, or after a drop.
//   - A scan runs on the caller's goroutine: the simulated radio answers at once. A scan asked
//     for while one runs joins it (202). Results are cached until the next scan.
//   - Loss of WiFi never restarts the device: nothing here reports a fatal condition.
package wifi

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/api"
	"devhost/host/board"
	"devhost/host/netroute"
)

// PortalLink is the setup access point's network side (host/portal implements it).
type PortalLink interface {
	Up(ssid, psk string) error // bring the AP, its listener, DNS and DHCP up; idempotent
	Down()                     // take them down; idempotent
	Clients() int              // DHCP clients holding a lease while up
}

// Radio is the WiFi driver (board.Sim implements it).
type Radio interface {
	// Connect starts joining; the outcome arrives as station events carrying the number.
	Connect(req board.StaRequest) uint64
	// Disconnect leaves or abandons the network; no event follows.
	Disconnect()
	// Scan lists the access points in range; board.ErrScanBusy when it cannot now.
	Scan() ([]board.ScanResult, error)
	Subscribe(ctx context.Context) <-chan board.Event
}

// Slots is the number of configured networks.
const Slots = 4

// Network is one configured slot.
type Network struct {
	SSID  string
	PSK   string
	BSSID string // pins one AP; empty roams
}

// Settings are the wifi.* keys the manager reads.
type Settings struct {
	Networks       [Slots]Network
	StaEnabled     bool
	IPMode         string // dhcp or static
	IP, Netmask    string
	Gateway        string
	PortalEnabled  bool
	PortalSSID     string // empty: dev-<id>
	PortalPSK      string
	PortalAfter    time.Duration
	BackoffMax     time.Duration
	ConnectTimeout time.Duration
	DHCPTimeout    time.Duration
}

// Options wire the manager to the device.
type Options struct {
	Clock    clockwork.Clock
	Logger   *slog.Logger
	Radio    Radio
	Settings func() Settings
	ID       string        // device id, for dev-<id>
	Hostname func() string // net.hostname; empty means dev-<id>
	Portal   PortalLink    // nil: no setup portal
	PortalIP string
	Net      func(netroute.Iface)        // the station's state for the default route
	Publish  func(name string, data any) // `wifi` and `wifi_scan` events
	// Jitter returns a number in [0, 1); nil is math/rand.
	Jitter func() float64
}

// Reason is a disconnect reason as the status shows it.
type Reason struct {
	Code int    `json:"code"`
	Text string `json:"text"`
}

// Reason codes the manager itself records (the driver's are in board).
const (
	ReasonNoIP           = 1001
	ReasonConnectTimeout = 1002
	ReasonIPLost         = 1003
	ReasonConfigChange   = 1004
	ReasonDisabled       = 1005
)

var reasonTexts = map[int]string{
	201: "network not in range", 202: "wrong password", 2: "wrong password", 15: "wrong password",
	204: "auth timed out, weak signal", 200: "lost beacon",
	ReasonNoIP: "associated but no IP address (DHCP timeout)", ReasonConnectTimeout: "no answer from the driver (connect timeout)",
	ReasonIPLost: "IP address lost", ReasonConfigChange: "reconnecting after configuration change", ReasonDisabled: "station disabled",
}

// ReasonFor is the reason object of a code; unknown codes read `unknown reason`, the number
// in `code` alongside. Code 0 is no reason yet.
func ReasonFor(code int) Reason {
	if code == 0 {
		return Reason{}
	}
	if t, ok := reasonTexts[code]; ok {
		return Reason{Code: code, Text: t}
	}
	return Reason{Code: code, Text: "unknown reason"}
}

// States of the station.
const (
	StateDisabled     = "disabled"
	StateUnconfigured = "unconfigured"
	StateConnecting   = "connecting"
	StateObtainingIP  = "obtaining_ip"
	StateConnected    = "connected"
	StateBackoff      = "backoff"
)

// PortalStatus is the `portal` object of the status.
type PortalStatus struct {
	Active  bool   `json:"active"`
	SSID    string `json:"ssid"`
	IP      string `json:"ip,omitempty"`
	Clients *int   `json:"clients,omitempty"`
}

// Status is the GET /wifi/status document. Members that the spec gives only in some states
// are pointers, absent outside them.
type Status struct {
	State           string       `json:"state"`
	StaEnabled      bool         `json:"sta_enabled"`
	Hostname        string       `json:"hostname"`
	NetworkIndex    int          `json:"network_index"`
	SSID            *string      `json:"ssid,omitempty"`
	BSSID           *string      `json:"bssid,omitempty"`
	Channel         *int         `json:"channel,omitempty"`
	RSSI            *int         `json:"rssi,omitempty"`
	IP              *string      `json:"ip,omitempty"`
	Netmask         *string      `json:"netmask,omitempty"`
	Gateway         *string      `json:"gateway,omitempty"`
	ConnectedS      *int64       `json:"connected_s,omitempty"`
	Reason          Reason       `json:"reason"`
	BackoffMS       *int64       `json:"backoff_ms,omitempty"`
	Attempt         int          `json:"attempt"`
	Round           int          `json:"round"`
	ConnectCount    int          `json:"connect_count"`
	DisconnectCount int          `json:"disconnect_count"`
	Portal          PortalStatus `json:"portal"`
}

// ScanDoc is the GET /wifi/scan document.
type ScanDoc struct {
	Scanning bool               `json:"scanning"`
	AgeS     *int64             `json:"age_s"`
	Results  []board.ScanResult `json:"results"`
}

// Manager is the station manager.
type Manager struct {
	opts    Options
	config  chan struct{}
	recheck chan struct{} // the last portal hold was released: decide again

	mu sync.Mutex
	m  machine // guarded by mu; changed only by Run's goroutine

	portalMu     sync.Mutex // serialises portal calls and guards the portal fields
	portalActive bool
	portalSSID   string
	portalPSK    string
	portalErr    string          // the last Up failure logged, so a repeat stays quiet
	holds        map[string]bool // owners holding the portal up (HoldPortal)

	scanMu   sync.Mutex
	scanning bool
	scanned  time.Time // zero before the first scan
	results  []board.ScanResult
}

// New builds the manager; Run starts it.
func New(opts Options) *Manager {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	if opts.Hostname == nil {
		opts.Hostname = func() string { return "" }
	}
	if opts.Publish == nil {
		opts.Publish = func(string, any) {}
	}
	if opts.Net == nil {
		opts.Net = func(netroute.Iface) {}
	}
	if opts.Jitter == nil {
		opts.Jitter = rand.Float64
	}
	mg := &Manager{opts: opts, config: make(chan struct{}, 1), recheck: make(chan struct{}, 1), holds: map[string]bool{}}
	mg.m = machine{clk: opts.Clock, log: opts.Logger, radio: opts.Radio, jitter: opts.Jitter,
		state: "", idx: -1, warnedStatic: map[string]bool{}}
	return mg
}

// ConfigChanged tells the manager the wifi.* keys may have changed; it never blocks.
func (mg *Manager) ConfigChanged() {
	select {
	case mg.config <- struct{}{}:
	default:
	}
}

// Run drives the station until ctx ends; then the station leaves its network and the portal
// goes down.
func (mg *Manager) Run(ctx context.Context) error {
	events := mg.opts.Radio.Subscribe(ctx)
	mg.step(func(m *machine) { m.start(mg.opts.Settings()) })
	for {
		mg.mu.Lock()
		timerC, portalC := chanOf(mg.m.timer), chanOf(mg.m.portalTimer)
		mg.mu.Unlock()
		select {
		case <-ctx.Done():
			mg.mu.Lock()
			mg.m.stopTimers()
			mg.opts.Radio.Disconnect()
			mg.mu.Unlock()
			mg.portalMu.Lock()
			clear(mg.holds) // the device stops: no hold keeps the portal up
			mg.portalMu.Unlock()
			mg.setPortal(false, Settings{})
			return nil
		case ev, ok := <-events:
			if !ok {
				events = nil // the subscription ends with ctx
				continue
			}
			if ev.Station != nil {
				st := *ev.Station
				mg.step(func(m *machine) { m.driverEvent(st) })
			}
		case <-timerC:
			mg.step(func(m *machine) { m.timerFired() })
		case <-portalC:
			mg.step(func(m *machine) { m.portalTimer = nil; m.portalDue = true })
		case <-mg.config:
			s := mg.opts.Settings()
			mg.step(func(m *machine) { m.configChanged(s) })
		case <-mg.recheck:
			mg.step(func(*machine) {})
		}
	}
}

func chanOf(t clockwork.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.Chan()
}

// step runs one input through the machine, then tells the network layer, the portal and
// the event stream what changed, outside the lock and in order.
func (mg *Manager) step(fn func(*machine)) {
	mg.mu.Lock()
	before := mg.m.snapshot()
	fn(&mg.m)
	after := mg.m.snapshot()
	wantPortal := mg.m.portalWanted()
	settings := mg.m.settings
	mg.mu.Unlock()

	if before.netUp != after.netUp || (after.netUp && !sameIface(before.net, after.net)) {
		mg.opts.Net(after.net)
	}
	portalChanged := mg.setPortal(wantPortal, settings)
	if before.key != after.key || portalChanged {
		mg.opts.Publish("wifi", mg.Status())
	}
}

// sameIface compares two station reports by value (RSSI is a pointer).
func sameIface(a, b netroute.Iface) bool {
	ra, rb := a.RSSI, b.RSSI
	a.RSSI, b.RSSI = nil, nil
	return a == b && (ra == nil) == (rb == nil) && (ra == nil || *ra == *rb)
}

// portalSSIDFor is wifi.portal_ssid, or dev-<id> when empty.
func (mg *Manager) portalSSIDFor(s Settings) string {
	if s.PortalSSID != "" {
		return s.PortalSSID
	}
	return "dev-" + mg.opts.ID
}

// setPortal brings the portal up or down as decided; it reports whether its state changed.
// A portal that fails to come up stays down and is tried again at the next input (host/portal
// then binds what it could not before); a failure is logged when it differs from the last.
func (mg *Manager) setPortal(want bool, s Settings) bool {
	if mg.opts.Portal == nil {
		return false
	}
	mg.portalMu.Lock()
	defer mg.portalMu.Unlock()
	ssid := mg.portalSSIDFor(s)
	switch {
	case want && mg.portalActive && ssid == mg.portalSSID && s.PortalPSK == mg.portalPSK:
		return false
	case want:
		if mg.portalActive {
			mg.opts.Portal.Down()
		}
		if err := mg.opts.Portal.Up(ssid, s.PortalPSK); err != nil {
			if err.Error() != mg.portalErr {
				mg.portalErr = err.Error()
				mg.opts.Logger.Warn("setup portal did not come up", "err", err)
			}
			changed := mg.portalActive
			mg.portalActive = false
			return changed
		}
		mg.opts.Logger.Info("setup portal up", "ssid", ssid)
		mg.portalErr = ""
		mg.portalActive, mg.portalSSID, mg.portalPSK = true, ssid, s.PortalPSK
		return true
	case mg.portalActive && len(mg.holds) > 0:
		// Held: it stays up, and the status says so, until the last release.
		return false
	case mg.portalActive:
		mg.opts.Portal.Down()
		mg.opts.Logger.Info("setup portal down")
		mg.portalActive = false
		return true
	case mg.portalErr != "":
		// A failed Up may have left some services running (host/portal keeps what it could
		// bind): a portal no longer wanted takes them down too.
		mg.opts.Portal.Down()
		mg.portalErr = ""
	}
	return false
}

// HoldPortal keeps the setup portal up while owner id holds it, even once the station
// connects: a provisioning app reads the outcome through the portal after sending the
// credentials. A hold never brings a portal up; when the last one is released the manager
// decides again (taking the portal down if it is no longer wanted, with a `wifi` event). It
// never blocks.
func (mg *Manager) HoldPortal(id string, on bool) {
	mg.portalMu.Lock()
	if on {
		mg.holds[id] = true
	} else {
		delete(mg.holds, id)
	}
	released := !on && len(mg.holds) == 0
	mg.portalMu.Unlock()
	if released {
		select {
		case mg.recheck <- struct{}{}:
		default:
		}
	}
}

// Status is the current GET /wifi/status document.
func (mg *Manager) Status() Status {
	mg.mu.Lock()
	st := mg.m.status()
	settings := mg.m.settings
	mg.mu.Unlock()
	st.Hostname = mg.opts.Hostname()
	if st.Hostname == "" {
		st.Hostname = "dev-" + mg.opts.ID
	}
	mg.portalMu.Lock()
	st.Portal = PortalStatus{Active: mg.portalActive, SSID: mg.portalSSIDFor(settings)}
	if mg.portalActive {
		st.Portal.IP = mg.opts.PortalIP
		n := mg.opts.Portal.Clients()
		st.Portal.Clients = &n
	}
	mg.portalMu.Unlock()
	return st
}

// ErrBusy is a scan the driver cannot start now.
var ErrBusy = errors.New("wifi: the radio cannot scan now")

// Scan runs a scan and caches its results; a scan already running is joined.
func (mg *Manager) Scan() error {
	mg.scanMu.Lock()
	if mg.scanning {
		mg.scanMu.Unlock()
		return nil
	}
	mg.scanning = true
	mg.scanMu.Unlock()
	res, err := mg.opts.Radio.Scan()
	mg.scanMu.Lock()
	mg.scanning = false
	if err != nil {
		mg.scanMu.Unlock()
		if errors.Is(err, board.ErrScanBusy) {
			return ErrBusy
		}
		return fmt.Errorf("wifi scan: %w", err)
	}
	mg.results, mg.scanned = res, mg.opts.Clock.Now()
	mg.scanMu.Unlock()
	mg.opts.Publish("wifi_scan", mg.ScanDoc())
	return nil
}

// ScanDoc is the cached GET /wifi/scan document.
func (mg *Manager) ScanDoc() ScanDoc {
	mg.scanMu.Lock()
	defer mg.scanMu.Unlock()
	doc := ScanDoc{Scanning: mg.scanning, Results: append([]board.ScanResult{}, mg.results...)}
	if !mg.scanned.IsZero() {
		age := int64(mg.opts.Clock.Since(mg.scanned) / time.Second)
		doc.AgeS = &age
	}
	return doc
}

// OnConnect is the `wifi` snapshot for a new SSE stream.
func (mg *Manager) OnConnect() (string, any) { return "wifi", mg.Status() }

// Routes lists the /wifi endpoints.
func (mg *Manager) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/wifi/status", Handler: api.Document(mg.Status), Doc: &api.Doc{Summary: "WiFi station and setup portal",
			Description: "The station's state, the network it uses or tries, the last disconnect reason, backoff and counters, and the setup portal. Fields given only in some states are absent outside them.",
			Response:    "{state, sta_enabled, hostname, network_index, ssid?, bssid?, channel?, rssi?, ip?, netmask?, gateway?, connected_s?, reason, backoff_ms?, attempt, round, connect_count, disconnect_count, portal}"}},
		{Method: http.MethodPost, Path: "/wifi/scan", NoBody: true, Handler: func(w http.ResponseWriter, _ *http.Request) {
			switch err := mg.Scan(); {
			case errors.Is(err, ErrBusy):
				api.WriteErr(w, api.Errorf(http.StatusConflict, api.CodeBusy, "the radio cannot scan now"))
			case err != nil:
				api.WriteErr(w, api.Errorf(http.StatusInternalServerError, api.CodeInternal, "%v", err))
			default:
				api.WriteJSON(w, http.StatusAccepted, map[string]string{"status": "scanning"})
			}
		}, Doc: &api.Doc{Summary: "Start a WiFi scan",
			Description: "Starts a scan; the results arrive in GET /wifi/scan and the wifi_scan event. 409 busy while the radio cannot scan. No body, JSON content type required.",
			Status:      http.StatusAccepted, Response: "{status: scanning}"}},
		{Method: http.MethodGet, Path: "/wifi/scan", Handler: api.Document(mg.ScanDoc), Doc: &api.Doc{Summary: "WiFi scan results",
			Description: "The cached results of the last scan; age_s is null before the first scan.",
			Response:    "{scanning, age_s, results: [{ssid, bssid, rssi, channel, auth}]}"}},
	}
}

// staticAddress is the static ip/netmask/gateway when wifi.ip_mode is static and they parse.
func staticAddress(s Settings) (ip, mask, gw string, ok bool) {
	if s.IPMode != "static" {
		return "", "", "", false
	}
	a, m := net.ParseIP(s.IP), net.ParseIP(s.Netmask)
	if a == nil || a.To4() == nil || m == nil || m.To4() == nil {
		return "", "", "", false
	}
	if ones, bits := net.IPMask(m.To4()).Size(); ones == 0 && bits == 0 {
		return "", "", "", false
	}
	return a.To4().String(), m.To4().String(), s.Gateway, true
}
