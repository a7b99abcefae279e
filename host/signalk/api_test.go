package signalk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jonboulle/clockwork"

	"devhost/host/sk"
	"devhost/host/skstream"
	"devhost/host/skstream/skpeer"
)

const liveHello = `{"name":"signalk-server","version":"2.32.0","self":"vessels.` + testSelf + `","roles":["master","main"]}`

// liveRig is a client in APPROVED on a scripted peer with the real delta stream: the peer
// also serves the stream endpoint, so what the device sends arrives as frames.
type liveRig struct {
	*rig
	p      *peer
	ws     *skpeer.Server
	sk     *skstream.Stream
	client atomic.Pointer[Client]
}

func newLiveRig(t *testing.T) *liveRig {
	t.Helper()
	p := newPeer(t, false)
	selfOK(p, "tok1")
	lr := &liveRig{p: p, ws: skpeer.New(t)}
	lr.ws.SetHello(func(ws *websocket.Conn) { _ = ws.WriteMessage(websocket.TextMessage, []byte(liveHello)) })
	p.on("GET", skpeer.StreamPath, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok1" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		lr.ws.ServeHTTP(w, r)
	})
	client := &lr.client
	st := skstream.New(skstream.Options{
		// The stream's own timers are not under test here; batching is off so nothing waits.
		Clock: clockwork.NewRealClock(), Hostname: "dev-ab12",
		Settings: func() skstream.Settings { s := skstream.DefaultSettings(); s.BatchMS = 0; return s }(),
		HTTP: func(ctx context.Context, m, path string, b []byte) (int, []byte, error) {
			if c := client.Load(); c != nil {
				return c.HTTP(ctx, m, path, b)
			}
			return 0, nil, errors.New("no client yet")
		},
		OnStatus: func(skstream.Status) {
			if c := client.Load(); c != nil {
				c.StreamStatus()
			}
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	if err := st.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); st.Close() })
	lr.sk = st
	lr.rig = newRig(t, p, func(o *Options) { o.Stream = StreamFrom(st) })
	lr.keep(p, record{Token: "tok1"})
	return lr
}

// cl is the client, made without running it, so handlers and metadata can be registered
// before it starts, as the device does at boot.
func (lr *liveRig) cl() *Client {
	lr.t.Helper()
	if lr.c == nil {
		c, err := New(lr.opts)
		if err != nil {
			lr.t.Fatal(err)
		}
		lr.c = c
		lr.client.Store(c)
	}
	return lr.c
}

// connect runs the client and answers the stream's first connection.
func (lr *liveRig) connect() *skpeer.Conn {
	lr.t.Helper()
	c := lr.cl()
	ctx, cancel := context.WithCancel(context.Background())
	lr.cancel, lr.done = cancel, make(chan struct{})
	go func() { defer close(lr.done); _ = c.Run(ctx) }()
	lr.t.Cleanup(lr.stop)
	lr.waitState(StateApproved, true)
	conn := lr.ws.Accept(lr.t)
	eventually(lr.t, "stream connected", lr.sk.Connected)
	return conn
}

// A PUT-able path registered through the client: its state reaches the server at connect,
// again after a successful PUT, and again on every reconnect, so the server keeps routing.
func TestPutableStateThroughClient(t *testing.T) {
	lr := newLiveRig(t)
	mode := &putState[string]{v: "standby"}
	remove, err := lr.cl().HandlePut("dev.probe.mode", mode.handle, mode.state)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	c := lr.connect()
	c.AwaitValue(t, "dev.probe.mode", `"standby"`)
	c.SendPut(t, "r1", "dev.probe.mode", `"auto"`)
	if a := c.AwaitAnswer(t, "r1"); a.State != "COMPLETED" || a.StatusCode != 200 {
		t.Fatalf("answer %+v", a)
	}
	c.AwaitValue(t, "dev.probe.mode", `"auto"`)
	// A new connection (the server may have restarted and forgotten the path) sees it again.
	lr.sk.NetworkChanged()
	c = lr.ws.Accept(t)
	c.AwaitValue(t, "dev.probe.mode", `"auto"`)
}

// A declared period reaches the server as `timeout` = 2.5 × period (seconds) in the meta PUT;
// without a period the declaration carries none.
func TestDeclareMetaPeriodThroughClient(t *testing.T) {
	lr := newLiveRig(t)
	for _, p := range []string{"dev/probe/rate", "dev/probe/label"} {
		lr.p.answer("GET", "/signalk/v1/api/vessels/self/"+p+"/meta", http.StatusNotFound, `{}`)
		lr.p.answer("PUT", "/signalk/v1/api/vessels/self/"+p+"/meta", http.StatusAccepted, `{}`)
	}
	c := lr.cl()
	if err := c.DeclareMeta("dev.probe.rate", json.RawMessage(`{"units":"Hz"}`), 4*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.DeclareMeta("dev.probe.label", json.RawMessage(`{"description":"a label"}`), 0); err != nil {
		t.Fatal(err)
	}
	if err := c.DeclareMeta("dev.probe.x", json.RawMessage(`{}`), -time.Second); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative period: %v", err)
	}
	lr.connect()
	bodies := map[string]map[string]json.RawMessage{}
	eventually(t, "both meta PUTs", func() bool {
		for _, p := range []string{"dev/probe/rate", "dev/probe/label"} {
			for _, s := range lr.p.calls("PUT", "/signalk/v1/api/vessels/self/"+p+"/meta") {
				var b struct {
					Value map[string]json.RawMessage `json:"value"`
				}
				if json.Unmarshal([]byte(s.Body), &b) != nil {
					t.Fatalf("meta PUT body %s", s.Body)
				}
				bodies[p] = b.Value
			}
		}
		return len(bodies) == 2
	})
	if got := string(bodies["dev/probe/rate"]["timeout"]); got != "10" {
		t.Fatalf("timeout for a 4 s period: %q in %v", got, bodies["dev/probe/rate"])
	}
	if got := string(bodies["dev/probe/rate"]["units"]); got != `"Hz"` {
		t.Fatalf("declared members kept: %v", bodies["dev/probe/rate"])
	}
	if _, ok := bodies["dev/probe/label"]["timeout"]; ok {
		t.Fatalf("no period, no timeout: %v", bodies["dev/probe/label"])
	}
}

