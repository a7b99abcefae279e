package signalk

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/signalk/sktest"
	"devhost/host/skstream"
)

// The real server routes a PUT only to a client that published the path, and forgets that
// when it restarts: the state given with HandlePut is published at connect and again after
// the restart, so PUTs keep reaching the device.
func TestRealServerPutRoutedAcrossRestart(t *testing.T) {
	s := sktest.Require(t, sktest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var c *Client
	var cmu sync.Mutex
	client := func() *Client { cmu.Lock(); defer cmu.Unlock(); return c }
	st := skstream.New(skstream.Options{
		Clock: clockwork.NewRealClock(), Hostname: "dev-ab12",
		Settings: func() skstream.Settings { s := skstream.DefaultSettings(); s.BatchMS = 0; return s }(),
		HTTP: func(ctx context.Context, m, p string, b []byte) (int, []byte, error) {
			return client().HTTP(ctx, m, p, b)
		},
		OnStatus:       func(skstream.Status) { client().StreamStatus() },
		OnUnauthorized: func(skstream.Unauthorized) { client().StreamUnauthorized() },
	})
	r := newRig(t, nil, func(o *Options) { o.Stream = StreamFrom(st) })
	r.cfg.Set("sk", "server_host", s.Host)
	r.cfg.Set("sk", "server_port", s.Port)
	nc, err := New(r.opts)
	if err != nil {
		t.Fatal(err)
	}
	cmu.Lock()
	c = nc
	cmu.Unlock()
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	if err := st.Start(sctx); err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	const path = "electrical.switches.devtest.state"
	on := &putState[bool]{seen: make(chan bool, 4)}
	seen := on.seen
	if _, err := c.HandlePut(path, on.handle, on.state); err != nil {
		t.Fatal(err)
	}

	r.c = c
	runCtx, runCancel := context.WithCancel(context.Background())
	r.cancel, r.done = runCancel, make(chan struct{})
	go func() { defer close(r.done); _ = c.Run(runCtx) }()
	t.Cleanup(r.stop)
	r.approveOn(ctx, s)
	eventually(t, "stream connected", st.Connected)

	put := func(want bool) {
		t.Helper()
		if _, err := s.WaitValue(ctx, path, func(v json.RawMessage) bool { return string(v) == "false" || string(v) == "true" }); err != nil {
			t.Fatalf("the state never reached the server: %v", err)
		}
		code, body, err := s.Do(ctx, "PUT", "/signalk/v1/api/vessels/self/electrical/switches/devtest/state", s.AdminToken,
			map[string]any{"value": want})
		if err != nil || code >= 300 {
			t.Fatalf("PUT through the server: %d %s %v", code, body, err)
		}
		select {
		case v := <-seen:
			if v != want {
				t.Fatalf("handler got %v", v)
			}
		case <-ctx.Done():
			t.Fatal("the PUT never reached the device")
		}
		wantJS, _ := json.Marshal(want)
		if _, err := s.WaitValue(ctx, path, func(v json.RawMessage) bool { return string(v) == string(wantJS) }); err != nil {
			t.Fatalf("the new state was not published: %v", err)
		}
	}
	put(true)

	if err := s.Restart(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// Dial at once rather than after the backoff.
	st.NetworkChanged()
	eventually(t, "stream connected again", st.Connected)
	put(false)
}
