package pgn

import "testing"

func TestDefinitions(t *testing.T) {
	tests := []struct {
		pgn    uint32
		id     string
		typ    string
		fields int
	}{
		{127250, "vesselHeading", Single, 6},
		{129029, "gnssPositionData", Fast, 18},
		{60928, "isoAddressClaim", Single, 10},
	}
	for _, tc := range tests {
		d := Definitions(tc.pgn)
		if len(d) == 0 {
			t.Fatalf("%d: no definition", tc.pgn)
		}
		if d[0].ID != tc.id || d[0].Type != tc.typ || len(d[0].Fields) != tc.fields {
			t.Errorf("%d: got %s %s %d fields", tc.pgn, d[0].ID, d[0].Type, len(d[0].Fields))
		}
	}
	if Definitions(1) != nil {
		t.Error("PGN 1 defined")
	}
	// Proprietary PGNs carry several definitions told apart by the manufacturer code.
	d := Definitions(65280)
	if len(d) < 2 || !d[0].Fields[0].HasMatch {
		t.Fatalf("65280: %d definitions", len(d))
	}
	for i := 1; i < len(d); i++ {
		if d[i-1].Fallback && !d[i].Fallback {
			t.Error("fallback definition before a specific one")
		}
	}
}

func TestFieldFacts(t *testing.T) {
	f := Definitions(127250)[0].Fields[1] // heading
	if f.ID != "heading" || f.BitOffset != 8 || f.BitLength != 16 || f.Resolution != 0.0001 || f.Unit != "rad" {
		t.Errorf("heading: %+v", f)
	}
	if n, ok := LookupName("DIRECTION_REFERENCE", 1); !ok || n != "Magnetic" {
		t.Errorf("DIRECTION_REFERENCE 1: %q %v", n, ok)
	}
	if _, ok := LookupName("DIRECTION_REFERENCE", 9); ok {
		t.Error("DIRECTION_REFERENCE 9 named")
	}
	if n, ok := BitName("ENGINE_STATUS_1", 0); !ok || n != "Check Engine" {
		t.Errorf("ENGINE_STATUS_1 bit 0: %q", n)
	}
	if !IsFast(129029) || IsFast(127250) {
		t.Error("IsFast")
	}
	if Version() == "" || len(All()) < 400 {
		t.Errorf("version %q, %d definitions", Version(), len(All()))
	}
}