// The spec's handler-result table, through the client's reply-style handlers.
func TestInboundPutResultTableThroughClient(t *testing.T) {
	type step struct {
		state string
		code  int
		msg   string
	}
	cases := []struct {
		name string
		// handle answers the request; later, when set, is called after the first answer was
		// read, with the reply function the handler kept.
		handle func(reply func(sk.PutResult, string))
		later  func(reply func(sk.PutResult, string))
		want   []step
	}{
		{name: "success", handle: func(r func(sk.PutResult, string)) { r(sk.PutSuccess, "") },
			want: []step{{"COMPLETED", 200, ""}}},
		{name: "invalid", handle: func(r func(sk.PutResult, string)) { r(sk.PutInvalid, "not a number") },
			want: []step{{"COMPLETED", 400, "not a number"}}},
		{name: "failure", handle: func(r func(sk.PutResult, string)) { r(sk.PutFailure, "relay stuck") },
			want: []step{{"COMPLETED", 502, "relay stuck"}}},
		{name: "deferred then success", handle: func(r func(sk.PutResult, string)) { r(sk.PutDeferred, "") },
			later: func(r func(sk.PutResult, string)) { r(sk.PutSuccess, "") },
			want:  []step{{"PENDING", 202, ""}, {"COMPLETED", 200, ""}}},
		{name: "deferred then failure", handle: func(r func(sk.PutResult, string)) { r(sk.PutDeferred, "") },
			later: func(r func(sk.PutResult, string)) { r(sk.PutFailure, "gave up") },
			want:  []step{{"PENDING", 202, ""}, {"COMPLETED", 502, "gave up"}}},
		{name: "no reply before return", handle: func(func(sk.PutResult, string)) {},
			later: func(r func(sk.PutResult, string)) { r(sk.PutInvalid, "late") },
			want:  []step{{"PENDING", 202, ""}, {"COMPLETED", 400, "late"}}},
		{name: "no handler", want: []step{{"COMPLETED", 405, "no handler for dev.table.pg"}}},
	}
	lr := newLiveRig(t)
	kept := make([]chan func(sk.PutResult, string), len(cases))
	for i, tc := range cases {
		kept[i] = make(chan func(sk.PutResult, string), 1)
		if tc.handle == nil {
			continue
		}
		_, err := lr.cl().HandlePut("dev.table.p"+string(rune('a'+i)), func(_ sk.PutRequest, reply func(sk.PutResult, string)) {
			kept[i] <- reply
			tc.handle(reply)
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	c := lr.connect()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "req-" + string(rune('a'+i))
			c.SendPut(t, id, "dev.table.p"+string(rune('a'+i)), "1")
			for n, w := range tc.want {
				if n == 1 {
					tc.later(<-kept[i])
				}
				a := c.AwaitAnswer(t, id)
				if a.State != w.state || a.StatusCode != w.code || a.Message != w.msg {
					t.Fatalf("answer %d: %+v, want %+v", n, a, w)
				}
			}
		})
	}
}

// Misuse of the registration calls is refused.
func TestPutAndMetaArguments(t *testing.T) {
	lr := newLiveRig(t)
	c := lr.cl()
	nop := func(sk.PutRequest, func(sk.PutResult, string)) {}
	state := func() (any, bool) { return 1.0, true }
	handle := func(pattern string, h sk.PutHandler, state func() (any, bool)) func() error {
		return func() error { _, err := c.HandlePut(pattern, h, state); return err }
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"state on a family", handle("dev.a.*", nop, state)},
		{"nil handler", handle("dev.a", nil, nil)},
		{"bad pattern", handle("dev..a", nop, nil)},
		{"negative period", func() error { return c.DeclareMeta("dev.a", json.RawMessage(`{}`), -time.Second) }},
	} {
		if err := tc.call(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, err)
		}
	}
}

// The state reader's answer becomes what the stream publishes: unknown and unpublishable
// states are skipped, JSON null is sent as such.
func TestStateGetter(t *testing.T) {
	for _, tc := range []struct {
		v    any
		ok   bool
		want any
	}{
		{v: "auto", ok: true, want: "auto"},
		{v: 2.5, ok: true, want: 2.5},
		{v: nil, ok: true, want: json.RawMessage("null")},
		{v: "auto", ok: false, want: nil},
		{v: math.NaN(), ok: true, want: nil},
		{v: 3, ok: true, want: nil}, // an int is not one of the client's value types
	} {
		got := stateGetter("dev.a", func() (any, bool) { return tc.v, tc.ok })()
		if g, w := fmt.Sprintf("%T %v", got, got), fmt.Sprintf("%T %v", tc.want, tc.want); g != w {
			t.Fatalf("%v,%v → %s, want %s", tc.v, tc.ok, g, w)
		}
	}
}
