package abi

import (
	"reflect"
	"strings"
	"testing"
)

func TestSourceValidate(t *testing.T) {
	for _, c := range []struct {
		src  Source
		want string // "" valid, else part of the error
	}{
		{Source{Type: "NMEA2000", Src: "35", PGN: 129025}, ""},
		{Source{Type: "NMEA2000", Src: "0", PGN: 59904}, ""},
		{Source{Type: "NMEA2000", Src: "253", PGN: 130312, Instance: "2"}, ""},
		{Source{Type: "Plugin", Src: "ruuvi-c4_1a"}, ""},
		{Source{Type: "NMEA0183", Src: strings.Repeat("a", MaxSourceSrc), PGN: MaxPGN}, ""},
		{Source{Type: "", Src: "1"}, "type"},
		{Source{Type: "2000", Src: "1"}, "type"},
		{Source{Type: "NMEA-2000", Src: "1"}, "type"},
		{Source{Type: strings.Repeat("T", MaxSourceType+1), Src: "1"}, "type"},
		{Source{Type: "Plugin", Src: ""}, "src"},
		{Source{Type: "Plugin", Src: "a.b"}, "src"},
		{Source{Type: "Plugin", Src: "a:b"}, "src"},
		{Source{Type: "Plugin", Src: strings.Repeat("a", MaxSourceSrc+1)}, "src"},
		{Source{Type: "Plugin", Src: DeviceSrc}, "device"},
		{Source{Type: "Plugin", Src: "a", Instance: "x.y"}, "instance"},
		{Source{Type: "Plugin", Src: "a", PGN: MaxPGN + 1}, "pgn"},
		{Source{Type: "NMEA2000", Src: "254", PGN: 1}, "address"},
		{Source{Type: "NMEA2000", Src: "035", PGN: 1}, "address"},
		{Source{Type: "NMEA2000", Src: "gps", PGN: 1}, "address"},
		{Source{Type: "NMEA2000", Src: "35"}, "without a pgn"},
	} {
		err := c.src.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.src, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: error %v, want one with %q", c.src, err, c.want)
		}
	}
}

func TestSourceValuesRoundTrip(t *testing.T) {
	gps := Source{Type: SourceTypeN2K, Src: "35", PGN: 129025, Instance: "1"}
	for _, ctx := range []string{"", "vessels.urn:mrn:imo:mmsi:230123456"} {
		in := []PathValue{
			{"navigation.position", JSON([]byte(`{"latitude":60.1,"longitude":24.9}`))},
			{"navigation.speedOverGround", Number(3.2)},
		}
		if ctx != "" {
			in = append(in, PathValue{"", JSON([]byte(`{"mmsi":"230123456"}`))})
		}
		b := AppendValues(AppendSourceValues(nil, gps, ctx), in)
		src, c, out, err := DecodeSourceValues(b, 0)
		if err != nil || src != gps || c != ctx || !reflect.DeepEqual(in, out) {
			t.Fatalf("context %q: %+v %q %v\n%+v", ctx, src, c, err, out)
		}
		var table PathTable
		for round := range 2 {
			src, c, out, err := table.AppendDecodedSourceValues(nil, b, 0)
			if err != nil || src != gps || c != ctx || !reflect.DeepEqual(in, out) {
				t.Fatalf("context %q, round %d through a PathTable: %+v %q %v", ctx, round, src, c, err)
			}
		}
	}
}

func TestDecodeSourceValuesRefuses(t *testing.T) {
	gps := Source{Type: SourceTypeN2K, Src: "35", PGN: 129025}
	self := AppendSourceValues(nil, gps, "")
	one := AppendValue(nil, "navigation.speedOverGround", Number(1))
	with := func(head []byte, recs ...[]byte) []byte {
		b := append([]byte(nil), head...)
		for _, r := range recs {
			b = append(b, r...)
		}
		return b
	}
	for name, b := range map[string][]byte{
		"nothing":       nil,
		"no values":     self,
		"half a head":   self[:10],
		"bad source":    with(AppendSourceValues(nil, Source{Type: "NMEA2000", Src: "300", PGN: 1}, ""), one),
		"device src":    with(AppendSourceValues(nil, Source{Type: "Plugin", Src: DeviceSrc}, ""), one),
		"long type":     with(AppendSourceValues(nil, Source{Type: strings.Repeat("T", 40), Src: "1"}, ""), one),
		"self context":  with(AppendSourceValues(nil, gps, "vessels.self"), one),
		"bad context":   with(AppendSourceValues(nil, gps, "vessels.x y"), one),
		"root for self": with(self, AppendValue(nil, "", JSON([]byte(`{"name":"x"}`)))),
		"bad path":      with(self, AppendValue(nil, "a..b", Number(1))),
		"truncated":     with(self, one[:len(one)-1]),
		"too many":      with(self, one, one, one),
	} {
		if _, _, _, err := DecodeSourceValues(b, 2); err == nil {
			t.Errorf("%s: decoded", name)
		}
		var table PathTable
		if _, _, out, err := table.AppendDecodedSourceValues([]PathValue{{Path: "kept"}}, b, 2); err == nil || len(out) != 1 {
			t.Errorf("%s: decoded through a PathTable, or dst changed: %v", name, out)
		}
	}
}

// FuzzSourceValues: any bytes decode to an error or to a message that encodes back the same.
func FuzzSourceValues(f *testing.F) {
	f.Add(AppendNumber(AppendSourceValues(nil, Source{Type: SourceTypeN2K, Src: "35", PGN: 127250}, ""), "navigation.headingMagnetic", 1))
	f.Add(AppendValue(AppendSourceValues(nil, Source{Type: "Plugin", Src: "a", Instance: "b"}, "atons.urn:mrn:imo:mmsi:992351000"), "", JSON([]byte(`{"name":"x"}`))))
	f.Fuzz(func(t *testing.T, b []byte) {
		src, c, vs, err := DecodeSourceValues(b, 0)
		if err != nil {
			return
		}
		if src.Validate() != nil || len(vs) == 0 {
			t.Fatalf("decoded %+v with %d values", src, len(vs))
		}
		src2, c2, vs2, err := DecodeSourceValues(AppendValues(AppendSourceValues(nil, src, c), vs), 0)
		if err != nil || src2 != src || c2 != c || !reflect.DeepEqual(vs, vs2) {
			t.Fatalf("re-encoded: %v", err)
		}
	})
}
