package signalk

import (
	"sync"
	"testing"
	"time"
)

func srv(self, host string, roles ...string) Server {
	return Server{Self: self, Host: host, Port: 3000, Scheme: "http", Roles: roles}
}

// The spec's server-choice table, row by row.
func TestChooseTable(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := srv("urn:a", "10.0.0.1")
	b := srv("urn:b", "10.0.0.2", "master", "main")
	c := srv("urn:c", "10.0.0.3", "master")
	cur := func(s Server) *Server { s.Source = "discovered"; return &s }
	for _, tc := range []struct {
		name string
		in   choiceInput
		want string // host, "" for none
	}{
		{"server_host wins", choiceInput{host: "sk.local", port: 3000, self: "urn:a", discovered: []Server{a, b}}, "sk.local"},
		{"server_self picks that server", choiceInput{self: "urn:c", discovered: []Server{a, b, c}}, "10.0.0.3"},
		{"server_self not discovered: none", choiceInput{self: "urn:z", discovered: []Server{a, b}}, ""},
		{"lowest master", choiceInput{discovered: []Server{a, c, b}}, "10.0.0.2"},
		{"no master: any (lowest self)", choiceInput{discovered: []Server{srv("urn:y", "10.0.0.9"), a}}, "10.0.0.1"},
		{"nothing discovered", choiceInput{}, ""},
		{"sticky to the token's server", choiceInput{discovered: []Server{a, b, c}, sticky: map[string]bool{"urn:c": true}}, "10.0.0.3"},
		{"sticky prefers the last choice", choiceInput{discovered: []Server{a, b, c},
			sticky: map[string]bool{"urn:a": true, "urn:c": true}, current: cur(c)}, "10.0.0.3"},
		{"skipped master passed over", choiceInput{discovered: []Server{a, b, c}, now: now,
			skipped: map[string]time.Time{"urn:b": now.Add(time.Minute)}}, "10.0.0.3"},
		{"skip over", choiceInput{discovered: []Server{a, b, c}, now: now,
			skipped: map[string]time.Time{"urn:b": now}}, "10.0.0.2"},
		{"all skipped: try anyway", choiceInput{discovered: []Server{b}, now: now,
			skipped: map[string]time.Time{"urn:b": now.Add(time.Minute)}}, "10.0.0.2"},
		{"sticky but skipped: another", choiceInput{discovered: []Server{a, b}, now: now, sticky: map[string]bool{"urn:a": true},
			skipped: map[string]time.Time{"urn:a": now.Add(time.Minute)}}, "10.0.0.2"},
		{"pin keeps the current choice", choiceInput{pin: true, current: cur(a), discovered: []Server{a, b}}, "10.0.0.1"},
		{"pin keeps it when a pass misses it", choiceInput{pin: true, current: cur(a), discovered: []Server{b}}, "10.0.0.1"},
		{"pin follows its new address", choiceInput{pin: true, current: cur(a), discovered: []Server{srv("urn:a", "10.0.0.7"), b}}, "10.0.0.7"},
		{"no pin: current dropped for the master", choiceInput{current: cur(a), discovered: []Server{a, b}}, "10.0.0.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := choose(tc.in)
			host := ""
			if got != nil {
				host = got.Host
			}
			if host != tc.want {
				t.Fatalf("chose %q, want %q", host, tc.want)
			}
		})
	}
	if got := choose(choiceInput{host: "h"}); got.Port != 80 || got.Source != "manual" {
		t.Fatalf("manual default port: %+v", got)
	}
}

// fakeDiscovery is a settable server list.
type fakeDiscovery struct {
	mu   sync.Mutex
	list []Server
	ch   chan struct{}
}

func newFakeDiscovery(list ...Server) *fakeDiscovery {
	return &fakeDiscovery{list: list, ch: make(chan struct{}, 1)}
}
func (d *fakeDiscovery) Servers() []Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Server(nil), d.list...)
}
func (d *fakeDiscovery) Changed() <-chan struct{} { return d.ch }
func (d *fakeDiscovery) set(list ...Server) {
	d.mu.Lock()
	d.list = list
	d.mu.Unlock()
	d.ch <- struct{}{}
}

// An unreachable discovered server is skipped for 5 minutes: the client moves to another and
// comes back after the skip.
func TestChooseSkipsUnreachable(t *testing.T) {
	dead := newPeer(t, false)
	dh, dp := dead.hostPort()
	dead.Close()
	live := newPeer(t, false)
	live.answer("POST", pathRequests, 202, pendingJS)
	live.answer("GET", testHref, 200, pendingJS)
	lh, lp := live.hostPort()
	disc := newFakeDiscovery(
		Server{Self: "urn:a", Host: dh, Port: dp, Scheme: "http", TXT: map[string]string{"roles": "master, main", "swname": "signalk-server"}},
		Server{Self: "urn:b", Host: lh, Port: lp, Scheme: "http"})
	r := newRig(t, nil, func(o *Options) { o.Discovery = disc }).start()
	r.waitState(StateRequested, true)
	if s := r.c.Server(); s == nil || s.Self != "urn:b" {
		t.Fatalf("chose %+v, want urn:b after urn:a failed", s)
	}
	doc := r.c.Servers()
	if len(doc.Servers) != 2 || doc.Servers[0].SkippedS != 300 || !doc.Servers[1].Chosen ||
		doc.Servers[0].SWName != "signalk-server" || len(doc.Servers[0].Roles) != 2 {
		t.Fatalf("servers %+v", doc.Servers)
	}
	if r.ev.count("sk_servers") == 0 || r.ev.count("sk") == 0 {
		t.Fatal("no sk / sk_servers events")
	}
	// The pending request now belongs to urn:b: sticky even after the skip ends.
	r.clk.Advance(SkipUnreachable)
	time.Sleep(20 * time.Millisecond)
	if s := r.c.Server(); s == nil || s.Self != "urn:b" {
		t.Fatalf("left the sticky server: %+v", s)
	}
	// A discovery change that drops every server leaves none.
	disc.set()
	r.waitState(StateNoServer, false)
}
