package node

import (
	"testing"
	"time"

	"devhost/plugins/n2k/decode"
)

func claimFrom(src uint8, name Name) decode.Message {
	return decode.Message{Header: decode.Header{Prio: 6, PGN: 60928, Src: src, Dst: 255}, Data: name.Bytes()}
}

func request(dst uint8, p uint32) decode.Message {
	return decode.Message{Header: decode.Header{Prio: 6, PGN: 59904, Src: 9, Dst: dst}, Data: []byte{byte(p), byte(p >> 8), byte(p >> 16)}}
}

func newNode() *Node {
	return &Node{Name: NewName(1000, 2046, 0, 130, 25, 0, 4), Product: Product{Code: 1, Model: "devhost n2k"},
		Transmit: []uint32{60928, 126993}, Receive: []uint32{127250}}
}

func TestNameFields(t *testing.T) {
	n := newNode()
	d, err := decode.Decode(claimFrom(100, n.Name))
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]any{"uniqueNumber": 1000.0, "deviceClass": "Internetwork device", "industryGroup": "Marine", "arbitraryAddressCapable": "Yes"} {
		if d.Field(id) != want {
			t.Errorf("%s = %v want %v (%v)", id, d.Field(id), want, d.Map())
		}
	}
}

func TestClaimTransitions(t *testing.T) {
	n := newNode()
	if st, _ := n.State(); st != StateIdle || n.Message(claimFrom(5, 1), 0) != nil {
		t.Fatal("idle node answers")
	}
	// idle → claiming: the claim goes out from the preferred address.
	out := n.Start(100, 0)
	if len(out) != 1 || out[0].Src != 100 || out[0].PGN != 60928 {
		t.Fatalf("start: %+v", out)
	}
	if n.Tick(ClaimWait-time.Millisecond) || n.Usable() || n.Heartbeat() != nil {
		t.Fatal("usable before the claim stood")
	}
	// claiming → claimed after 250 ms unopposed.
	if !n.Tick(ClaimWait) {
		t.Fatal("not claimed after 250 ms")
	}
	if a, ok := n.Address(); !ok || a != 100 {
		t.Fatalf("address %d %v", a, ok)
	}
	// claimed, a higher NAME claims our address: we defend it.
	out = n.Message(claimFrom(100, n.Name+1), time.Second)
	if len(out) != 1 || out[0].Src != 100 || string(out[0].Data) != string(n.Name.Bytes()) {
		t.Fatalf("defence: %+v", out)
	}
	if st, a := n.State(); st != StateClaimed || a != 100 {
		t.Errorf("after defence %s %d", st, a)
	}
	// claimed, a lower NAME claims it: we move to the next free address and claim again.
	n.Message(claimFrom(101, n.Name-5), time.Second) // 101 is held by a lower NAME too
	out = n.Message(claimFrom(100, n.Name-1), 2*time.Second)
	if len(out) != 1 || out[0].Src != 102 {
		t.Fatalf("re-claim: %+v", out)
	}
	if st, _ := n.State(); st != StateClaiming {
		t.Errorf("state %s", st)
	}
	n.Tick(2*time.Second + ClaimWait)
	if a, ok := n.Address(); !ok || a != 102 {
		t.Errorf("address %d %v", a, ok)
	}
	// Our own claim coming back is not a conflict.
	if out := n.Message(claimFrom(102, n.Name), 3*time.Second); out != nil {
		t.Errorf("echo: %+v", out)
	}
}

func TestCannotClaim(t *testing.T) {
	n := newNode()
	n.taken = map[uint8]Name{}
	for a := 0; a < 252; a++ {
		n.taken[uint8(a)] = 1 // every address held by a lower NAME
	}
	out := n.Start(7, 0)
	if len(out) != 1 || out[0].Src != 254 {
		t.Fatalf("cannot claim: %+v", out)
	}
	if st, _ := n.State(); st != StateLost || n.Usable() {
		t.Errorf("state %s", st)
	}
	// Asked for its claim, it repeats "cannot claim".
	if out := n.Message(request(255, 60928), time.Second); len(out) != 1 || out[0].Src != 254 {
		t.Errorf("request: %+v", out)
	}
}

func TestRequests(t *testing.T) {
	n := newNode()
	n.Start(100, 0)
	// Before the claim stood only the address claim is answered.
	if out := n.Message(request(100, 126996), 0); out != nil {
		t.Errorf("product info while claiming: %+v", out)
	}
	n.Tick(ClaimWait)
	tests := []struct {
		dst  uint8
		pgn  uint32
		want []uint32
	}{
		{255, 60928, []uint32{60928}},
		{100, 60928, []uint32{60928}},
		{100, 126996, []uint32{126996}},
		{255, 126464, []uint32{126464, 126464}},
		{100, 130306, []uint32{59392}}, // asked directly for what it does not send: NAK
		{255, 130306, nil},             // broadcast: no answer
		{42, 60928, nil},               // someone else's request
	}
	for _, tc := range tests {
		out := n.Message(request(tc.dst, tc.pgn), time.Second)
		var got []uint32
		for _, m := range out {
			got = append(got, m.PGN)
			if m.Src != 100 {
				t.Errorf("%d to %d: sent from %d", tc.pgn, tc.dst, m.Src)
			}
		}
		if len(got) != len(tc.want) || len(got) > 0 && got[0] != tc.want[0] {
			t.Errorf("request %d to %d: %v want %v", tc.pgn, tc.dst, got, tc.want)
		}
	}
	// The product information decodes to what the node says it is.
	out := n.Message(request(100, 126996), time.Second)
	d, err := decode.Decode(out[0])
	if err != nil || d.Field("modelId") != "devhost n2k" {
		t.Errorf("product: %v %v", err, d)
	}
	// The PGN lists: transmit (function 0) then receive (1).
	out = n.Message(request(255, 126464), time.Second)
	tx, _ := decode.Decode(out[0])
	rx, _ := decode.Decode(out[1])
	if len(tx.List) != 2 || tx.List[1].Field("pgn") != 126993.0 || len(rx.List) != 1 || rx.List[0].Field("pgn") != 127250.0 {
		t.Errorf("lists %+v %+v", tx, rx)
	}
}

func TestHeartbeat(t *testing.T) {
	n := newNode()
	n.Start(100, 0)
	n.Tick(ClaimWait)
	for i := 0; i < 2; i++ {
		out := n.Heartbeat()
		if len(out) != 1 || out[0].PGN != 126993 {
			t.Fatalf("heartbeat: %+v", out)
		}
		d, err := decode.Decode(out[0])
		if err != nil || d.Field("sequenceCounter") != float64(i) || d.Field("dataTransmitOffset") != "00:01:00" {
			t.Errorf("heartbeat %d: %v %v", i, err, d.Map())
		}
	}
}
