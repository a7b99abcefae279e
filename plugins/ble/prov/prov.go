// Package prov is the provisioning flow of ESP-IDF's wifi_provisioning manager, transport
// independent: it starts when no WiFi network is configured (or on a long button press),
// takes the credentials a phone app sends, stores them in WiFi slot 0, reports the station's
// progress to the app as prov-config's status (connecting, connected, or failed with the
// reason) and stops once the app has seen the outcome, or after a timeout.
//
// Choices where ESP-IDF leaves the device to decide:
//   - After a success provisioning stays up at least Linger (30 s), and then until the app
//     has read the final state or gone away (its connection closed), so an app that polls the
//     status a few seconds after applying sees "connected" on the session it opened.
//   - A failure (wrong password, network not found) keeps provisioning up: the app can reset
//     (prov-ctrl) and send other credentials. Station reasons other than those two mean the
//     station is still trying and read as "connecting".
//   - A failure counts only after the station was seen attempting the new network, so a
//     backoff left over from before the credentials arrived is not reported as their outcome.
//   - Timeout (default 15 min) ends provisioning whatever its state; a new one starts only on
//     the next trigger.
package prov

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/plugins/ble/protocomm"
)

// Schemes (f_ble.prov_scheme).
const (
	SchemeBLE    = "ble"
	SchemeSoftAP = "softap"
)

// Defaults.
const (
	DefaultTimeout = 15 * time.Minute
	DefaultLinger  = 30 * time.Second
)

// Station states as the WiFi station manager names them (GET /wifi/status `state`).
const (
	StaConnecting  = "connecting"
	StaObtainingIP = "obtaining_ip"
	StaConnected   = "connected"
	StaBackoff     = "backoff"
)

// Clock is what the flow needs of a clock: a clockwork.Clock has it, and so does a plugin's
// clock made of its timers.
type Clock interface {
	Now() time.Time
	Since(t time.Time) time.Duration
	AfterFunc(d time.Duration, f func()) clockwork.Timer
}

// Station is the WiFi station as the flow needs it.
type Station struct {
	State   string
	Reason  int // last disconnect reason code (host/wifi codes)
	IP      string
	SSID    string
	BSSID   string
	Channel int
}

// Doc is the GET /prov document.
type Doc struct {
	Active         bool   `json:"active"`
	GotCredentials bool   `json:"got_credentials"`
	ServiceName    string `json:"service_name"`
	PoP            string `json:"pop"`
	Scheme         string `json:"scheme"`
}

// Options wire the flow to the device.
type Options struct {
	Clock Clock
	// Scheme is the transport; SchemeOf, when set, is asked at each Start instead.
	Scheme      string
	SchemeOf    func() string
	ServiceName string
	PoP         string
	Security    int // protocomm.Sec0 or Sec1
	// Store writes the credentials into WiFi slot 0 (through the configuration).
	Store func(ssid, psk string) error
	// Scan lists the access points in range.
	Scan func() ([]protocomm.AP, error)
	// Station reads the station's current state.
	Station func() Station
	// Changed is told each time the document changes, with the new document (the `ble`
	// event, the transport going up or down). Called without the flow's lock held.
	Changed func(Doc)
	Timeout time.Duration
	Linger  time.Duration
}

// Flow is one device's provisioning. Its methods are safe for concurrent use.
type Flow struct {
	opts Options

	mu          sync.Mutex
	scheme      string             // the scheme of the running (or last) provisioning
	handler     *protocomm.Handler // new at each Start: the transports drop older sessions
	active      bool
	gotCreds    bool
	pending     *creds // set, not applied yet
	applied     bool
	sawAttempt  bool
	connectedAt time.Time
	finalRead   bool
	clientGone  bool
	timeout     clockwork.Timer
	linger      clockwork.Timer
}

type creds struct{ ssid, psk string }

// ErrInactive is an exchange while provisioning is not running.
var ErrInactive = errors.New("prov: provisioning is not active")

// New builds a flow that is not running.
func New(opts Options) *Flow {
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Linger <= 0 {
		opts.Linger = DefaultLinger
	}
	if opts.Scheme == "" {
		opts.Scheme = SchemeBLE
	}
	f := &Flow{opts: opts, scheme: opts.Scheme}
	f.handler = f.newHandler()
	return f
}

