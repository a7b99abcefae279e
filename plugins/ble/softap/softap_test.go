package softap

import (
	"bytes"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"devhost/plugins/ble/protocomm"
	"devhost/plugins/ble/prov"
	"devhost/plugins/ble/provclient"
	pb "devhost/plugins/ble/provpb"
	"devhost/plugins/ble/softap/table"
)

type rig struct {
	flow  *prov.Flow
	srv   *httptest.Server
	sap   *Server
	slot0 atomic.Pointer[[2]string]
	sta   atomic.Pointer[prov.Station]
}

func newRig(t *testing.T) *rig {
	r := &rig{}
	r.sta.Store(&prov.Station{})
	r.flow = prov.New(prov.Options{Scheme: prov.SchemeSoftAP, ServiceName: "PROV_0A0B0C", PoP: "abcd1234", Security: protocomm.Sec1,
		Store:   func(ssid, psk string) error { r.slot0.Store(&[2]string{ssid, psk}); return nil },
		Station: func() prov.Station { return *r.sta.Load() },
		Scan:    func() ([]protocomm.AP, error) { return []protocomm.AP{{SSID: "boat", RSSI: -50}}, nil }})
	r.sap = &Server{Table: table.Table{Handler: func() *protocomm.Handler {
		if !r.flow.Active() {
			return nil
		}
		return r.flow.Handler()
	}}}
	r.srv = httptest.NewServer(r.sap)
	t.Cleanup(r.srv.Close)
	return r
}

func client(t *testing.T, keepAlive bool) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Transport: &http.Transport{DisableKeepAlives: !keepAlive}}
}

// provClient is a security 1 provisioning client of the rig's server with proof pop, on a
// client of its own (see client).
func (r *rig) provClient(t *testing.T, keepAlive bool, pop string) *provclient.Client {
	return &provclient.Client{X: Exchange(client(t, keepAlive), r.srv.URL), Sec: protocomm.Sec1, PoP: []byte(pop)}
}

// nothingStored fails the test when credentials reached the slot or the flow after what.
func (r *rig) nothingStored(t *testing.T, what string) {
	t.Helper()
	if r.slot0.Load() != nil || r.flow.Doc().GotCredentials {
		t.Fatalf("credentials stored after %s", what)
	}
}

func TestProvisionOverHTTP(t *testing.T) {
	for _, keepAlive := range []bool{true, false} {
		r := newRig(t)
		r.flow.Start()
		c := r.provClient(t, keepAlive, "abcd1234")
		if v, err := c.Version(); err != nil || v.Prov.SecVer != 1 {
			t.Fatalf("version %+v %v", v, err)
		}
		if err := c.Handshake(); err != nil {
			t.Fatalf("keepalive=%v: %v", keepAlive, err)
		}
		if aps, err := c.Scan(); err != nil || len(aps) != 1 {
			t.Fatalf("scan %v %v", aps, err)
		}
		if err := c.SetConfig("boat", "password1"); err != nil {
			t.Fatal(err)
		}
		if err := c.ApplyConfig(); err != nil {
			t.Fatal(err)
		}
		r.flow.StationChanged(prov.Station{State: prov.StaConnecting})
		r.sta.Store(&prov.Station{State: prov.StaConnected, IP: "192.0.2.10"})
		st, err := c.Status()
		if err != nil || st.GetStaState() != pb.WifiStationState_Connected {
			t.Fatalf("status %v %v", st, err)
		}
		if got := r.slot0.Load(); got == nil || *got != [2]string{"boat", "password1"} {
			t.Fatalf("slot 0 %v", got)
		}
		if r.sap.Sessions() != 1 {
			t.Fatalf("sessions %d", r.sap.Sessions())
		}
	}
}

func post(t *testing.T, c *http.Client, url string, body []byte) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestRefusals(t *testing.T) {
	r := newRig(t)
	c := client(t, true)
	// Not provisioning: the paths are absent.
	if code := post(t, c, r.srv.URL+"/prov-session", nil); code != http.StatusNotFound {
		t.Fatalf("inactive: %d", code)
	}
	r.flow.Start()
	for _, ep := range []string{"prov-session", "prov-config", "prov-scan", "prov-ctrl"} {
		for _, g := range [][]byte{{0xff, 0xff}, []byte("ssid=boat&psk=x"), bytes.Repeat([]byte{0x0a}, 100)} {
			if code := post(t, c, r.srv.URL+"/"+ep, g); code != http.StatusBadRequest {
				t.Fatalf("%s garbage %q: %d", ep, g, code)
			}
		}
	}
	if code := post(t, c, r.srv.URL+"/prov-session", make([]byte, MaxBody+1)); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized: %d", code)
	}
	resp, err := c.Get(r.srv.URL + "/prov-session")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	if code := post(t, c, r.srv.URL+"/prov-other", nil); code != http.StatusNotFound {
		t.Fatalf("unknown endpoint: %d", code)
	}
	r.nothingStored(t, "garbage")
}

func TestWrongPoPOverHTTP(t *testing.T) {
	r := newRig(t)
	r.flow.Start()
	c := r.provClient(t, true, "wrong")
	if err := c.Handshake(); err == nil {
		t.Fatal("wrong PoP accepted")
	}
	if err := c.SetConfig("boat", "password1"); err == nil {
		t.Fatal("set config after a refused handshake accepted")
	}
	r.nothingStored(t, "a wrong PoP")
}

func TestSessionsAreSeparateAndBounded(t *testing.T) {
	r := newRig(t)
	r.flow.Start()
	a := r.provClient(t, true, "abcd1234")
	if err := a.Handshake(); err != nil {
		t.Fatal(err)
	}
	// Another client (its own connection, no cookie) has no session.
	other := client(t, true)
	if code := post(t, other, r.srv.URL+"/prov-config", []byte{0x08, 0x00}); code != http.StatusBadRequest {
		t.Fatalf("foreign client: %d", code)
	}
	for i := 0; i < 3*MaxSessions; i++ {
		c := r.provClient(t, false, "abcd1234")
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.sap.Sessions(); n > MaxSessions {
		t.Fatalf("%d sessions held", n)
	}
}

func TestIsEndpoint(t *testing.T) {
	for p, want := range map[string]bool{"/prov-session": true, "/proto-ver": true, "/prov-ctrl": true,
		"/api/v1/prov-session": false, "prov-session": false, "/prov": false, "/": false} {
		if IsEndpoint(p) != want {
			t.Errorf("IsEndpoint(%q) = %v", p, !want)
		}
	}
}
