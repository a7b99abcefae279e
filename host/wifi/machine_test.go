package wifi

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/board"
	"devhost/host/netroute"
	"devhost/host/testio"
)

// fakePortal stands in for host/portal: it records what the manager asked.
type fakePortal struct {
	mu        sync.Mutex
	up        bool
	ssid, psk string
	ups       int
	downs     int
	clients   int
	fail      error
}

func (p *fakePortal) Up(ssid, psk string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != nil {
		return p.fail
	}
	p.up, p.ssid, p.psk = true, ssid, psk
	p.ups++
	return nil
}

func (p *fakePortal) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = false
	p.downs++
}

func (p *fakePortal) Clients() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.clients
}

func (p *fakePortal) state() (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.up, p.ssid
}

// warnings counts the manager's warnings by message.
type warnings struct {
	mu sync.Mutex
	n  map[string]int
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		w.mu.Lock()
		w.n[r.Message]++
		w.mu.Unlock()
	}
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }
func (w *warnings) count(prefix string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for m, c := range w.n {
		if strings.HasPrefix(m, prefix) {
			n += c
		}
	}
	return n
}

type env struct {
	t      *testing.T
	clk    *clockwork.FakeClock
	sim    *board.Sim
	mg     *Manager
	portal *fakePortal
	warn   *warnings

	mu       sync.Mutex
	settings Settings
	reads    int // Settings calls: the manager read a change
	net      []netroute.Iface
	events   map[string]int
}

func baseSettings() Settings {
	return Settings{StaEnabled: true, IPMode: "dhcp", PortalEnabled: true, PortalAfter: time.Hour,
		BackoffMax: 300 * time.Second, ConnectTimeout: 15 * time.Second, DHCPTimeout: 30 * time.Second}
}