func (f *Flow) newHandler() *protocomm.Handler {
	var pop []byte
	if f.opts.Security == protocomm.Sec1 {
		pop = []byte(f.opts.PoP)
	}
	return &protocomm.Handler{Security: f.opts.Security, PoP: pop, Device: device{f}}
}

// Handler is the protocomm handler the transports serve: a new one for each provisioning
// run, so a session of an earlier run (the transports key sessions by handler) is over.
func (f *Flow) Handler() *protocomm.Handler {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.handler
}

// Doc is the GET /prov document now.
func (f *Flow) Doc() Doc {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.docLocked()
}

func (f *Flow) docLocked() Doc {
	return Doc{Active: f.active, GotCredentials: f.gotCreds, ServiceName: f.opts.ServiceName, PoP: f.opts.PoP, Scheme: f.scheme}
}

// Active reports whether provisioning runs.
func (f *Flow) Active() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.active
}

// Start begins provisioning (no network configured, or a long button press); a running
// provisioning is left as it is.
func (f *Flow) Start() {
	f.mu.Lock()
	if f.active {
		f.mu.Unlock()
		return
	}
	if f.opts.SchemeOf != nil {
		f.scheme = f.opts.SchemeOf()
	}
	f.handler = f.newHandler()
	f.active, f.gotCreds, f.pending, f.applied, f.sawAttempt = true, false, nil, false, false
	f.connectedAt, f.finalRead, f.clientGone = time.Time{}, false, false
	f.timeout = f.opts.Clock.AfterFunc(f.opts.Timeout, f.Stop)
	d := f.docLocked()
	f.mu.Unlock()
	f.changed(d)
}

// Stop ends provisioning; idempotent.
func (f *Flow) Stop() {
	f.mu.Lock()
	if !f.active {
		f.mu.Unlock()
		return
	}
	f.active = false
	f.stopTimersLocked()
	d := f.docLocked()
	f.mu.Unlock()
	f.changed(d)
}

func (f *Flow) stopTimersLocked() {
	for _, t := range []clockwork.Timer{f.timeout, f.linger} {
		if t != nil {
			t.Stop()
		}
	}
	f.timeout, f.linger = nil, nil
}

func (f *Flow) changed(d Doc) {
	if f.opts.Changed != nil {
		f.opts.Changed(d)
	}
}

// StationChanged feeds the station's state changes (the `wifi` event).
func (f *Flow) StationChanged(st Station) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.active || !f.applied {
		return
	}
	switch st.State {
	case StaConnecting, StaObtainingIP:
		f.sawAttempt = true
	case StaConnected:
		if f.connectedAt.IsZero() {
			f.connectedAt = f.opts.Clock.Now()
			f.linger = f.opts.Clock.AfterFunc(f.opts.Linger, f.maybeFinish)
		}
	}
}

// ClientGone is the transport's news that the client's connection closed.
func (f *Flow) ClientGone() {
	f.mu.Lock()
	f.clientGone = true
	f.mu.Unlock()
	f.maybeFinish()
}

// maybeFinish stops provisioning after a success once the linger has passed and the app
// has read the outcome or gone.
func (f *Flow) maybeFinish() {
	f.mu.Lock()
	done := f.active && !f.connectedAt.IsZero() && f.opts.Clock.Since(f.connectedAt) >= f.opts.Linger && (f.finalRead || f.clientGone)
	f.mu.Unlock()
	if done {
		f.Stop()
	}
}

// status is prov-config's get-status answer.
func (f *Flow) status() protocomm.StationState {
	f.mu.Lock()
	if !f.applied {
		f.mu.Unlock()
		return protocomm.StationState{State: protocomm.StaDisconnected}
	}
	saw := f.sawAttempt
	f.mu.Unlock()
	st := f.opts.Station()
	out := protocomm.StationState{State: protocomm.StaConnecting}
	switch {
	case st.State == StaConnected:
		out = protocomm.StationState{State: protocomm.StaConnected, IP: st.IP, SSID: st.SSID,
			BSSID: macBytes(st.BSSID), Channel: int32(st.Channel), Auth: protocomm.AuthWPA2PSK}
		f.StationChanged(st) // a poll may see the success before the event does
	case st.State == StaBackoff && saw:
		if r, ok := failReason(st.Reason); ok {
			out = protocomm.StationState{State: protocomm.StaConnectionFailed, FailReason: r}
		}
	}
	if out.State == protocomm.StaConnected || out.State == protocomm.StaConnectionFailed {
		f.mu.Lock()
		f.finalRead = true
		f.mu.Unlock()
		f.maybeFinish()
	}
	return out
}

