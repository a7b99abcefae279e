package skplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/signalk"
	"devhost/host/sk"
	"devhost/host/skstream"
	"devhost/host/skstream/skpeer"
	"devhost/host/store"
)

// wait bounds every hand-off between goroutines; no spec timer is waited for. It only turns a
// hang into a failure, so it is far beyond what a loaded machine needs.
const wait = 5 * time.Minute

// config is the sk.* configuration pointing at one server.
type config map[string]any

func (c config) Int(ns, key string) int        { n, _ := c[ns+"."+key].(int); return n }
func (c config) String(ns, key string) string  { s, _ := c[ns+"."+key].(string); return s }
func (c config) Bool(ns, key string) bool      { b, _ := c[ns+"."+key].(bool); return b }
func (c config) OnChange(func(ns, key string)) {}

// answered waits for the answer to id with the status code, skipping every other frame (deltas,
// a PENDING answer first).
func answered(t *testing.T, c *skpeer.Conn, id string, code int) {
	t.Helper()
	c.Await(t, fmt.Sprintf("%s answered %d", id, code), func(b []byte) bool {
		var a skpeer.Answer
		return json.Unmarshal(b, &a) == nil && a.RequestID == id && a.State == "COMPLETED" && a.StatusCode == code
	})
}

type rig struct {
	srv *skpeer.Server
	st  *skstream.Stream
	c   *signalk.Client
	a   *adapter
}

// newRig runs a client with the real stream against a Signal K server running without
// security (access requests get 404, so the client streams without a token) and answers the
// first connection.
func newRig(t *testing.T) (*rig, *skpeer.Conn) {
	t.Helper()
	r := &rig{srv: skpeer.Start(t, skpeer.Options{})}
	host, port := r.srv.HostPort()
	db, err := store.Open(filepath.Join(t.TempDir(), "nvs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	var mu sync.Mutex
	r.st = skstream.New(skstream.Options{
		// The stream's timers are not under test; batching is off so nothing waits for one.
		Clock: clockwork.NewRealClock(), Hostname: "dev-ab12",
		Settings: func() skstream.Settings { s := skstream.DefaultSettings(); s.BatchMS = 0; return s }(),
		OnStatus: func(skstream.Status) {
			mu.Lock()
			c := r.c
			mu.Unlock()
			if c != nil {
				c.StreamStatus()
			}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.st.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := config{"sk.server_host": host, "sk.server_port": port, "sk.permissions": "readwrite",
		"sk.scheme": "auto", "sk.check_s": 3600, "sk.stall_s": 300, "sk.discover_s": 60}
	c, err := signalk.New(signalk.Options{Clock: clockwork.NewFakeClock(), Config: cfg, Store: db,
		Stream: signalk.StreamFrom(r.st)})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	r.c = c
	mu.Unlock()
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; r.st.Close() })
	r.a = New(c).(*adapter)
	first := r.srv.Accept(t)
	deadline := time.Now().Add(wait)
	for !r.st.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("stream not connected")
		}
		time.Sleep(time.Millisecond)
	}
	return r, first
}

// reconnect drops the connection (as a server restart does) and answers the next one.
func (r *rig) reconnect(t *testing.T) *skpeer.Conn {
	t.Helper()
	r.st.NetworkChanged()
	return r.srv.Accept(t)
}

func (r *rig) kept() map[string]string {
	r.a.mu.Lock()
	defer r.a.mu.Unlock()
	out := map[string]string{}
	for p, st := range r.a.paths {
		b, _ := json.Marshal(st.value)
		if !st.known {
			b = []byte("?")
		}
		out[p] = string(b)
	}
	return out
}

// switchPlugin answers PUTs the way a plugin does: it publishes the new state, then replies.
type switchPlugin struct {
	t    *testing.T
	a    *adapter
	mu   sync.Mutex
	seen []string
}

// switches registers a new switchPlugin for pattern and answers it with its removal.
func (r *rig) switches(t *testing.T, pattern string) (*switchPlugin, func()) {
	t.Helper()
	sw := &switchPlugin{t: t, a: r.a}
	remove, err := r.a.HandlePut(pattern, sw.handle)
	if err != nil {
		t.Fatal(err)
	}
	return sw, remove
}

func (p *switchPlugin) handle(req sk.PutRequest, reply func(sk.PutResult, string)) {
	p.mu.Lock()
	p.seen = append(p.seen, req.Path)
	p.mu.Unlock()
	var on bool
	if json.Unmarshal(req.Value, &on) != nil {
		reply(sk.PutInvalid, "state is a boolean")
		return
	}
	if err := p.a.Publish(sk.Value{Path: req.Path, Value: on}); err != nil {
		p.t.Errorf("publish: %v", err)
	}
	reply(sk.PutSuccess, "")
}

func (p *switchPlugin) last() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.seen) == 0 {
		return ""
	}
	return p.seen[len(p.seen)-1]
}

