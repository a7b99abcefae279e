package main

import (
	"testing"

	"devhost/plugins/n2k/decode"
	"devhost/plugins/n2k/skmap"
)

// pgnHeading is Vessel Heading's PGN.
const pgnHeading = 127250

// sourcedPath is where a value went: its context, source address and PGN, and path.
type sourcedPath struct {
	context, src string
	pgn          uint32
	path         string
}

// Every value goes to Signal K with its message's source, as n2k-signalk gives it: type
// NMEA2000, src the sender's address, pgn the message's PGN. Two compasses on one bus are
// two sources of navigation.headingTrue, an AIS target's values carry the receiver's
// source, and values the rate limiter held keep theirs.
func TestValuesPublishedWithTheirSource(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	if err := h.SetConfig(map[string]any{"enabled": true}); err != nil {
		t.Fatal(err)
	}
	heading := []byte{0xff, 0x10, 0x3b, 0xff, 0x7f, 0xce, 0xf5, 0xfc}
	for _, src := range []uint8{7, 8} {
		fromBus(h, decode.Message{Header: decode.Header{Prio: 2, PGN: pgnHeading, Src: src, Dst: 255}, Data: heading})
	}
	ais, err := decode.Encode(129038, map[string]any{"messageId": 1.0, "userId": 244660001.0,
		"longitude": 4.5, "latitude": 52.1, "sog": 5.2, "cog": 1.5})
	if err != nil {
		t.Fatal(err)
	}
	fromBus(h, decode.Message{Header: decode.Header{Prio: 4, PGN: 129038, Src: 40, Dst: 255}, Data: ais})

	bySource := map[sourcedPath]int{}
	for _, v := range h.Sourced {
		if v.Source.Type != "NMEA2000" {
			t.Errorf("source %+v", v.Source)
		}
		bySource[sourcedPath{v.Context, v.Source.Src, v.Source.PGN, v.Path}]++
	}
	for _, want := range []sourcedPath{
		{"", "7", pgnHeading, "navigation.headingTrue"},
		{"", "8", pgnHeading, "navigation.headingTrue"},
		{"vessels.urn:mrn:imo:mmsi:244660001", "40", 129038, "navigation.speedOverGround"},
	} {
		if bySource[want] != 1 {
			t.Errorf("%+v: %d values (all: %v)", want, bySource[want], bySource)
		}
	}

	// A held value goes out at the rate timer with the source it came with.
	if err := h.SetConfig(map[string]any{"enabled": true, "rate_ms": 1000}); err != nil {
		t.Fatal(err)
	}
	n := len(h.Sourced)
	for range 2 {
		fromBus(h, decode.Message{Header: decode.Header{Prio: 2, PGN: pgnHeading, Src: 9, Dst: 255}, Data: heading})
	}
	if err := h.Advance(2 * 1e9); err != nil {
		t.Fatal(err)
	}
	held := 0
	for _, v := range h.Sourced[n:] {
		if v.Path == "navigation.headingTrue" {
			if v.Source.Src != "9" || v.Source.PGN != pgnHeading {
				t.Errorf("held value's source %+v", v.Source)
			}
			held++
		}
	}
	if held != 2 {
		t.Errorf("%d headings of sender 9 published, want the first and the held one", held)
	}
}

// The source cache answers what sourceOf answers, for valid and refused sources alike, and
// stays bounded.
func TestSourceCache(t *testing.T) {
	inst, bad := "2", "a.b"
	cases := []skmap.Source{
		{Type: "NMEA2000", Src: "35", PGN: 129025},
		{Type: "NMEA2000", Src: "35", PGN: 129029},
		{Type: "NMEA2000", Src: "36", PGN: 127250, Instance: &inst},
		{Type: "NMEA2000", Src: "36", PGN: 127250, Instance: &bad}, // instance dropped
		{Type: "NMEA2000", Src: "254", PGN: 127250},                // refused: not a bus address
	}
	var c sourceCache
	for round := 0; round < 2; round++ {
		for _, s := range cases {
			if got, want := c.of(&s), sourceOf(&s); got != want {
				t.Errorf("round %d: %+v: %+v, want %+v", round, s, got, want)
			}
		}
	}
	for i := 0; i < 3*maxSources; i++ {
		c.of(&skmap.Source{Type: "NMEA2000", Src: "1", PGN: uint32(60000 + i)})
		if len(c) > maxSources {
			t.Fatalf("%d entries, bound %d", len(c), maxSources)
		}
	}
}
