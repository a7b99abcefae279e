package signalk

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/signalk/sktest"
	"devhost/host/skstream"
)

// The whole chain against the real server with the real stream: request → approve → token →
// stream connected → a published value reaches the server under the device's source label.
func TestRealServerTokenToStream(t *testing.T) {
	s := sktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var c *Client
	st := skstream.New(skstream.Options{
		Clock: clockwork.NewRealClock(), Hostname: "dev-ab12",
		HTTP:           func(ctx context.Context, m, p string, b []byte) (int, []byte, error) { return c.HTTP(ctx, m, p, b) },
		OnStatus:       func(skstream.Status) { c.StreamStatus() },
		OnUnauthorized: func(skstream.Unauthorized) { c.StreamUnauthorized() },
		Settings:       skstream.DefaultSettings(),
	})
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	if err := st.Start(sctx); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, nil, func(o *Options) { o.Stream = StreamFrom(st) })
	r.cfg.Set("sk", "server_host", s.Host)
	r.cfg.Set("sk", "server_port", s.Port)
	r.start()
	c = r.c
	r.approveOn(ctx, s)
	eventually(t, "stream connected", st.Connected)
	if err := c.PublishNumber("environment.devtest.value", 42.5); err != nil {
		t.Fatal(err)
	}
	v, err := s.WaitValue(ctx, "environment.devtest.value", func(v json.RawMessage) bool { return string(v) == "42.5" })
	if err != nil {
		t.Fatalf("value on the server: %s %v", v, err)
	}
	leaf, _, _ := s.Leaf(ctx, "environment.devtest.value")
	var node struct {
		Source string `json:"$source"`
	}
	if json.Unmarshal(leaf, &node) != nil || len(node.Source) < 12 || node.Source[:12] != "dev.dev-ab12" {
		t.Fatalf("source label: %s", leaf)
	}
	if r.ev.count("sk_ws") == 0 {
		t.Fatal("no sk_ws event")
	}
}
