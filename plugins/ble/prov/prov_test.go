package prov

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/testio"
	"devhost/plugins/ble/protocomm"
	"devhost/plugins/ble/provclient"
	pb "devhost/plugins/ble/provpb"
)

type rig struct {
	t     *testing.T
	clk   *clockwork.FakeClock
	flow  *Flow
	mu    sync.Mutex
	sta   Station
	slot0 [2]string
	docs  []Doc
	c     *provclient.Client
	// storeErr is what Store answers; atStore, the last Doc announced when Store ran.
	storeErr error
	atStore  Doc
}

func newRig(t *testing.T) *rig {
	r := &rig{t: t, clk: clockwork.NewFakeClock()}
	r.flow = New(Options{Clock: r.clk, Scheme: SchemeSoftAP, ServiceName: "PROV_A1B2C3", PoP: "pop12345", Security: protocomm.Sec1,
		Store: func(ssid, psk string) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.docs) > 0 {
				r.atStore = r.docs[len(r.docs)-1]
			}
			if r.storeErr != nil {
				return r.storeErr
			}
			r.slot0 = [2]string{ssid, psk}
			return nil
		},
		Station: func() Station { r.mu.Lock(); defer r.mu.Unlock(); return r.sta },
		Changed: func(d Doc) { r.mu.Lock(); defer r.mu.Unlock(); r.docs = append(r.docs, d) }})
	r.c = r.client(r.flow.Handler().NewSession())
	return r
}

// client is an app on session s, talking to whichever handler the flow serves now.
func (r *rig) client(s *protocomm.Session) *provclient.Client {
	return &provclient.Client{X: func(ep string, b []byte) ([]byte, error) { return r.flow.Handler().Handle(s, ep, b) },
		Sec: protocomm.Sec1, PoP: []byte("pop12345")}
}

func (r *rig) station(st Station) {
	r.mu.Lock()
	r.sta = st
	r.mu.Unlock()
	r.flow.StationChanged(st)
}

func (r *rig) provision(ssid, psk string) {
	r.t.Helper()
	if err := r.c.Handshake(); err != nil {
		r.t.Fatal(err)
	}
	if err := r.c.SetConfig(ssid, psk); err != nil {
		r.t.Fatal(err)
	}
	if err := r.c.ApplyConfig(); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) status() *pb.RespGetStatus {
	r.t.Helper()
	st, err := r.c.Status()
	if err != nil {
		r.t.Fatal(err)
	}
	return st
}

// wantState fails the test when the app's status does not show the station in want.
func (r *rig) wantState(what string, want pb.WifiStationState) {
	r.t.Helper()
	if got := r.status().GetStaState(); got != want {
		r.t.Fatalf("%s: station %v, want %v", what, got, want)
	}
}

func TestDocAtEveryStep(t *testing.T) {
	r := newRig(t)
	want := Doc{ServiceName: "PROV_A1B2C3", PoP: "pop12345", Scheme: SchemeSoftAP}
	if d := r.flow.Doc(); d != want {
		t.Fatalf("before start %+v", d)
	}
	r.flow.Start()
	want.Active = true
	if d := r.flow.Doc(); d != want {
		t.Fatalf("started %+v", d)
	}
	if err := r.c.Handshake(); err != nil {
		t.Fatal(err)
	}
	r.wantState("status before credentials", pb.WifiStationState_Disconnected)
	r.provision("boat", "password1")
	want.GotCredentials = true
	if d := r.flow.Doc(); d != want {
		t.Fatalf("credentials %+v", d)
	}
	if r.slot0 != [2]string{"boat", "password1"} {
		t.Fatalf("slot 0 %v", r.slot0)
	}
}

func TestSuccessLingersUntilReadAnd30s(t *testing.T) {
	r := newRig(t)
	r.flow.Start()
	r.provision("boat", "password1")
	r.wantState("before the station moved", pb.WifiStationState_Connecting)
	r.station(Station{State: StaConnecting})
	r.wantState("connecting", pb.WifiStationState_Connecting)
	r.station(Station{State: StaConnected, IP: "10.1.2.3", SSID: "boat", BSSID: "aa:bb:cc:dd:ee:ff", Channel: 6})
	st := r.status()
	if st.GetStaState() != pb.WifiStationState_Connected || st.GetConnected().GetIp4Addr() != "10.1.2.3" || len(st.GetConnected().GetBssid()) != 6 {
		t.Fatalf("connected: %v", st)
	}
	// Read, but the linger has not passed: still up.
	r.clk.Advance(DefaultLinger - time.Second)
	if !r.flow.Active() {
		t.Fatal("stopped before the linger")
	}
	r.clk.Advance(time.Second)
	// An AfterFunc callback ends the flow on its own goroutine.
	testio.Eventually(t, 10*time.Second, func() bool { return !r.flow.Active() })
	d := r.flow.Doc()
	if d.Active || !d.GotCredentials {
		t.Fatalf("after success %+v", d)
	}
}