// failReason maps a station disconnect reason to the app's failure reason; false for a
// reason the station retries through.
func failReason(code int) (protocomm.FailReason, bool) {
	switch code {
	case 201:
		return protocomm.FailNetworkNotFound, true
	case 2, 15, 202, 204:
		return protocomm.FailAuthError, true
	}
	return 0, false
}

// AP is a network a scan heard as prov-scan lists it; auth is the board's name of the
// security (open, wep, wpa, wpa2, wpa/wpa2, wpa2-enterprise, wpa3, wpa2/wpa3).
func AP(ssid, bssid string, channel, rssi int, auth string) protocomm.AP {
	return protocomm.AP{SSID: ssid, BSSID: macBytes(bssid), Channel: uint32(max(channel, 0)), RSSI: int32(rssi), Auth: authMode(auth)}
}

// authMode maps the board's auth names to the app's enum.
func authMode(a string) protocomm.AuthMode {
	switch a {
	case "wep":
		return protocomm.AuthWEP
	case "wpa":
		return protocomm.AuthWPAPSK
	case "wpa2":
		return protocomm.AuthWPA2PSK
	case "wpa/wpa2":
		return protocomm.AuthWPAWPA2PSK
	case "wpa2-enterprise":
		return protocomm.AuthWPA2Enterprise
	case "wpa3":
		return protocomm.AuthWPA3PSK
	case "wpa2/wpa3":
		return protocomm.AuthWPA2WPA3PSK
	}
	return protocomm.AuthOpen
}

func macBytes(s string) []byte {
	var b [6]byte
	if n, err := fmt.Sscanf(s, "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]); err != nil || n != 6 {
		return nil
	}
	return b[:]
}

// device is the flow as protocomm's endpoints see it.
type device struct{ f *Flow }

func (d device) SetConfig(ssid, psk string, _ []byte, _ int32) error {
	f := d.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.active {
		return ErrInactive
	}
	if ssid == "" || len(ssid) > 32 || (psk != "" && (len(psk) < 8 || len(psk) > 63)) {
		return fmt.Errorf("prov: ssid of %d bytes, passphrase of %d bytes: out of range", len(ssid), len(psk))
	}
	f.pending = &creds{ssid, psk}
	return nil
}

func (d device) ApplyConfig() error {
	f := d.f
	f.mu.Lock()
	if !f.active || f.pending == nil {
		f.mu.Unlock()
		return fmt.Errorf("prov: apply without credentials: %w", protocomm.ErrState)
	}
	c := *f.pending
	f.pending = nil
	// Marked and announced before the store: the station may join (and the portal be asked
	// down) before Store returns, and the app must still read the outcome, so whoever holds
	// the portal for it learns of the credentials first.
	wasGot := f.gotCreds
	f.gotCreds, f.applied, f.sawAttempt, f.connectedAt, f.finalRead = true, true, false, time.Time{}, false
	d2 := f.docLocked()
	f.mu.Unlock()
	f.changed(d2)
	if err := f.opts.Store(c.ssid, c.psk); err != nil {
		f.mu.Lock()
		f.gotCreds, f.applied = wasGot, false
		d3 := f.docLocked()
		f.mu.Unlock()
		f.changed(d3)
		return fmt.Errorf("prov: store credentials: %w", err)
	}
	return nil
}

func (d device) Status() protocomm.StationState { return d.f.status() }

func (d device) Scan() ([]protocomm.AP, error) {
	if d.f.opts.Scan == nil {
		return nil, nil
	}
	return d.f.opts.Scan()
}

func (d device) Reset() error {
	f := d.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.active || !f.applied || !f.connectedAt.IsZero() {
		return protocomm.ErrState
	}
	f.applied, f.pending, f.sawAttempt = false, nil, false
	return nil
}

func (d device) Reprov() error {
	f := d.f
	f.mu.Lock()
	ok := f.active && !f.connectedAt.IsZero()
	f.mu.Unlock()
	if !ok {
		return protocomm.ErrState
	}
	f.mu.Lock()
	f.applied, f.gotCreds, f.pending, f.sawAttempt, f.connectedAt, f.finalRead = false, false, nil, false, time.Time{}, false
	if f.linger != nil {
		f.linger.Stop()
		f.linger = nil
	}
	d2 := f.docLocked()
	f.mu.Unlock()
	f.changed(d2)
	return nil
}
