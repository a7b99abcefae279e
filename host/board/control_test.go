package board

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// serve runs s's control channel on a socket in a temporary directory until the test ends.
func serve(t *testing.T, s *Sim) (string, *Client) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "board.sock")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, sock) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	waitSocket(t, sock)
	return sock, Dial(sock)
}

func waitSocket(t *testing.T, sock string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("control socket %s never answered", sock)
}

// raw sends one request to the socket and returns status and body.
func raw(t *testing.T, sock, method, path, body string) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, _ := http.NewRequest(method, "http://board"+path, strings.NewReader(body))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestControlChannel(t *testing.T) {
	s, _ := LoadSim("")
	sock, c := serve(t, s)
	ctx := context.Background()

	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v (%v): want 0600", fi.Mode(), err)
	}

	st, err := c.State(ctx)
	if err != nil || st.ID != "abcd" || st.Eth.Up || st.Hardware.Chip != "esp32s3" {
		t.Fatalf("state %+v %v", st, err)
	}

	events := s.Subscribe(t.Context())
	recv(t, events)
	recv(t, events)

	st, err = c.SetMemory(ctx, MemoryUpdate{FreeInternal: ptr[int64](4096)})
	if err != nil || st.Memory.FreeInternal != 4096 || st.Memory.MinFreeInternal != 4096 || s.Memory().LargestBlock != 4096 {
		t.Fatalf("set memory: %+v %v", st.Memory, err)
	}

	// net up/down/route are kept as Ethernet.
	if st, err = c.NetUp(ctx); err != nil || !st.Eth.Up {
		t.Fatalf("net up: %+v %v", st.Eth, err)
	}
	if ev := recv(t, events); ev.Iface == nil || ev.Iface.Name != "eth" || !ev.Iface.Up {
		t.Fatalf("up event %+v", ev)
	}
	if st, err = c.NetDown(ctx); err != nil || st.Eth.Up {
		t.Fatalf("net down: %+v %v", st.Eth, err)
	}
	if ev := recv(t, events); ev.Iface == nil || ev.Iface.Up {
		t.Fatalf("down event %+v", ev)
	}
	st, err = c.SetRoute(ctx, RouteUpdate{IP: ptr("127.0.0.5"), Netmask: ptr("255.255.255.0"), Gateway: ptr("127.0.0.254")})
	if err != nil || st.Eth.IP != "127.0.0.5" || st.Eth.Netmask != "255.255.255.0" {
		t.Fatalf("route: %+v %v", st.Eth, err)
	}
	if ev := recv(t, events); ev.Iface == nil || ev.Iface.IP != "127.0.0.5" {
		t.Fatalf("route event %+v", ev)
	}
	if st, err = c.SetIface(ctx, "thread", IfUpdate{Up: ptr(true), IP: ptr("127.0.0.6")}); err != nil || !st.Thread.Up || st.Thread.IP != "127.0.0.6" {
		t.Fatalf("thread up: %+v %v", st.Thread, err)
	}
	if ev := recv(t, events); ev.Iface == nil || ev.Iface.Name != "thread" || !ev.Iface.Up {
		t.Fatalf("thread event %+v", ev)
	}
	// The radio.
	if st, err = c.AddAP(ctx, APUpdate{SSID: "Fuel Dock", PSK: "diesel-only", RSSI: ptr(-70)}); err != nil || len(st.WiFi.APs) != 2 ||
		st.WiFi.APs[1].Auth != "wpa2" || st.WiFi.APs[1].RSSI != -70 {
		t.Fatalf("ap add: %+v %v", st.WiFi, err)
	}
	if st, err = c.SetFault(ctx, "Fuel Dock", FaultNoAnswer); err != nil || st.WiFi.APs[1].Fault != FaultNoAnswer {
		t.Fatalf("ap fault: %+v %v", st.WiFi, err)
	}
	if st, err = c.SetScanBusy(ctx, true); err != nil || !st.WiFi.ScanBusy {
		t.Fatalf("scan busy: %+v %v", st.WiFi, err)
	}
	if _, err := s.Scan(); !errors.Is(err, ErrScanBusy) {
		t.Fatalf("scan while busy: %v", err)
	}
	if st, err = c.RemoveAP(ctx, "Fuel Dock"); err != nil || len(st.WiFi.APs) != 1 {
		t.Fatalf("ap remove: %+v %v", st.WiFi, err)
	}
	if _, err = c.Button(ctx, 45); err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, events); ev.Presence != 45 {
		t.Fatalf("button event %+v", ev)
	}
	if _, err = c.Button(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, events); ev.Presence != DefaultPresenceSeconds {
		t.Fatalf("default button event %+v", ev)
	}
}

