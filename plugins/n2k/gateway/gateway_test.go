package gateway

import (
	"fmt"
	"testing"

	"devhost/plugins/n2k/decode"
)

func TestPipeline(t *testing.T) {
	g := New()
	// The GPS's address claim, then a fast-packet position (129029) in frames.
	claim := decode.Header{Prio: 6, PGN: 60928, Src: 7, Dst: 255}
	if d := g.Frame(decode.Frame{ID: claim.ID(), Data: []byte{0x24, 0x10, 0x35, 0x11, 0x00, 0x8c, 0x3c, 0xc0}}, "t"); d != nil {
		t.Errorf("claim mapped: %+v", d)
	}
	gnss := decode.Message{Header: decode.Header{Prio: 3, PGN: 129029, Src: 7, Dst: 255},
		Data: []byte{0xff, 0xdb, 0x41, 0x10, 0xa0, 0xcf, 0x2a, 0x20, 0x2d, 0x6d, 0x32, 0xd1, 0x02, 0xf4, 0x01, 0x80, 0x8c,
			0x7f, 0xd7, 0x66, 0x9b, 0x8a, 0xf7, 0x0d, 0x3f, 0x60, 0xfe, 0xff, 0xff, 0xff, 0xff, 0x23, 0xfc, 0x09, 0x50, 0x00,
			0xa0, 0x00, 0xff, 0xff, 0xff, 0x7f, 0x00}}
	var delta int
	for _, f := range decode.Frames(gnss, 3, nil) {
		if d := g.Frame(f, "2026-01-01T00:00:00.000Z"); d != nil {
			delta++
			u := d.Updates[0]
			if u.Source.Src != "7" || u.Source.PGN != 129029 || u.Source.CanName != "c03c8c0011351024" || len(u.Values) < 5 {
				t.Errorf("delta %+v", u)
			}
		}
	}
	if delta != 1 {
		t.Fatalf("%d deltas", delta)
	}
	// Garbage is counted, by kind.
	g.Frame(decode.Frame{ID: 1 << 30, Data: []byte{1}}, "t")
	g.Message(decode.Message{Header: decode.Header{PGN: 65280, Src: 3}, Data: []byte{1, 0x80, 0, 0, 0, 0, 0, 0}}, "t")
	g.Message(decode.Message{Header: decode.Header{PGN: 127250, Src: 3}}, "t")
	g.CountBadLine()
	st := g.Stats()
	if st.FramesIn != 9 || st.Messages != 4 || st.Deltas != 1 || st.PGNs["129029"] != 1 || st.PGNs["60928"] != 1 {
		t.Errorf("stats %+v", st)
	}
	for _, k := range []string{KindBadFrame, KindBadLength, KindBadLine} {
		if st.Errors[k] != 1 {
			t.Errorf("errors[%s] = %d (%v)", k, st.Errors[k], st.Errors)
		}
	}
	devs := g.Devices()
	if len(devs) != 2 || devs[1].Address != 7 || devs[1].Name != "c03c8c0011351024" {
		t.Errorf("devices %+v", devs)
	}
}

func TestAllow(t *testing.T) {
	g := New()
	g.Allow = func(p uint32) bool { return p != 127250 }
	m := decode.Message{Header: decode.Header{PGN: 127250, Src: 7, Dst: 255}, Data: []byte{0xff, 0x10, 0x3b, 0xff, 0x7f, 0xce, 0xf5, 0xfc}}
	if d := g.Message(m, "t"); d != nil {
		t.Errorf("denied PGN mapped: %+v", d)
	}
	g.Allow = nil
	if d := g.Message(m, "t"); d == nil {
		t.Error("allowed PGN not mapped")
	}
}

// Each decoder error, wrapped as the decoder returns it, bumps its own counter under the status
// document's name for it; any other error is a bad frame.
func TestErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{decode.ErrBadFrame, "bad_frame"},
		{decode.ErrFastPacket, "bad_fast_packet"},
		{decode.ErrFastLost, "fast_packet_lost"},
		{decode.ErrTransport, "bad_transport"},
		{decode.ErrTransLost, "transport_lost"},
		{decode.ErrUnknownPGN, "unknown_pgn"},
		{decode.ErrNoMatch, "unknown_proprietary"},
		{decode.ErrEmpty, "bad_length"},
		{decode.ErrEncode, "bad_frame"},
	} {
		g := New()
		g.count(fmt.Errorf("pgn 130306: %w", tc.err))
		if got := g.Stats().Errors; len(got) != 1 || got[tc.want] != 1 {
			t.Errorf("%v: errors %v, want one %s", tc.err, got, tc.want)
		}
	}
}
