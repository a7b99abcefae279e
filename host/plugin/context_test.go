package plugin

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/abi"
	sktypes "devhost/host/sk"
)

// sk_publish_ctx (ABI 1.3) hands another context's values to the Signal K client under their
// context, refuses a bad context or record whole, and caps the live contexts of an instance:
// a new context while abi.MaxContexts are live answers limit exceeded until one has been
// idle for abi.ContextIdleMs.
func TestSKPublishCtx(t *testing.T) {
	clk := clockwork.NewFakeClockAt(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	fsk := newFakeSK()
	s, invoke := publishSession(t, clk, fsk)
	call := func(msg []byte) int32 { return invoke(fnSKPublishCtx, msg) }
	mmsi := func(i int) string { return fmt.Sprintf("vessels.urn:mrn:imo:mmsi:%09d", 230000000+i) }
	msg := func(ctx string, vs ...abi.PathValue) []byte {
		return abi.AppendValues(abi.AppendContextValues(nil, ctx), vs)
	}
	sog := abi.PathValue{Path: "navigation.speedOverGround", Value: abi.Number(3.5)}
	root := abi.PathValue{Value: abi.JSON([]byte(`{"name":"ILMATAR"}`))}

	if rc := call(msg(mmsi(0), sog, root)); rc != 0 {
		t.Fatalf("publish: %d", rc)
	}
	want := []sktypes.Value{{Path: "navigation.speedOverGround", Value: 3.5}, {Path: "", Value: json.RawMessage(`{"name":"ILMATAR"}`)}}
	if got := fsk.ctxValues[mmsi(0)]; !reflect.DeepEqual(got, want) || len(fsk.values) != 0 {
		t.Fatalf("published %+v (own vessel %+v)", got, fsk.values)
	}
	for name, b := range map[string][]byte{
		"own vessel":  msg("vessels.self", sog),
		"no urn":      msg("vessels.230123456", sog),
		"no values":   abi.AppendContextValues(nil, mmsi(0)),
		"root number": msg(mmsi(0), abi.PathValue{Value: abi.Number(1)}),
		"bad path":    msg(mmsi(0), sog, abi.PathValue{Path: "a..b", Value: abi.Number(1)}),
	} {
		if rc := call(b); rc != int32(abi.ErrInvalid) {
			t.Errorf("%s: %d, want %d", name, rc, abi.ErrInvalid)
		}
	}
	if n := len(fsk.ctxValues[mmsi(0)]); n != 2 {
		t.Fatalf("refused calls published: %d values", n)
	}

	for i := 1; i < abi.MaxContexts; i++ {
		if rc := call(msg(mmsi(i), sog)); rc != 0 {
			t.Fatalf("context %d: %d", i, rc)
		}
	}
	if rc := call(msg(mmsi(abi.MaxContexts), sog)); rc != int32(abi.ErrLimit) {
		t.Fatalf("context past the cap: %d", rc)
	}
	if _, ok := fsk.ctxValues[mmsi(abi.MaxContexts)]; ok {
		t.Fatal("the refused context was published")
	}
	// A live context keeps publishing; one idle long enough makes room.
	clk.Advance(abi.ContextIdleMs*time.Millisecond - time.Second)
	if rc := call(msg(mmsi(7), sog)); rc != 0 {
		t.Fatalf("a live context: %d", rc)
	}
	if rc := call(msg(mmsi(abi.MaxContexts), sog)); rc != int32(abi.ErrLimit) {
		t.Fatalf("nothing idle yet, a new context: %d", rc)
	}
	clk.Advance(time.Second)
	if rc := call(msg(mmsi(abi.MaxContexts), sog)); rc != 0 {
		t.Fatalf("after the others went idle: %d", rc)
	}
	if rc := call(msg(mmsi(abi.MaxContexts+1), sog)); rc != 0 {
		t.Fatalf("another new context: %d", rc)
	}
	// mmsi(7) published later than the others, so it is still live.
	if len(s.ctxs.last) != 3 {
		t.Fatalf("%d live contexts, want 3", len(s.ctxs.last))
	}
}

// A plugin built for an older minor (bench: abi 1 without abi_minor, and the same module
// declared 1.2) installs and publishes on this 1.3 host unchanged: its module does not import
// sk_publish_ctx, and its values stay the own vessel's.
func TestOlderMinorPluginsRun(t *testing.T) {
	for _, minor := range []int{0, 2} {
		t.Run(fmt.Sprintf("1.%d", minor), func(t *testing.T) {
			h := newHarness(t)
			h.run()
			h.install(packGuest(t, "bench", func(m *abi.Manifest) { m.ABIMinor = minor }), nil)
			h.waitState("bench", StateRunning)
			if code, body := h.do("GET", "/bench/publish?n=3", nil); code != 200 {
				t.Fatalf("publish: %d %s", code, body)
			}
			// The values leave when the call ends, after the reply.
			waitFor(t, "3 values", func() bool {
				h.sk.mu.Lock()
				defer h.sk.mu.Unlock()
				return len(h.sk.values) >= 3
			})
			h.sk.mu.Lock()
			defer h.sk.mu.Unlock()
			if len(h.sk.values) != 3 || h.sk.values[2] != (sktypes.Value{Path: "bench.value", Value: 2.0}) || len(h.sk.ctxValues) != 0 {
				t.Fatalf("published %+v, other contexts %+v", h.sk.values, h.sk.ctxValues)
			}
		})
	}
}