func TestSuccessUnreadStaysUntilClientGone(t *testing.T) {
	r := newRig(t)
	r.flow.Start()
	r.provision("boat", "password1")
	r.station(Station{State: StaConnecting})
	r.station(Station{State: StaConnected, IP: "10.1.2.3"})
	r.clk.Advance(DefaultLinger * 2)
	if !r.flow.Active() {
		t.Fatal("stopped although the app never read the outcome")
	}
	r.flow.ClientGone()
	if r.flow.Active() {
		t.Fatal("still up after the client left")
	}
}

func TestFailureReasons(t *testing.T) {
	for _, tc := range []struct {
		code int
		want pb.WifiConnectFailedReason
	}{{201, pb.WifiConnectFailedReason_NetworkNotFound}, {202, pb.WifiConnectFailedReason_AuthError}, {15, pb.WifiConnectFailedReason_AuthError}} {
		r := newRig(t)
		r.flow.Start()
		// A backoff from before the credentials is not their outcome.
		r.mu.Lock()
		r.sta = Station{State: StaBackoff, Reason: tc.code}
		r.mu.Unlock()
		r.provision("boat", "password1")
		r.wantState("stale backoff", pb.WifiStationState_Connecting)
		r.station(Station{State: StaConnecting})
		r.station(Station{State: StaBackoff, Reason: tc.code})
		st := r.status()
		if st.GetStaState() != pb.WifiStationState_ConnectionFailed || st.GetFailReason() != tc.want {
			t.Fatalf("code %d: %v", tc.code, st)
		}
		r.clk.Advance(DefaultLinger * 2)
		if !r.flow.Active() {
			t.Fatal("a failure stopped provisioning")
		}
		// The app resets and tries again.
		if err := r.c.SetConfig("boat", "password2"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStationRetryReasonReadsConnecting(t *testing.T) {
	r := newRig(t)
	r.flow.Start()
	r.provision("boat", "password1")
	r.station(Station{State: StaConnecting})
	r.station(Station{State: StaBackoff, Reason: 1001})
	r.wantState("DHCP timeout", pb.WifiStationState_Connecting)
}

func TestTimeout(t *testing.T) {
	r := newRig(t)
	r.flow.Start()
	r.clk.Advance(DefaultTimeout - time.Second)
	if !r.flow.Active() {
		t.Fatal("stopped early")
	}
	r.clk.Advance(time.Second)
	// An AfterFunc callback ends the flow on its own goroutine.
	testio.Eventually(t, 10*time.Second, func() bool { return !r.flow.Active() })
	// Exchanges after the stop are refused and store nothing.
	if err := r.c.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := r.c.SetConfig("boat", "password1"); err == nil {
		t.Fatal("credentials accepted while inactive")
	}
	if r.slot0 != [2]string{} {
		t.Fatalf("slot 0 %v", r.slot0)
	}
}

func TestBadCredentialsRefused(t *testing.T) {
	r := newRig(t)
	r.flow.Start()
	if err := r.c.Handshake(); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{{"", "password1"}, {"boat", "short"}, {"0123456789012345678901234567890123", "password1"}} {
		if err := r.c.SetConfig(c[0], c[1]); err == nil {
			t.Fatalf("%q accepted", c)
		}
	}
	if err := r.c.ApplyConfig(); err == nil {
		t.Fatal("apply without credentials accepted")
	}
	if r.flow.Doc().GotCredentials {
		t.Fatal("got_credentials without credentials")
	}
}

func TestIdentity(t *testing.T) {
	if n, err := ServiceName("24:0a:c4:a1:b2:c3"); err != nil || n != "PROV_A1B2C3" {
		t.Fatalf("ServiceName = %q, %v", n, err)
	}
	if _, err := ServiceName("24:0a:c4"); err == nil {
		t.Fatal("short MAC accepted")
	}
}

func TestRestartEndsSessions(t *testing.T) {
	r := newRig(t)
	r.flow.Start()
	h1 := r.flow.Handler()
	if err := r.client(h1.NewSession()).Handshake(); err != nil {
		t.Fatal(err)
	}
	r.flow.Stop()
	r.flow.Start()
	if r.flow.Handler() == h1 {
		t.Fatal("a restarted provisioning serves the old handler")
	}
}

// The credentials are announced before they are stored: storing them may join the station
// and take the portal down at once, and the plugin holds the portal for the app on that
// announcement. A store that fails takes the announcement back.
func TestCredentialsAnnouncedBeforeStore(t *testing.T) {
	r := newRig(t)
	r.flow.Start()
	r.provision("boat", "password1")
	if !r.atStore.GotCredentials || !r.atStore.Active {
		t.Fatalf("doc announced when Store ran: %+v", r.atStore)
	}

	r = newRig(t)
	r.storeErr = errors.New("flash full")
	r.flow.Start()
	if err := r.c.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := r.c.SetConfig("boat", "password1"); err != nil {
		t.Fatal(err)
	}
	if err := r.c.ApplyConfig(); err == nil {
		t.Fatal("apply succeeded with a failing store")
	}
	r.mu.Lock()
	last := r.docs[len(r.docs)-1]
	r.mu.Unlock()
	if !r.atStore.GotCredentials || last.GotCredentials || !last.Active {
		t.Fatalf("at store %+v, after the failure %+v", r.atStore, last)
	}
}