func TestControlChannelErrors(t *testing.T) {
	s, _ := LoadSim("")
	sock, c := serve(t, s)
	ctx := context.Background()

	cases := []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"GET", "/nothing", "", 404, `"not_found"`},
		{"POST", "/state", "", 405, `"method_not_allowed"`},
		{"GET", "/memory", "", 405, `"method_not_allowed"`},
		{"PUT", "/memory", `{"free_heap":-5}`, 400, "must not be negative"},
		{"PUT", "/memory", `{"free_heap":"lots"}`, 400, "malformed JSON"},
		{"PUT", "/memory", `{"free":1}`, 400, `unknown field \"free\"`},
		{"PUT", "/memory", `{"free_heap":1} x`, 400, "trailing data"},
		{"PUT", "/memory", `{"largest_block":999999}`, 400, "largest_block 999999 exceeds"},
		{"PUT", "/net/route", `{"iface":"lte"}`, 400, `unknown field \"iface\"`},
		{"PUT", "/net/route", `{"ip":"300.1.1.1"}`, 400, "eth: ip"},
		{"PUT", "/eth", `{"netmask":"1.2.3.4"}`, 400, "eth: netmask"},
		{"PUT", "/thread", `{"up":"yes"}`, 400, "malformed JSON"},
		{"POST", "/wifi/ap", `{"psk":"12345678"}`, 400, "ssid"},
		{"POST", "/wifi/ap", `{"ssid":"a","auth":"wpa9"}`, 400, "auth"},
		{"POST", "/wifi/ap", `{"ssid":"a","rssi":-300}`, 400, "rssi -300"},
		{"POST", "/wifi/ap", `{"ssid":"a","channel":-1}`, 400, "channel -1"},
		{"POST", "/wifi/ap", `{"ssid":"a","bssid":"x"}`, 400, "bssid"},
		{"POST", "/wifi/ap/remove", `{"ssid":"nowhere"}`, 404, "nowhere"},
		{"PUT", "/wifi/ap/fault", `{"ssid":"Marina","fault":"fire"}`, 400, "fault"},
		{"PUT", "/wifi/ap/fault", `{"ssid":"nowhere","fault":"drop"}`, 404, "nowhere"},
		{"PUT", "/wifi/scan-busy", `{}`, 400, "busy"},
		{"POST", "/button", `{"seconds":-3}`, 400, "seconds -3"},
		{"POST", "/button", `{"seconds":1.5}`, 400, "malformed JSON"},
		{"POST", "/button", strings.Repeat(" ", maxControlBody+1), 413, "too_large"},
	}
	before := s.State()
	for _, c := range cases {
		status, body := raw(t, sock, c.method, c.path, c.body)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s %s %s: %d %s, want %d with %s", c.method, c.path, c.body, status, body, c.status, c.want)
		}
	}
	if after := s.State(); after.Memory != before.Memory || after.Eth != before.Eth || after.Thread != before.Thread ||
		!reflect.DeepEqual(after.WiFi, before.WiFi) {
		t.Fatal("refused requests changed the board")
	}

	_, err := c.SetMemory(ctx, MemoryUpdate{FreeHeap: ptr[int64](-1)})
	var ce *ControlError
	if !errors.As(err, &ce) || ce.Status != 400 || ce.Code != "validation" || !strings.Contains(ce.Error(), "negative") {
		t.Fatalf("client error %v", err)
	}
}

func TestServeRemovesStaleSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "board.sock")
	// A socket file nobody answers on: what a power cut leaves behind.
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatal("stale socket not left behind")
	}

	s, _ := LoadSim("")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, sock) }()
	waitSocket(t, sock)
	if _, err := Dial(sock).State(ctx); err != nil {
		t.Fatal(err)
	}

	// A second board on the same socket is refused while the first answers.
	if err := s.Serve(ctx, sock); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("second Serve: %v", err)
	}

	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after Serve returned: %v", err)
	}
}

func TestServeRefusesNonSocket(t *testing.T) {
	p := filepath.Join(t.TempDir(), "board.sock")
	if err := os.WriteFile(p, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, _ := LoadSim("")
	if err := s.Serve(context.Background(), p); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("Serve over a regular file: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "keep me" {
		t.Fatal("regular file removed")
	}
	long := "/tmp/" + strings.Repeat("x", 120)
	if err := s.Serve(context.Background(), long); err == nil || !strings.Contains(err.Error(), "unix sockets allow") {
		t.Fatalf("Serve on a long path: %v", err)
	}
}

func TestClientWithoutDevice(t *testing.T) {
	_, err := Dial(filepath.Join(t.TempDir(), "board.sock")).State(context.Background())
	if err == nil || !strings.Contains(err.Error(), "is the device running") {
		t.Fatalf("error %v", err)
	}
}

// FuzzControl sends arbitrary bodies to every control endpoint: an answer is the state (200)
// or the JSON error body with a 4xx status, never a panic or a 5xx, and the board stays
// consistent.
func FuzzControl(f *testing.F) {
	for _, seed := range []struct{ path, body string }{
		{"/wifi/ap", `{"ssid":"Pier","psk":"pier-pass-1","rssi":-58,"channel":11}`},
		{"/wifi/ap", `{"ssid":"","auth":"wpa9","bssid":"zz"}`},
		{"/wifi/ap/fault", `{"ssid":"Marina","fault":"drop"}`},
		{"/wifi/ap/remove", `{"ssid":"Marina"}`},
		{"/wifi/scan-busy", `{"busy":true}`},
		{"/eth", `{"up":true,"ip":"127.0.0.2"}`},
		{"/thread", `{"netmask":"255.0.255.0"}`},
		{"/net/route", `{"gateway":"gw"}`},
		{"/memory", `{"free_heap":-1}`},
		{"/button", `{"seconds":1e9}`},
		{"/gpio", `{"pin":4,"high":true}`},
	} {
		f.Add(seed.path, seed.body)
	}
	paths := []string{"/wifi/ap", "/wifi/ap/fault", "/wifi/ap/remove", "/wifi/scan-busy", "/eth", "/thread", "/net/route", "/memory", "/button", "/gpio"}
	methods := map[string]string{"/wifi/ap": "POST", "/wifi/ap/remove": "POST", "/button": "POST"}
	f.Fuzz(func(t *testing.T, path, body string) {
		s, _ := LoadSim("")
		h := s.Handler()
		for _, p := range append(paths, path) {
			m := methods[p]
			if m == "" {
				m = "PUT"
			}
			req, err := http.NewRequest(m, "http://board"+p, strings.NewReader(body))
			if err != nil {
				return
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code >= 500 || (w.Code != 200 && !strings.Contains(w.Body.String(), `"error"`)) {
				t.Fatalf("%s %s %q: %d %s", m, p, body, w.Code, w.Body.String())
			}
		}
		st := s.State()
		for _, ap := range st.WiFi.APs {
			if checkAP(&ap) != nil {
				t.Fatalf("inconsistent AP %+v", ap)
			}
		}
		if checkAddress(st.Eth.IP, st.Eth.Netmask, st.Eth.Gateway) != nil || checkAddress(st.Thread.IP, st.Thread.Netmask, st.Thread.Gateway) != nil {
			t.Fatalf("inconsistent interfaces %+v %+v", st.Eth, st.Thread)
		}
	})
}