// A plugin's PUT-able paths under a family: the last state it published is the path's
// current state, published again on every connect, so the server keeps routing PUTs to it.
func TestPluginStateRepublishedOnReconnect(t *testing.T) {
	r, c := newRig(t)
	sw, remove := r.switches(t, "electrical.switches.*")
	if err := r.a.Publish(sk.Value{Path: "electrical.switches.a.state", Value: true},
		sk.Value{Path: "environment.inside.temperature", Value: 293.0}); err != nil {
		t.Fatal(err)
	}
	c.AwaitValue(t, "electrical.switches.a.state", "true")
	if got := r.kept(); len(got) != 1 || got["electrical.switches.a.state"] != "true" {
		t.Fatalf("kept state: %v", got)
	}
	c.SendPut(t, "r1", "electrical.switches.a.state", "false")
	answered(t, c, "r1", 200)
	c.AwaitValue(t, "electrical.switches.a.state", "false")
	if sw.last() != "electrical.switches.a.state" {
		t.Fatalf("handler saw %q", sw.last())
	}
	c = r.reconnect(t)
	c.AwaitValue(t, "electrical.switches.a.state", "false")
	c.SendPut(t, "r2", "electrical.switches.a.state", "true")
	answered(t, c, "r2", 200)
	// Removed: nothing kept, and the path answers 405 like any unhandled one.
	remove()
	if got := r.kept(); len(got) != 0 {
		t.Fatalf("kept after remove: %v", got)
	}
	c.SendPut(t, "r3", "electrical.switches.a.state", "true")
	answered(t, c, "r3", 405)
}

// An exact PUT pattern: unknown until the plugin publishes it, then kept and republished.
func TestPluginExactPatternState(t *testing.T) {
	r, c := newRig(t)
	sw, remove := r.switches(t, "electrical.pump.state")
	defer remove()
	if got := r.kept(); got["electrical.pump.state"] != "?" {
		t.Fatalf("before any publish: %v", got)
	}
	if err := r.a.Publish(sk.Value{Path: "electrical.pump.state", Value: false}); err != nil {
		t.Fatal(err)
	}
	c.AwaitValue(t, "electrical.pump.state", "false")
	c = r.reconnect(t)
	c.AwaitValue(t, "electrical.pump.state", "false")
	c.SendPut(t, "r1", "electrical.pump.state", "1")
	answered(t, c, "r1", 400)
	if _, err := r.a.HandlePut("electrical..x", sw.handle); err == nil {
		t.Fatal("a bad exact pattern was accepted")
	}
	if _, ok := r.kept()["electrical..x"]; ok {
		t.Fatal("a refused pattern left state behind")
	}
}

// Several patterns: a path goes to the longest family, as the stream routes, and stays
// PUT-able through the shorter one when the longer is removed.
func TestPluginPatternOwnership(t *testing.T) {
	r, c := newRig(t)
	outer, removeOuter := r.switches(t, "electrical.*")
	defer removeOuter()
	inner, removeInner := r.switches(t, "electrical.switches.*")
	if err := r.a.Publish(sk.Value{Path: "electrical.switches.b.state", Value: true}); err != nil {
		t.Fatal(err)
	}
	c.SendPut(t, "r1", "electrical.switches.b.state", "false")
	answered(t, c, "r1", 200)
	if inner.last() != "electrical.switches.b.state" || outer.last() != "" {
		t.Fatalf("routed to inner %q, outer %q", inner.last(), outer.last())
	}
	removeInner()
	if got := r.kept(); got["electrical.switches.b.state"] != "false" {
		t.Fatalf("kept through the outer family: %v", got)
	}
	c.SendPut(t, "r2", "electrical.switches.b.state", "true")
	answered(t, c, "r2", 200)
	if outer.last() != "electrical.switches.b.state" {
		t.Fatalf("not routed to the outer family: %q", outer.last())
	}
	c = r.reconnect(t)
	c.AwaitValue(t, "electrical.switches.b.state", "true")
}

// The kept state is bounded; paths past the bound are still answered through their family.
func TestPluginStateBound(t *testing.T) {
	r, c := newRig(t)
	_, remove := r.switches(t, "electrical.switches.*")
	defer remove()
	for i := range MaxStatePaths + 4 {
		if err := r.a.Publish(sk.Value{Path: fmt.Sprintf("electrical.switches.s%d.state", i), Value: true}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(r.kept()); n != MaxStatePaths {
		t.Fatalf("kept %d paths", n)
	}
	last := fmt.Sprintf("electrical.switches.s%d.state", MaxStatePaths+3)
	c.SendPut(t, "r1", last, "false")
	answered(t, c, "r1", 200)
}
