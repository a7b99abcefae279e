package decode

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"devhost/plugins/n2k/pgn"
)

func TestParseID(t *testing.T) {
	tests := []struct {
		id   uint32
		want Header
	}{
		{0x09F8027F, Header{Prio: 2, PGN: 129026, Src: 0x7f, Dst: 255}},
		{0x18EEFF01, Header{Prio: 6, PGN: 60928, Src: 1, Dst: 255}},
		{0x18EA2301, Header{Prio: 6, PGN: 59904, Src: 1, Dst: 0x23}},
		{0x0DFF180D, Header{Prio: 3, PGN: 130840, Src: 0x0d, Dst: 255}},
	}
	for _, tc := range tests {
		got := ParseID(tc.id)
		if got != tc.want {
			t.Errorf("%#x: got %+v want %+v", tc.id, got, tc.want)
		}
		if back := got.ID(); back != tc.id {
			t.Errorf("%#x: ID() %#x", tc.id, back)
		}
	}
}

func decodeHex(t *testing.T, p uint32, data ...byte) *Decoded {
	t.Helper()
	d, err := Decode(Message{Header: Header{PGN: p, Src: 7, Dst: 255, Prio: 2}, Data: data})
	if err != nil {
		t.Fatalf("pgn %d: %v", p, err)
	}
	return d
}

// Expected values are canboatjs 3.20.0's for the same bytes (taken from the Dirona log).
func TestDecodeFields(t *testing.T) {
	tests := []struct {
		name string
		pgn  uint32
		data []byte
		want map[string]any
	}{
		{"heading", 127250, []byte{0xff, 0x10, 0x3b, 0xff, 0x7f, 0xce, 0xf5, 0xfc},
			map[string]any{"heading": 1.512, "variation": -0.261, "reference": "True"}},
		{"rate of turn", 127251, []byte{0xff, 0xf8, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff}, nil},
		{"position", 129025, []byte{0xe6, 0x87, 0x63, 0x08, 0x46, 0xb5, 0xab, 0xdb},
			map[string]any{"latitude": 14.0740582, "longitude": -60.950393}},
		{"wind", 130306, []byte{0xf7, 0xdf, 0x01, 0x67, 0x00, 0xfa, 0xff, 0xff},
			map[string]any{"sid": 247.0, "windSpeed": 4.79, "windAngle": 0.0103, "reference": "Apparent"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := decodeHex(t, tc.pgn, tc.data...)
			if tc.want == nil {
				return
			}
			if !reflect.DeepEqual(d.Map(), tc.want) {
				t.Errorf("got %v want %v", d.Map(), tc.want)
			}
		})
	}
}

func TestDecodeSpecialTypes(t *testing.T) {
	// 129029 GNSS position data (a fast-packet message, whole): date, time, repeating set.
	data := hexData("ff,db,41,10,a0,cf,2a,20,2d,6d,32,d1,02,f4,01,80,8c,7f,d7,66,9b,8a,f7,0d,3f,60,fe,ff,ff,ff,ff,23,fc,09,50,00,a0,00,ff,ff,ff,7f,00")
	d := decodeHex(t, 129029, data...)
	want := map[string]any{"date": "2016.02.28", "time": "19:57:05", "latitude": 14.074058587276419,
		"longitude": -60.95039335508509, "altitude": -27.246835, "gnssType": "GPS+SBAS/WAAS", "method": "DGNSS fix",
		"integrity": "No integrity checking", "numberOfSvs": 9.0, "hdop": 0.8, "pdop": 1.6, "referenceStations": 0.0}
	if !reflect.DeepEqual(d.Map(), want) {
		t.Errorf("got %v\nwant %v", d.Map(), want)
	}
	if d.List == nil || len(d.List) != 0 {
		t.Errorf("repeating set: %v", d.List)
	}
	// 127489: engine hours as a duration, discrete status as bit lookups.
	eng := decodeHex(t, 127489, hexData("0b,00,00,ff,ff,b9,79,46,0a,ff,ff,c8,d3,ea,00,ff,ff,ff,ff,ff,00,00,00,00,ff,ff")...)
	wantEng := map[string]any{"instance": 11.0, "oilPressure": 0.0, "temperature": 311.61, "alternatorPotential": 26.3,
		"fuelRate": -0.1, "totalEngineHours": "4274:54:00", "discreteStatus1": []string{}, "discreteStatus2": []string{},
		"engineLoad": -1.0, "engineTorque": -1.0}
	if !reflect.DeepEqual(eng.Map(), wantEng) {
		t.Errorf("got %v\nwant %v", eng.Map(), wantEng)
	}
}