// newEnv starts a manager on a simulated board holding aps, with the settings mutated by f.
// The jitter is fixed at the middle of its range, so delays are exact.
func newEnv(t *testing.T, f func(*Settings), aps ...board.APUpdate) *env {
	t.Helper()
	file := board.DefaultFile()
	file.WiFi.APs = nil
	sim, err := board.NewSim(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range aps {
		if _, err := sim.AddAP(a); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{t: t, clk: clockwork.NewFakeClock(), sim: sim, portal: &fakePortal{}, warn: &warnings{n: map[string]int{}},
		settings: baseSettings(), events: map[string]int{}}
	if f != nil {
		f(&e.settings)
	}
	e.mg = New(Options{Clock: e.clk, Logger: slog.New(e.warn), Radio: sim, ID: "abcd", Portal: e.portal, PortalIP: "127.4.171.205",
		Settings: func() Settings { e.mu.Lock(); defer e.mu.Unlock(); e.reads++; return e.settings },
		Net:      func(i netroute.Iface) { e.mu.Lock(); e.net = append(e.net, i); e.mu.Unlock() },
		Publish:  func(name string, _ any) { e.mu.Lock(); e.events[name]++; e.mu.Unlock() },
		Jitter:   func() float64 { return 0.5 }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.mg.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return e
}

// set changes the settings and tells the manager.
func (e *env) set(f func(*Settings)) {
	e.mu.Lock()
	f(&e.settings)
	e.mu.Unlock()
	e.mg.ConfigChanged()
}

// hangGuard bounds a wait for the manager's goroutine: a guard against a hang, not a timing.
const hangGuard = 10 * time.Second

// wait polls the status until cond holds; the deadline only guards against a hang.
func (e *env) wait(what string, cond func(Status) bool) Status {
	e.t.Helper()
	return testio.Await(e.t, hangGuard, what, e.mg.Status, cond)
}

func (e *env) waitState(what, state string, idx int) Status {
	e.t.Helper()
	return e.wait(what, func(s Status) bool { return s.State == state && s.NetworkIndex == idx })
}

// lastNet is the station's last report to the network layer.
func (e *env) lastNet() (netroute.Iface, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.net) == 0 {
		return netroute.Iface{}, 0
	}
	return e.net[len(e.net)-1], len(e.net)
}

func (e *env) waitNet(what string, up bool, also ...func(netroute.Iface) bool) netroute.Iface {
	e.t.Helper()
	last := func() *netroute.Iface { // nil before the first report
		if n, c := e.lastNet(); c > 0 {
			return &n
		}
		return nil
	}
	return *testio.Await(e.t, hangGuard, what, last, func(n *netroute.Iface) bool {
		return n != nil && n.Up == up && (len(also) == 0 || also[0](*n))
	})
}

func (e *env) waitPortal(what string, up bool) {
	e.t.Helper()
	e.wait(what, func(s Status) bool {
		pu, _ := e.portal.state()
		return s.Portal.Active == up && pu == up
	})
}

var (
	marina = board.APUpdate{SSID: "Marina", PSK: "mooring-line-7", RSSI: ptr(-60)}
	fuel   = board.APUpdate{SSID: "Fuel Dock", PSK: "diesel-only", RSSI: ptr(-70)}
)

func ptr[T any](v T) *T { return &v }

func nets(ns ...Network) (out [Slots]Network) {
	copy(out[:], ns)
	return out
}

func TestUnconfiguredAndDisabledPortalUpAtOnce(t *testing.T) {
	e := newEnv(t, nil, marina)
	st := e.waitState("no network has an SSID", StateUnconfigured, -1)
	e.waitPortal("portal up immediately when unconfigured", true)
	st = e.mg.Status()
	if st.Portal.SSID != "dev-abcd" || st.Portal.IP != "127.4.171.205" || st.Portal.Clients == nil || *st.Portal.Clients != 0 ||
		st.Hostname != "dev-abcd" || st.SSID != nil || st.BackoffMS != nil || st.IP != nil || !st.StaEnabled {
		t.Fatalf("unconfigured status %+v", st)
	}
	if _, ssid := e.portal.state(); ssid != "dev-abcd" {
		t.Fatalf("portal SSID %q", ssid)
	}
	e.set(func(s *Settings) { s.StaEnabled = false; s.PortalSSID = "Setup Me"; s.PortalPSK = "portal-pass" })
	st = e.waitState("station disabled", StateDisabled, -1)
	if st.Reason != (Reason{1005, "station disabled"}) || st.StaEnabled {
		t.Fatalf("disabled status %+v", st)
	}
	e.wait("portal follows its SSID", func(s Status) bool {
		up, ssid := e.portal.state()
		return s.Portal.Active && s.Portal.SSID == "Setup Me" && up && ssid == "Setup Me"
	})
	e.portal.mu.Lock()
	psk := e.portal.psk
	e.portal.mu.Unlock()
	if psk != "portal-pass" {
		t.Fatalf("portal psk %q", psk)
	}
	e.set(func(s *Settings) { s.PortalEnabled = false })
	e.waitPortal("wifi.portal_enabled false: never up", false)
}

func TestJoinReportsUpAndTakesThePortalDown(t *testing.T) {
	e := newEnv(t, nil, marina)
	e.waitPortal("unconfigured", true)
	e.set(func(s *Settings) { s.Networks = nets(Network{SSID: "Marina", PSK: "mooring-line-7"}) })
	st := e.waitState("start → connecting (network 0) → obtaining_ip → connected", StateConnected, 0)
	if st.SSID == nil || *st.SSID != "Marina" || *st.BSSID != board.DefaultBSSID("Marina") || *st.Channel != 6 || *st.RSSI != -60 ||
		*st.IP != "127.0.0.1" || *st.Netmask != "255.0.0.0" || *st.Gateway != "127.0.0.1" || *st.ConnectedS != 0 ||
		st.BackoffMS != nil || st.ConnectCount != 1 || st.Attempt != 1 || st.Round != 0 || st.Reason.Code != ReasonConfigChange {
		t.Fatalf("connected status %+v", st)
	}
	n := e.waitNet("connected reports up to the network layer", true)
	if n.Name != "wifi_sta" || n.IP != "127.0.0.1" || n.RSSI == nil || *n.RSSI != -60 {
		t.Fatalf("network report %+v", n)
	}
	e.waitPortal("down when connected", false)
	// The signal changes: the status and the station route follow, no transition.
	if _, err := e.sim.AddAP(board.APUpdate{SSID: "Marina", PSK: "mooring-line-7", RSSI: ptr(-71)}); err != nil {
		t.Fatal(err)
	}
	e.wait("rssi refresh", func(s Status) bool { return s.RSSI != nil && *s.RSSI == -71 && s.ConnectCount == 1 })
	e.waitNet("rssi reported", true, func(n netroute.Iface) bool { return n.RSSI != nil && *n.RSSI == -71 })
	e.clk.Advance(90 * time.Second)
	if st := e.mg.Status(); *st.ConnectedS != 90 {
		t.Fatalf("connected_s %d", *st.ConnectedS)
	}
}

// A provisioning plugin holds the portal (portal_hold) so the app can read the outcome after
// the station connected: the portal stays up and the status says so; the last release takes
// it down, with a wifi event, and a hold never brings a portal up.
func TestPortalHoldKeepsItUpAndTheStatusTrue(t *testing.T) {
	e := newEnv(t, nil, marina)
	e.waitPortal("unconfigured", true)
	e.mg.HoldPortal("ble", true)
	e.mg.HoldPortal("other", true)
	e.set(func(s *Settings) { s.Networks = nets(Network{SSID: "Marina", PSK: "mooring-line-7"}) })
	e.waitState("connected", StateConnected, 0)
	// Later inputs (here a clock tick and a config read) keep it up as well.
	e.clk.Advance(time.Minute)
	e.set(func(s *Settings) { s.PortalAfter = 2 * time.Hour })
	e.wait("the change read", func(Status) bool { e.mu.Lock(); defer e.mu.Unlock(); return e.reads >= 3 })
	st := e.mg.Status()
	if up, _ := e.portal.state(); !up || !st.Portal.Active || st.Portal.Clients == nil || st.Portal.IP == "" {
		t.Fatalf("held portal: up %v, status %+v", up, st.Portal)
	}
	e.mg.HoldPortal("ble", false)
	e.mg.HoldPortal("ble", false) // a second release of the same owner changes nothing
	st = e.mg.Status()
	if up, _ := e.portal.state(); !up || !st.Portal.Active {
		t.Fatalf("still held by another owner: up %v, status %+v", up, st.Portal)
	}
	e.mu.Lock()
	events := e.events["wifi"]
	e.mu.Unlock()
	e.mg.HoldPortal("other", false)
	e.waitPortal("the last release takes it down", false)
	e.wait("a wifi event for it", func(Status) bool { e.mu.Lock(); defer e.mu.Unlock(); return e.events["wifi"] > events })

	// A hold while the portal is down does not bring it up.
	e.mg.HoldPortal("ble", true)
	e.set(func(s *Settings) { s.PortalAfter = 3 * time.Hour })
	e.wait("the change read", func(Status) bool { e.mu.Lock(); defer e.mu.Unlock(); return e.reads >= 4 })
	if up, _ := e.portal.state(); up || e.mg.Status().Portal.Active {
		t.Fatal("a hold brought the portal up")
	}
}

func TestNextNetworkThenBackoffRounds(t *testing.T) {
	e := newEnv(t, func(s *Settings) {
		s.BackoffMax = 4 * time.Second
		s.Networks = nets(Network{SSID: "Elsewhere", PSK: "password1"}, Network{}, Network{SSID: "Marina", PSK: "wrong-password"})
	}, marina)
	// connecting | disconnect | another network → connecting (next), reason recorded; the
	// empty slot 1 is skipped; round complete → backoff.
	st := e.waitState("round complete", StateBackoff, 2)
	if st.Reason != (Reason{202, "wrong password"}) || st.Round != 0 || st.BackoffMS == nil || *st.BackoffMS != 1000 || st.Attempt != 2 ||
		st.SSID != nil || st.IP != nil {
		t.Fatalf("first backoff %+v", st)
	}
	// backoff | timer → connecting (network 0): 1 s, 2 s, 4 s, then capped at 4 s.
	for round, want := range []int64{2000, 4000, 4000, 4000} {
		prev := *st.BackoffMS
		e.clk.Advance(time.Duration(prev) * time.Millisecond)
		st = e.wait("next round", func(s Status) bool { return s.State == StateBackoff && s.Round == round+1 })
		if *st.BackoffMS != want {
			t.Fatalf("round %d: backoff_ms %d, want %d", round+1, *st.BackoffMS, want)
		}
	}
	// Round resets on success.
	if _, err := e.sim.AddAP(board.APUpdate{SSID: "Elsewhere", PSK: "password1"}); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(4 * time.Second)
	st = e.waitState("joined on the next round", StateConnected, 0)
	if st.Round != 0 || st.ConnectCount != 1 || st.Attempt != 11 {
		t.Fatalf("after success %+v", st)
	}
}

func TestBackoffJitter(t *testing.T) {
	for _, c := range []struct {
		jitter float64
		want   time.Duration
	}{{0, 750 * time.Millisecond}, {0.5, time.Second}, {0.999, 1249 * time.Millisecond}} {
		m := machine{clk: clockwork.NewFakeClock(), jitter: func() float64 { return c.jitter }, settings: Settings{BackoffMax: time.Minute}}
		m.backoff()
		if got := m.backoffUntil.Sub(m.clk.Now()); got.Truncate(time.Millisecond) != c.want {
			t.Errorf("jitter %v: delay %v, want %v", c.jitter, got, c.want)
		}
	}
	m := machine{clk: clockwork.NewFakeClock(), jitter: func() float64 { return 0.5 }, settings: Settings{BackoffMax: 300 * time.Second}, round: 40}
	m.backoff()
	if got := m.backoffUntil.Sub(m.clk.Now()); got != 300*time.Second {
		t.Errorf("round 40: %v, want the 300 s cap", got)
	}
}

func TestConnectAndDHCPTimeouts(t *testing.T) {
	e := newEnv(t, nil, board.APUpdate{SSID: "Silent", PSK: "password1"}, marina)
	if err := e.sim.SetFault("Silent", board.FaultNoAnswer); err != nil {
		t.Fatal(err)
	}
	if err := e.sim.SetFault("Marina", board.FaultNoIP); err != nil {
		t.Fatal(err)
	}
	e.set(func(s *Settings) {
		s.Networks = nets(Network{SSID: "Silent", PSK: "password1"}, Network{SSID: "Marina", PSK: "mooring-line-7"})
	})
	e.waitState("connecting network 0", StateConnecting, 0)
	e.clk.Advance(15 * time.Second)
	st := e.waitState("connect timeout → next network → obtaining_ip", StateObtainingIP, 1)
	if st.Reason.Code != ReasonConnectTimeout || st.SSID == nil || *st.SSID != "Marina" || st.IP != nil || st.ConnectedS != nil {
		t.Fatalf("obtaining_ip status %+v", st)
	}
	e.clk.Advance(30 * time.Second)
	st = e.waitState("DHCP timeout, round complete → backoff", StateBackoff, 1)
	if st.Reason != (Reason{1001, "associated but no IP address (DHCP timeout)"}) || st.DisconnectCount != 1 {
		t.Fatalf("after the DHCP timeout %+v", st)
	}
	// obtaining_ip | drop → next network or backoff: the AP disappears while the station waits.
	e.clk.Advance(time.Second)
	e.waitState("round 1, network 0", StateConnecting, 0)
	e.clk.Advance(15 * time.Second)
	e.waitState("obtaining_ip again", StateObtainingIP, 1)
	if err := e.sim.RemoveAP("Marina"); err != nil {
		t.Fatal(err)
	}
	st = e.wait("drop while obtaining_ip", func(s Status) bool { return s.State == StateBackoff && s.Round == 1 })
	if st.Reason.Code != 200 || st.DisconnectCount != 2 {
		t.Fatalf("after the drop %+v", st)
	}
}

func TestConnectedDropRetriesTheSameNetworkOnce(t *testing.T) {
	e := newEnv(t, func(s *Settings) {
		s.Networks = nets(Network{SSID: "Marina", PSK: "mooring-line-7"}, Network{SSID: "Fuel Dock", PSK: "diesel-only"})
	}, marina, fuel)
	e.waitState("connected", StateConnected, 0)
	// drop once: the retry of the same network succeeds.
	if err := e.sim.SetFault("Marina", board.FaultDrop); err != nil {
		t.Fatal(err)
	}
	st := e.wait("dropped and back", func(s Status) bool { return s.State == StateConnected && s.ConnectCount == 2 })
	if st.NetworkIndex != 0 || st.DisconnectCount != 1 || st.Reason != (Reason{200, "lost beacon"}) || st.Attempt != 1 {
		t.Fatalf("after the retried drop %+v", st)
	}
	// The AP goes: the one retry fails (201) and the station moves on to network 1.
	if err := e.sim.RemoveAP("Marina"); err != nil {
		t.Fatal(err)
	}
	st = e.wait("failed over", func(s Status) bool { return s.State == StateConnected && s.ConnectCount == 3 })
	if st.NetworkIndex != 1 || *st.SSID != "Fuel Dock" || st.Reason.Code != 201 || st.Attempt != 2 || st.DisconnectCount != 2 {
		t.Fatalf("after the failover %+v", st)
	}
	// IP lost (1003): retry the same network, which now gives no address.
	if err := e.sim.SetFault("Fuel Dock", board.FaultNoIP); err != nil {
		t.Fatal(err)
	}
	st = e.waitState("IP lost → retry the same network", StateObtainingIP, 1)
	if st.Reason != (Reason{1003, "IP address lost"}) || st.DisconnectCount != 3 {
		t.Fatalf("after the IP loss %+v", st)
	}
	if n := e.waitNet("the station is down for the network layer", false); n.Name != "wifi_sta" {
		t.Fatalf("down report %+v", n)
	}
}

func TestConfigChanges(t *testing.T) {
	marinaNet := Network{SSID: "Marina", PSK: "mooring-line-7"}
	e := newEnv(t, func(s *Settings) { s.Networks = nets(marinaNet) }, marina, fuel)
	e.waitState("connected", StateConnected, 0)
	e.waitNet("up", true)
	_, reports := e.lastNet()

	// The network moves to slot 2 and another is added first: the live connection is kept.
	e.set(func(s *Settings) {
		s.Networks = nets(Network{SSID: "Fuel Dock", PSK: "diesel-only"}, Network{}, marinaNet)
	})
	st := e.waitState("kept, now slot 2", StateConnected, 2)
	if st.ConnectCount != 1 {
		t.Fatalf("the connection was not kept: %+v", st)
	}
	// A change elsewhere (portal settings) leaves it alone too.
	e.set(func(s *Settings) { s.PortalSSID = "Setup" })
	e.wait("portal SSID read", func(s Status) bool { return s.Portal.SSID == "Setup" })
	if _, n := e.lastNet(); n != reports {
		t.Fatalf("the network layer heard %d reports, want %d", n, reports)
	}
	// The current network's password changes: reconnect from the top (1004): slot 0 joins.
	e.set(func(s *Settings) {
		s.Networks = nets(Network{SSID: "Fuel Dock", PSK: "diesel-only"}, Network{}, Network{SSID: "Marina", PSK: "another-password"})
	})
	st = e.wait("reconnected from the top", func(s Status) bool { return s.State == StateConnected && s.ConnectCount == 2 })
	if st.NetworkIndex != 0 || st.Reason != (Reason{1004, "reconnecting after configuration change"}) {
		t.Fatalf("after the password change %+v", st)
	}
	// The BSSID pin is part of the network: pinning reconnects from the top too.
	e.set(func(s *Settings) {
		s.Networks = nets(Network{SSID: "Fuel Dock", PSK: "diesel-only", BSSID: "02:00:00:00:00:09"})
	})
	st = e.waitState("pinned to an AP not in range", StateBackoff, 0)
	if st.Reason.Code != 201 {
		t.Fatalf("pinned elsewhere %+v", st)
	}
	// A change that leaves the list alone never interrupts a backoff.
	e.set(func(s *Settings) { s.PortalPSK = "portal-pass" })
	e.wait("portal PSK read", func(s Status) bool { return s.State == StateBackoff })
	// Station disabled while retrying: disabled, 1005.
	e.set(func(s *Settings) { s.StaEnabled = false })
	st = e.waitState("disabled", StateDisabled, -1)
	if st.Reason.Code != ReasonDisabled || st.BackoffMS != nil {
		t.Fatalf("disabled %+v", st)
	}
	// No SSID at all: unconfigured.
	e.set(func(s *Settings) { s.StaEnabled = true; s.Networks = nets() })
	e.waitState("unconfigured", StateUnconfigured, -1)
}

func TestDisabledWhileConnectedReportsDown(t *testing.T) {
	e := newEnv(t, func(s *Settings) { s.Networks = nets(Network{SSID: "Marina", PSK: "mooring-line-7"}) }, marina)
	e.waitState("connected", StateConnected, 0)
	e.waitNet("up", true)
	e.set(func(s *Settings) { s.StaEnabled = false })
	e.waitState("disabled", StateDisabled, -1)
	e.waitNet("down", false)
	e.waitPortal("portal up with the station disabled", true)
	if st := e.sim.WiFi().Station.State; st != "idle" {
		t.Fatalf("the radio still holds the network: %s", st)
	}
}

func TestPasswordRules(t *testing.T) {
	e := newEnv(t, func(s *Settings) {
		s.Networks = nets(Network{SSID: "Short", PSK: "short"}, Network{SSID: "Open Bay", PSK: "password1"},
			Network{SSID: "Long", PSK: strings.Repeat("p", 64)}, Network{SSID: "Open Bay"})
	}, board.APUpdate{SSID: "Short", PSK: "password1"}, board.APUpdate{SSID: "Open Bay"}, board.APUpdate{SSID: "Long", PSK: "password1"})
	// Slot 0 and 2 are skipped (password outside 8..63); slot 1 has a password, so the open
	// AP is refused (not in range); slot 3 joins it without one.
	st := e.waitState("the open network on slot 3", StateConnected, 3)
	if st.Reason.Code != 201 || st.Attempt != 2 {
		t.Fatalf("status %+v", st)
	}
	if n := e.warn.count("network slot skipped"); n != 2 {
		t.Fatalf("%d skip warnings, want 2 (one per slot)", n)
	}
	// A WEP AP is refused the same way.
	e.set(func(s *Settings) { s.Networks = nets(Network{SSID: "Old", PSK: "abcdefgh"}) })
	if _, err := e.sim.AddAP(board.APUpdate{SSID: "Old", Auth: "wep", PSK: "abcdefgh"}); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Second)
	st = e.wait("WEP refused", func(s Status) bool { return s.State == StateBackoff && s.Reason.Code == 201 })
	if st.NetworkIndex != 0 {
		t.Fatalf("status %+v", st)
	}
}

func TestStaticAddressing(t *testing.T) {
	e := newEnv(t, func(s *Settings) {
		s.Networks = nets(Network{SSID: "Marina", PSK: "mooring-line-7"})
		s.IPMode, s.IP, s.Netmask = "static", "192.168.1.300", "255.255.255.0"
	}, marina)
	// An address that does not parse falls back to DHCP with one warning.
	st := e.waitState("connected by DHCP", StateConnected, 0)
	if *st.IP != "127.0.0.1" || e.warn.count("static address does not parse") != 1 {
		t.Fatalf("status %+v, %d warnings", st, e.warn.count("static address"))
	}
	if err := e.sim.SetFault("Marina", board.FaultDrop); err != nil {
		t.Fatal(err)
	}
	e.wait("reconnected", func(s Status) bool { return s.State == StateConnected && s.ConnectCount == 2 })
	if n := e.warn.count("static address does not parse"); n != 1 {
		t.Fatalf("%d warnings for the same value, want 1", n)
	}
	// A static address that parses needs no DHCP (no_ip has no effect) and still raises got-IP.
	if err := e.sim.SetFault("Marina", board.FaultNoIP); err != nil {
		t.Fatal(err)
	}
	e.set(func(s *Settings) {
		s.IP, s.Gateway = "192.168.1.30", "192.168.1.1"
		s.Networks[0].PSK = "mooring-line-7"
	})
	e.set(func(s *Settings) {
		s.Networks = nets(Network{SSID: "Marina", PSK: "mooring-line-7", BSSID: board.DefaultBSSID("Marina")})
	})
	st = e.wait("static", func(s Status) bool { return s.State == StateConnected && s.IP != nil && *s.IP == "192.168.1.30" })
	if *st.Netmask != "255.255.255.0" || *st.Gateway != "192.168.1.1" {
		t.Fatalf("static status %+v", st)
	}
	e.waitNet("static reported up", true, func(n netroute.Iface) bool { return n.IP == "192.168.1.30" })
}

func TestBSSIDPinDisablesRoaming(t *testing.T) {
	near := board.APUpdate{SSID: "Quay", PSK: "password1", BSSID: "02:00:00:00:00:01", RSSI: ptr(-50)}
	far := board.APUpdate{SSID: "Quay", PSK: "password1", BSSID: "02:00:00:00:00:02", RSSI: ptr(-80)}
	e := newEnv(t, func(s *Settings) { s.Networks = nets(Network{SSID: "Quay", PSK: "password1"}) }, near, far)
	if st := e.waitState("roaming: the strongest", StateConnected, 0); *st.BSSID != near.BSSID {
		t.Fatalf("joined %s", *st.BSSID)
	}
	e.set(func(s *Settings) { s.Networks[0].BSSID = far.BSSID })
	st := e.wait("pinned", func(s Status) bool { return s.State == StateConnected && s.ConnectCount == 2 })
	if *st.BSSID != far.BSSID || *st.RSSI != -80 {
		t.Fatalf("pinned status %+v", st)
	}
}

func TestPortalAfterRetrying(t *testing.T) {
	e := newEnv(t, func(s *Settings) {
		s.PortalAfter = 90 * time.Second
		s.Networks = nets(Network{SSID: "Marina", PSK: "wrong-password"})
	}, marina)
	e.waitState("backoff", StateBackoff, 0)
	if st := e.mg.Status(); st.Portal.Active || st.Portal.IP != "" || st.Portal.Clients != nil {
		t.Fatalf("portal before the delay %+v", st.Portal)
	}
	e.clk.Advance(89 * time.Second)
	e.wait("still retrying", func(s Status) bool { return s.Round > 0 })
	if up, _ := e.portal.state(); up {
		t.Fatal("portal up before wifi.portal_after_s")
	}
	e.clk.Advance(time.Second)
	e.waitPortal("up after wifi.portal_after_s of retrying", true)
	e.portal.mu.Lock()
	e.portal.clients = 2
	e.portal.mu.Unlock()
	if st := e.mg.Status(); *st.Portal.Clients != 2 || st.Portal.IP != "127.4.171.205" {
		t.Fatalf("portal status %+v", st.Portal)
	}
	// New credentials from the portal: it stays up while the station tries, down once joined.
	e.set(func(s *Settings) { s.Networks[0].PSK = "mooring-line-7" })
	e.waitState("connected", StateConnected, 0)
	e.waitPortal("down when connected", false)
}

func TestPortalDelayChangedWhileRetrying(t *testing.T) {
	e := newEnv(t, func(s *Settings) { s.Networks = nets(Network{SSID: "Elsewhere", PSK: "password1"}) })
	e.waitState("backoff", StateBackoff, 0)
	e.clk.Advance(500 * time.Millisecond)
	e.wait("half a second of retrying", func(s Status) bool { return s.BackoffMS != nil && *s.BackoffMS == 500 })
	// Shortened below the time already spent retrying: up at once.
	e.set(func(s *Settings) { s.PortalAfter = 100 * time.Millisecond })
	e.waitPortal("up after the shortened delay", true)
}

func TestPortalThatFailsStaysDown(t *testing.T) {
	e := newEnv(t, nil, marina)
	e.portal.mu.Lock()
	e.portal.fail = context.DeadlineExceeded
	e.portal.mu.Unlock()
	e.set(func(s *Settings) { s.PortalSSID = "x" })
	e.wait("unconfigured, portal refused", func(s Status) bool { return s.State == StateUnconfigured && s.Portal.SSID == "x" })
	if st := e.mg.Status(); st.Portal.Active {
		t.Fatalf("portal reported active after a failed Up: %+v", st.Portal)
	}
}

// A portal whose Up failed is asked again at every input (host/portal then binds what it could
// not before) and comes up once it can; a failure that repeats is logged once, not at every
// input; and a portal no longer wanted is taken down even though its Up failed.
func TestPortalThatFailedIsRetried(t *testing.T) {
	e := newEnv(t, nil, marina)
	e.portal.mu.Lock()
	e.portal.fail = errors.New("dns 127.4.1.1:53: address already in use")
	e.portal.mu.Unlock()
	for _, ssid := range []string{"x", "y", "z"} {
		e.set(func(s *Settings) { s.PortalSSID = ssid })
		e.wait("portal refused for "+ssid, func(s Status) bool { return s.Portal.SSID == ssid && !s.Portal.Active })
	}
	if n := e.warn.count("setup portal did not come up"); n != 1 {
		t.Fatalf("the same failure logged %d times, want once", n)
	}
	// A failed Up can leave services running: a portal no longer wanted takes them down.
	e.portal.mu.Lock()
	downs := e.portal.downs
	e.portal.mu.Unlock()
	e.set(func(s *Settings) { s.PortalEnabled = false })
	e.wait("a Down for the failed portal", func(Status) bool {
		e.portal.mu.Lock()
		defer e.portal.mu.Unlock()
		return e.portal.downs > downs
	})
	e.portal.mu.Lock()
	e.portal.fail = nil
	e.portal.mu.Unlock()
	e.set(func(s *Settings) { s.PortalEnabled = true })
	e.waitPortal("up once Up succeeds", true)
}

func TestReasonCodes(t *testing.T) {
	for code, text := range map[int]string{
		201: "network not in range", 202: "wrong password", 2: "wrong password", 15: "wrong password",
		204: "auth timed out, weak signal", 200: "lost beacon", 1001: "associated but no IP address (DHCP timeout)",
		1002: "no answer from the driver (connect timeout)", 1003: "IP address lost",
		1004: "reconnecting after configuration change", 1005: "station disabled",
		77: "unknown reason", 203: "unknown reason",
	} {
		if r := ReasonFor(code); r.Code != code || r.Text != text {
			t.Errorf("ReasonFor(%d) = %+v, want %q", code, r, text)
		}
	}
	if r := ReasonFor(0); r != (Reason{}) {
		t.Errorf("no reason: %+v", r)
	}
}

func TestWeakSignalAuthTimeout(t *testing.T) {
	e := newEnv(t, func(s *Settings) { s.Networks = nets(Network{SSID: "Far", PSK: "password1"}) },
		board.APUpdate{SSID: "Far", PSK: "password1", RSSI: ptr(-93)})
	if st := e.waitState("backoff", StateBackoff, 0); st.Reason != (Reason{204, "auth timed out, weak signal"}) {
		t.Fatalf("status %+v", st)
	}
}
