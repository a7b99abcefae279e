//go:build !wasip1

package sdk

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"devhost/abi"
)

const target = "vessels.urn:mrn:imo:mmsi:230123456"

// PublishTo queues each context's values beside the own vessel's: one sk_publish and one
// sk_publish_ctx per context for a whole batch, the root members included.
func TestPublishToOneCallPerContext(t *testing.T) {
	h := start(t, &Plugin{OnTimer: func(id uint32) {
		for _, err := range []error{
			Publish("navigation.speedOverGround", 1.0),
			PublishTo(target, "navigation.speedOverGround", float64(id)),
			PublishTo("atons.urn:mrn:imo:mmsi:992351000", "", map[string]string{"name": "HARBOUR"}),
			PublishTo(target, "", json.RawMessage(` {"mmsi":"230123456"}`)),
		} {
			if err != nil {
				t.Error(err)
			}
		}
	}}, abi.CapSKPublish)
	if err := h.Deliver(abi.Event{Kind: abi.EvTimer, Data: abi.AppendTimer(nil, 2)}, abi.Event{Kind: abi.EvTimer, Data: abi.AppendTimer(nil, 3)}); err != nil {
		t.Fatal(err)
	}
	if n, m := count(h.Calls, abi.FnSKPublish), count(h.Calls, abi.FnSKPublishCtx); n != 1 || m != 2 {
		t.Fatalf("%d sk_publish and %d sk_publish_ctx calls", n, m)
	}
	want := map[string][]PathValue{
		target: {{Path: "navigation.speedOverGround", Value: abi.Number(2)}, {Path: "", Value: abi.JSON([]byte(` {"mmsi":"230123456"}`))},
			{Path: "navigation.speedOverGround", Value: abi.Number(3)}, {Path: "", Value: abi.JSON([]byte(` {"mmsi":"230123456"}`))}},
		"atons.urn:mrn:imo:mmsi:992351000": {{Path: "", Value: abi.JSON([]byte(`{"name":"HARBOUR"}`))}, {Path: "", Value: abi.JSON([]byte(`{"name":"HARBOUR"}`))}},
	}
	if !reflect.DeepEqual(h.Contexts, want) || len(h.Published) != 2 {
		t.Fatalf("contexts %+v, own vessel %+v", h.Contexts, h.Published)
	}
}

// Bad contexts, roots that are not objects and bad paths fail at once with ErrInvalid; so
// does publishing without signalk.publish, with ErrPermission.
func TestPublishToRefuses(t *testing.T) {
	start(t, &Plugin{}, abi.CapSKPublish)
	for name, err := range map[string]error{
		"own vessel":  PublishTo("vessels.self", "a.b", 1),
		"no urn":      PublishTo("vessels.230123456", "a.b", 1),
		"unknown":     PublishTo("boats.urn:mrn:imo:mmsi:230123456", "a.b", 1),
		"root number": PublishTo(target, "", 1),
		"root array":  PublishTo(target, "", []int{1}),
		"root string": PublishTo(target, "", `{"a":1}`),
		"bad path":    PublishTo(target, "a..b", 1),
		"nan":         PublishTo(target, "a.b", json.RawMessage(`{`)),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := ValidContext("vessels.self"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "own vessel") {
		t.Errorf("ValidContext(vessels.self): %v", err)
	}
	start(t, &Plugin{}, abi.CapLog)
	if err := PublishTo(target, "a.b", 1); !errors.Is(err, ErrPermission) {
		t.Errorf("without signalk.publish: %v", err)
	}
}

// The fake host plays the device's cap: MaxContexts live contexts, a context live until 10
// minutes after its last publication; Flush reports the refused context and the others go
// through.
func TestPublishToContextCap(t *testing.T) {
	var flushErr error
	first := 0
	h := start(t, &Plugin{OnTimer: func(id uint32) {
		for i := first; i < first+int(id); i++ {
			if err := PublishTo(fmt.Sprintf("vessels.urn:mrn:imo:mmsi:%09d", i), "a.b", 1); err != nil {
				t.Error(err)
			}
		}
		flushErr = Flush()
	}}, abi.CapSKPublish)
	if err := h.Deliver(abi.Event{Kind: abi.EvTimer, Data: abi.AppendTimer(nil, MaxContexts+1)}); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(flushErr, ErrLimit) || len(h.Contexts) != MaxContexts {
		t.Fatalf("flush %v, %d contexts", flushErr, len(h.Contexts))
	}
	if err := h.Advance(abi.ContextIdleMs*time.Millisecond - time.Millisecond); err != nil {
		t.Fatal(err)
	}
	first = MaxContexts
	if err := h.Deliver(abi.Event{Kind: abi.EvTimer, Data: abi.AppendTimer(nil, 1)}); !errors.Is(flushErr, ErrLimit) || err != nil {
		t.Fatalf("a moment before 10 minutes: %v %v", flushErr, err)
	}
	if err := h.Advance(time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := h.Deliver(abi.Event{Kind: abi.EvTimer, Data: abi.AppendTimer(nil, 1)}); err != nil {
		t.Fatal(err)
	}
	if flushErr != nil || len(h.Contexts) != MaxContexts+1 {
		t.Fatalf("after 10 minutes: flush %v, %d contexts", flushErr, len(h.Contexts))
	}
}