func TestDecodeProprietary(t *testing.T) {
	// 65280 Furuno heave: manufacturer code 1855, industry 4.
	d := decodeHex(t, 65280, 0x3f, 0x9f, 0x12, 0x00, 0x00, 0x00, 0xff, 0xff)
	if d.ID != "furunoHeave" || d.Field("manufacturerCode") != "Furuno" {
		t.Errorf("got %s %v", d.ID, d.Map())
	}
	_, err := Decode(Message{Header: Header{PGN: 65280}, Data: []byte{0x01, 0x80, 0, 0, 0, 0, 0, 0}})
	if !errors.Is(err, ErrNoMatch) {
		t.Errorf("unknown manufacturer: %v", err)
	}
	if _, err := Decode(Message{Header: Header{PGN: 1}, Data: []byte{1}}); !errors.Is(err, ErrUnknownPGN) {
		t.Errorf("unknown pgn: %v", err)
	}
}

func hexData(s string) []byte {
	var out []byte
	for _, h := range strings.Split(s, ",") {
		b, _ := strconv.ParseUint(h, 16, 8)
		out = append(out, byte(b))
	}
	return out
}

func TestRoundTo(t *testing.T) {
	tests := []struct {
		v    float64
		p    int
		want float64
	}{
		{785.75, 1, 785.8}, {0.25, 1, 0.3}, {-0.25, 1, -0.3}, {1.005, 2, 1}, {4.79, 2, 4.79}, {2.5, 0, 3},
	}
	for _, tc := range tests {
		if got := roundTo(tc.v, tc.p); got != tc.want {
			t.Errorf("roundTo(%v, %d) = %v want %v", tc.v, tc.p, got, tc.want)
		}
	}
}

func msg(p uint32, src uint8, n int) Message {
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(i*7 + int(src))
	}
	return Message{Header: Header{Prio: 3, PGN: p, Src: src, Dst: 255}, Data: data}
}

