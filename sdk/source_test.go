//go:build !wasip1

package sdk

import (
	"errors"
	"fmt"
	"testing"

	"devhost/abi"
)

// compass is the source of a heading sender at address 35.
var compass = Source{Type: "NMEA2000", Src: "35", PGN: 127250}

// PublishFrom queues the values of each (context, source) as a group of their own; the groups
// of a batch go in one sk_publish_src call, after the own vessel's device-sourced values; the
// fake host records them with their sources.
func TestPublishFromOneCallForAllSources(t *testing.T) {
	gps := Source{Type: "NMEA2000", Src: "36", PGN: 129026}
	h := start(t, &Plugin{OnTimer: func(id uint32) {
		for _, err := range []error{
			PublishFrom(compass, "navigation.headingMagnetic", float64(id)),
			Publish("environment.inside.temperature", 293.0),
			PublishFrom(gps, "navigation.speedOverGround", 3.0),
			PublishToFrom(target, gps, "navigation.speedOverGround", 4.0),
			PublishFrom(compass, "navigation.headingMagnetic", float64(id)+0.5),
		} {
			if err != nil {
				t.Error(err)
			}
		}
	}}, abi.CapSKPublish)
	if err := h.Deliver(abi.Event{Kind: abi.EvTimer, Data: abi.AppendTimer(nil, 1)}); err != nil {
		t.Fatal(err)
	}
	if n, m := count(h.Calls, abi.FnSKPublish), count(h.Calls, abi.FnSKPublishSrc); n != 1 || m != 1 || h.SourceCalls != 1 {
		t.Fatalf("%d sk_publish and %d sk_publish_src calls", n, m)
	}
	got := fmt.Sprint(h.Sourced)
	want := fmt.Sprint([]SourcedValue{
		{compass, "", PathValue{Path: "navigation.headingMagnetic", Value: abi.Number(1)}},
		{compass, "", PathValue{Path: "navigation.headingMagnetic", Value: abi.Number(1.5)}},
		{gps, "", PathValue{Path: "navigation.speedOverGround", Value: abi.Number(3)}},
		{gps, target, PathValue{Path: "navigation.speedOverGround", Value: abi.Number(4)}},
	})
	if got != want || len(h.Published) != 4 || len(h.Contexts[target]) != 1 {
		t.Fatalf("sourced %s\nwant %s\nown vessel %+v", got, want, h.Published)
	}
}

// More values with sources than one call carries go in as many calls as they need, each
// within abi.MaxValuesPerCall (the fake host refuses a call past it), none lost.
func TestPublishFromSplitsLargeBatches(t *testing.T) {
	const senders, each = 5, 300 // 1,500 values: two calls
	h := start(t, &Plugin{OnTimer: func(uint32) {
		for i := range each {
			for s := range senders {
				src := Source{Type: "NMEA2000", Src: fmt.Sprint(10 + s), PGN: 127250}
				if err := PublishFrom(src, "navigation.headingMagnetic", float64(i)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}}, abi.CapSKPublish)
	if err := h.Deliver(abi.Event{Kind: abi.EvTimer, Data: abi.AppendTimer(nil, 1)}); err != nil {
		t.Fatal(err)
	}
	if len(h.Sourced) != senders*each || h.SourceCalls < 2 {
		t.Fatalf("%d values in %d calls, want %d in at least 2", len(h.Sourced), h.SourceCalls, senders*each)
	}
}

// Bad sources, contexts and paths fail at once with ErrInvalid, and so does the root of the
// own vessel; without signalk.publish, ErrPermission.
func TestPublishFromRefuses(t *testing.T) {
	start(t, &Plugin{}, abi.CapSKPublish)
	for name, err := range map[string]error{
		"no type":         PublishFrom(Source{Src: "1"}, "a.b", 1),
		"device src":      PublishFrom(Source{Type: "Plugin", Src: abi.DeviceSrc}, "a.b", 1),
		"no pgn":          PublishFrom(Source{Type: "NMEA2000", Src: "1"}, "a.b", 1),
		"address 255":     PublishFrom(Source{Type: "NMEA2000", Src: "255", PGN: 1}, "a.b", 1),
		"own vessel root": PublishFrom(compass, "", map[string]string{"name": "x"}),
		"vessels.self":    PublishToFrom("vessels.self", compass, "a.b", 1),
		"bad path":        PublishFrom(compass, "a..b", 1),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	start(t, &Plugin{}, abi.CapLog)
	if err := PublishFrom(compass, "a.b", 1); !errors.Is(err, ErrPermission) {
		t.Errorf("without signalk.publish: %v", err)
	}
}
