package netroute

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/board"
)

type recorder struct {
	edges  []Edge
	events int
	health []string
}

func (r *recorder) Report(key, state, _ string) error {
	r.health = append(r.health, key+"="+state)
	return nil
}

func rssi(v int) *int { return &v }

func TestEdgesTransitionByTransition(t *testing.T) {
	clk := clockwork.NewFakeClock()
	rec := &recorder{}
	r := New(Options{Clock: clk, MAC: "02:00:00:12:ab:cd", ID: "abcd", Health: rec,
		Publish: func(name string, _ any) {
			if name != "net" {
				t.Errorf("event %q", name)
			}
			rec.events++
		}})
	r.Subscribe(func(e Edge) { rec.edges = append(rec.edges, e) })
	wifi := Iface{Name: "wifi_sta", Up: true, IP: "127.0.0.1", Netmask: "255.0.0.0", Gateway: "127.0.0.254", RSSI: rssi(-60)}
	with := func(i Iface, f func(*Iface)) Iface { f(&i); return i }
	eth := Iface{Name: "eth", Up: true, IP: "127.0.0.3", Netmask: "255.0.0.0"}
	thread := Iface{Name: "thread", Up: true, IP: "127.0.0.4", Netmask: "255.0.0.0"}
	steps := []struct {
		name   string
		report Iface
		edge   Edge   // 0: none
		events int    // cumulative `net` events
		health string // the netDown report, if any
		iface  string // the route afterwards
	}{
		{"eth down at start: no route, down all the same", with(eth, func(i *Iface) { i.Up = false }), 0, 0, "netDown=warn", "none"},
		{"thread down at start: said once", with(thread, func(i *Iface) { i.Up = false }), 0, 0, "", "none"},
		{"first interface comes up", wifi, Up, 1, "netDown=normal", "wifi_sta"},
		{"same data again", wifi, 0, 1, "", "wifi_sta"},
		{"RSSI refresh: event, no edge", with(wifi, func(i *Iface) { i.RSSI = rssi(-70) }), 0, 2, "", "wifi_sta"},
		{"address changes", with(wifi, func(i *Iface) { i.IP = "127.0.0.2"; i.RSSI = rssi(-70) }), Changed, 3, "netDown=normal", "wifi_sta"},
		{"a less preferred interface comes up: standby", thread, 0, 3, "", "wifi_sta"},
		{"a standby interface changes", with(thread, func(i *Iface) { i.IP = "127.0.0.5" }), 0, 3, "", "wifi_sta"},
		{"a preferred interface comes up", eth, Changed, 4, "netDown=normal", "eth"},
		{"the station goes while on standby", with(wifi, func(i *Iface) { i.Up = false }), 0, 4, "", "eth"},
		{"the preferred one goes away", with(eth, func(i *Iface) { i.Up = false }), Changed, 5, "netDown=normal", "thread"},
		{"last interface goes down", with(thread, func(i *Iface) { i.Up = false }), Down, 6, "netDown=warn", "none"},
		{"down again", with(thread, func(i *Iface) { i.Up = false }), 0, 6, "", "none"},
		{"back up", wifi, Up, 7, "netDown=normal", "wifi_sta"},
	}
	for _, s := range steps {
		nEdges, nHealth := len(rec.edges), len(rec.health)
		r.Report(s.report)
		var got Edge
		if len(rec.edges) > nEdges {
			got = rec.edges[len(rec.edges)-1]
		}
		if got != s.edge || len(rec.edges)-nEdges > 1 {
			t.Fatalf("%s: edge %v (%d new), want %v", s.name, got, len(rec.edges)-nEdges, s.edge)
		}
		if rec.events != s.events {
			t.Fatalf("%s: %d net events, want %d", s.name, rec.events, s.events)
		}
		h := ""
		if len(rec.health) > nHealth {
			h = rec.health[len(rec.health)-1]
		}
		if h != s.health {
			t.Fatalf("%s: health %q, want %q", s.name, h, s.health)
		}
		if st := r.Status(); st.Iface != s.iface {
			t.Fatalf("%s: route on %s, want %s", s.name, st.Iface, s.iface)
		}
	}
	if st := r.Status(); st.UpCount != 5 {
		t.Fatalf("up_count %d, want 5 (UP and CHANGED edges)", st.UpCount)
	}
}

func TestStatusDocument(t *testing.T) {
	clk := clockwork.NewFakeClock()
	host := ""
	r := New(Options{Clock: clk, MAC: "02:00:00:12:ab:cd", ID: "abcd", Hostname: func() string { return host }})
	get := func() map[string]any {
		w := httptest.NewRecorder()
		r.Routes()[0].Handler(w, httptest.NewRequest("GET", "/net/status", nil))
		var m map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	m := get()
	if m["up"] != false || m["iface"] != "none" || m["ip"] != "" || m["ip6_ll"] != "" || m["rssi"] != nil || m["up_s"] != 0.0 ||
		m["hostname"] != "dev-abcd" || m["id"] != "abcd" || m["mac"] != "02:00:00:12:ab:cd" {
		t.Fatalf("down: %v", m)
	}
	for _, k := range []string{"netmask", "gateway", "ip6_ll", "up_count"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("%s missing", k)
		}
	}
	r.Report(Iface{Name: "wifi_sta", Up: true, IP: "127.0.0.1", Netmask: "255.0.0.0", RSSI: rssi(-55)})
	clk.Advance(42 * time.Second)
	host = "boat"
	m = get()
	if m["up"] != true || m["iface"] != "wifi_sta" || m["rssi"] != -55.0 || m["up_s"] != 42.0 || m["hostname"] != "boat" ||
		m["up_count"] != 1.0 || m["ip6_ll"] != "fe80::ff:fe12:abcd" || m["netmask"] != "255.0.0.0" {
		t.Fatalf("up: %v", m)
	}
	r.Update(board.IfState{Name: "eth", Up: true, IP: "127.0.0.1", Netmask: "255.0.0.0"})
	if m = get(); m["rssi"] != nil || m["up_s"] != 0.0 || m["iface"] != "eth" || m["ip6_ll"] != "fe80::ff:fe12:abd0" {
		t.Fatalf("rssi must be null unless the route is the WiFi station: %v", m)
	}
}

func TestCancelStopsNotifications(t *testing.T) {
	r := New(Options{Clock: clockwork.NewFakeClock()})
	n := 0
	cancel := r.Subscribe(func(Edge) { n++ })
	r.Report(Iface{Name: "wifi_sta", Up: true, IP: "127.0.0.1"})
	cancel()
	r.Report(Iface{Name: "wifi_sta"})
	if n != 1 {
		t.Fatalf("%d notifications", n)
	}
}