func TestFastPacket(t *testing.T) {
	const p = 129029
	a := msg(p, 7, 43)
	b := msg(p, 9, 43)
	fa := Frames(a, 2, nil)
	fb := Frames(b, 5, nil)
	if len(fa) != 7 {
		t.Fatalf("%d frames", len(fa))
	}
	tests := []struct {
		name   string
		frames []Frame
		want   []Message
		errs   int
	}{
		{"in order", fa, []Message{a}, 0},
		{"interleaved senders", []Frame{fa[0], fb[0], fa[1], fb[1], fb[2], fa[2], fa[3], fa[4], fb[3], fb[4], fb[5], fa[5], fb[6], fa[6]}, []Message{b, a}, 0},
		{"out of order", []Frame{fa[0], fa[2], fa[1], fa[4], fa[3], fa[6], fa[5]}, []Message{a}, 0},
		{"frame 0 last", []Frame{fa[1], fa[2], fa[3], fa[4], fa[5], fa[6], fa[0]}, []Message{a}, 0},
		{"missing frame", []Frame{fa[0], fa[1], fa[3], fa[4], fa[5], fa[6]}, nil, 0},
		{"restarted", []Frame{fa[0], fa[1], fa[0], fa[1], fa[2], fa[3], fa[4], fa[5], fa[6]}, []Message{a}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			asm := NewAssembler()
			var got []Message
			errs := 0
			for _, f := range tc.frames {
				m, err := asm.Add(f)
				if err != nil {
					errs++
				}
				if m != nil {
					kept := *m // the message is the assembler's until the next Add
					kept.Data = slices.Clone(m.Data)
					got = append(got, kept)
				}
			}
			if errs != tc.errs {
				t.Errorf("%d errors, want %d", errs, tc.errs)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d messages, want %d", len(got), len(tc.want))
			}
			for i := range got {
				if got[i].Header != tc.want[i].Header || !bytes.Equal(got[i].Data, tc.want[i].Data) {
					t.Errorf("message %d: %+v want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestFastPacketBad(t *testing.T) {
	asm := NewAssembler()
	id := Header{Prio: 3, PGN: 129029, Src: 1, Dst: 255}.ID()
	for _, f := range []Frame{
		{ID: id, Data: []byte{0x00, 0}},                   // length 0
		{ID: id, Data: []byte{0x00, 250, 1, 2, 3, 4}},     // over 223
		{ID: id, Data: []byte{0x01}},                      // too short
		{ID: 1 << 29, Data: []byte{1}},                    // identifier over 29 bits
		{ID: id, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}}, // over 8 bytes
	} {
		if m, err := asm.Add(f); err == nil || m != nil {
			t.Errorf("%v: accepted", f.Data)
		}
	}
	// A frame past the announced length drops the message.
	if _, err := asm.Add(Frame{ID: id, Data: []byte{0x20, 8, 1, 2, 3, 4, 5, 6}}); err != nil {
		t.Fatal(err)
	}
	if _, err := asm.Add(Frame{ID: id, Data: []byte{0x25, 1, 2, 3, 4, 5, 6, 7}}); !errors.Is(err, ErrFastPacket) {
		t.Errorf("frame 5 of 8 bytes: %v", err)
	}
}

func TestTransportProtocol(t *testing.T) {
	m := msg(126996, 35, 134) // product information, long enough for TP
	frames := Frames(m, 0, func(uint32) bool { return false })
	if len(frames) != 1+20 {
		t.Fatalf("%d frames", len(frames))
	}
	asm := NewAssembler()
	asm.IsFast = func(uint32) bool { return false }
	var got *Message
	// Data packets out of order after the announcement.
	order := append([]Frame{frames[0]}, frames[2:]...)
	order = append(order, frames[1])
	for _, f := range order {
		out, err := asm.Add(f)
		if err != nil {
			t.Fatal(err)
		}
		if out != nil {
			got = out
		}
	}
	if got == nil || got.PGN != m.PGN || !bytes.Equal(got.Data, m.Data) || got.Src != 35 {
		t.Fatalf("got %+v", got)
	}
	if asm.Pending() != 0 {
		t.Errorf("%d pending", asm.Pending())
	}
	// A data packet without a session is an error, not a message.
	if out, err := asm.Add(frames[1]); out != nil || !errors.Is(err, ErrTransport) {
		t.Errorf("stray TP.DT: %v %v", out, err)
	}
	// An abort ends the session.
	asm.Add(frames[0])
	abort := Header{Prio: 7, PGN: PGNTPCM, Src: 35, Dst: 255}
	asm.Add(Frame{ID: abort.ID(), Data: []byte{255, 0xff, 0xff, 0xff, 0xff, 0x14, 0xf0, 0x01}})
	if asm.Pending() != 0 {
		t.Errorf("abort left %d pending", asm.Pending())
	}
}

// TestRoundFastMatchesFormatting checks the arithmetic path of roundTo against formatting
// and parsing the digits, over raw values of the resolutions canboat uses.
func TestRoundFastMatchesFormatting(t *testing.T) {
	slow := func(a float64, p int) float64 {
		s := strconv.FormatFloat(a, 'f', p, 64)
		out, _ := strconv.ParseFloat(s, 64)
		return out
	}
	resolutions := []float64{1, 0.1, 0.01, 0.001, 0.0001, 1e-05, 1e-06, 1e-07, 1e-09, 1e-16,
		0.0078125, 6.10352e-05, 0.25, 0.005, 0.004, 1.19209e-07, 3.63798e-12, 3.125e-05, 2.77778e-09, 0.05, 0.000488281}
	raws := []int64{0, 1, 2, 3, 5, 7, 9, 10, 15, 25, 99, 101, 12345, 65533, 1 << 20, 123456789, -1, -15, -32767, 2147483647, -2147483648}
	for _, res := range resolutions {
		p := pgn.Decimals(res)
		for _, raw := range raws {
			for _, off := range []int64{0, 1, 3, 17, 1000} {
				v := float64(raw+off) * res
				got, ok := roundFast(math.Abs(v), p)
				if !ok {
					continue
				}
				if want := slow(math.Abs(v), p); got != want {
					t.Errorf("roundFast(%v, %d) = %v, formatting gives %v", v, p, got, want)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		res := resolutions[rng.IntN(len(resolutions))]
		p := pgn.Decimals(res)
		v := float64(rng.Int64N(1<<32)-1<<31) * res
		if got, ok := roundFast(math.Abs(v), p); ok {
			if want := slow(math.Abs(v), p); got != want {
				t.Fatalf("roundFast(%v, %d) = %v, formatting gives %v", v, p, got, want)
			}
		}
	}
	for _, tc := range []struct {
		a float64
		p int
	}{{0.25, 1}, {2.5, 0}, {785.75, 1}, {1 << 53, 0}} {
		if _, ok := roundFast(tc.a, tc.p); ok {
			t.Errorf("roundFast(%v, %d) answered a half or an inexact value", tc.a, tc.p)
		}
	}
}

// Lookup's answers, kept by definition and by the address of the id, stay right across
// definitions, for ids made at run time with the same bytes, and for ids a definition lacks.
func TestLookupByIDAcrossDefinitions(t *testing.T) {
	var d Decoded
	heading := Message{Header: Header{PGN: 127250, Src: 7, Dst: 255}, Data: []byte{0xff, 0x10, 0x3b, 0xff, 0x7f, 0xce, 0xf5, 0xfc}}
	wind := Message{Header: Header{PGN: 130306, Src: 7, Dst: 255}, Data: []byte{0xf7, 0xdf, 0x01, 0x67, 0x00, 0xfa, 0xff, 0xff}}
	built := func(s string) string { return string([]byte(s)) }
	for round := 0; round < 3; round++ {
		if err := DecodeInto(heading, &d); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"reference", built("reference")} {
			if v, ok := d.Lookup(id); !ok || v != "True" {
				t.Fatalf("round %d heading %s: %v %v", round, id, v, ok)
			}
		}
		if v, ok := d.Lookup("windSpeed"); ok {
			t.Fatalf("heading windSpeed: %v", v)
		}
		if err := DecodeInto(wind, &d); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"reference", built("reference")} {
			if v, ok := d.Lookup(id); !ok || v != "Apparent" {
				t.Fatalf("round %d wind %s: %v %v", round, id, v, ok)
			}
		}
		if v, ok := d.Lookup(built("windSpeed")); !ok || v != 4.79 {
			t.Fatalf("wind windSpeed: %v %v", v, ok)
		}
		if v, ok := d.Lookup("heading"); ok {
			t.Fatalf("wind heading: %v", v)
		}
	}
}

// A number boxed from the memo is the number, bit for bit, whichever box it shares.
func TestNumberBoxes(t *testing.T) {
	var m decodeMemo
	values := []float64{0, math.Copysign(0, -1), 1, -1.5, math.NaN(), math.Inf(1), 1e300}
	for i := 0; i < 2000; i++ {
		values = append(values, float64(i%300)*0.25)
	}
	for _, f := range values {
		got, ok := m.number(f).(float64)
		if !ok || math.Float64bits(got) != math.Float64bits(f) {
			t.Fatalf("%v: got %v", f, got)
		}
	}
}
