package wasmbin

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

func TestAppendU32(t *testing.T) {
	for _, c := range []struct {
		v    uint32
		want []byte
	}{
		{0, []byte{0x00}},
		{1, []byte{0x01}},
		{0x7f, []byte{0x7f}},
		{0x80, []byte{0x80, 0x01}},
		{300, []byte{0xac, 0x02}},
		{0x3fff, []byte{0xff, 0x7f}},
		{0x4000, []byte{0x80, 0x80, 0x01}},
		{1<<28 - 1, []byte{0xff, 0xff, 0xff, 0x7f}},
		{1 << 28, []byte{0x80, 0x80, 0x80, 0x80, 0x01}},
		{math.MaxUint32, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}},
	} {
		got := AppendU32(nil, c.v)
		if !bytes.Equal(got, c.want) {
			t.Errorf("AppendU32(%d) = % x, want % x", c.v, got, c.want)
		}
		r := NewReader(got)
		if back := r.U32(); back != c.v || r.Err() != nil || !r.Done() {
			t.Errorf("U32(% x) = %d, %v, %d left; want %d", got, back, r.Err(), len(r.Rest()), c.v)
		}
	}
}

func TestAppendS32(t *testing.T) {
	for _, c := range []struct {
		v    int32
		want []byte
	}{
		{0, []byte{0x00}},
		{1, []byte{0x01}},
		{-1, []byte{0x7f}},
		{63, []byte{0x3f}},
		{64, []byte{0xc0, 0x00}}, // bit 6 set: needs a second byte to stay positive
		{-64, []byte{0x40}},
		{-65, []byte{0xbf, 0x7f}},
		{100, []byte{0xe4, 0x00}},
		{20000, []byte{0xa0, 0x9c, 0x01}},
		{math.MaxInt32, []byte{0xff, 0xff, 0xff, 0xff, 0x07}},
		{math.MinInt32, []byte{0x80, 0x80, 0x80, 0x80, 0x78}},
	} {
		got := AppendS32(nil, c.v)
		if !bytes.Equal(got, c.want) {
			t.Errorf("AppendS32(%d) = % x, want % x", c.v, got, c.want)
		}
		r := NewReader(got)
		if back := r.S32(); back != c.v || r.Err() != nil || !r.Done() {
			t.Errorf("S32(% x) = %d, %v, %d left; want %d", got, back, r.Err(), len(r.Rest()), c.v)
		}
		r = NewReader(got)
		if raw := r.LEB(5); !bytes.Equal(raw, got) || r.Err() != nil {
			t.Errorf("LEB(% x) = % x, %v", got, raw, r.Err())
		}
	}
}

// Numbers written in more bytes than needed are valid up to the five bytes an i32 may take;
// a sixth byte, or an end inside the number, is an error.
func TestMalformedLEB(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []byte
		want uint32
		err  error
	}{
		{"padded zero", []byte{0x80, 0x00}, 0, nil},
		{"padded one in five", []byte{0x81, 0x80, 0x80, 0x80, 0x00}, 1, nil},
		{"six bytes", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, 0, ErrTooLong},
		{"endless", bytes.Repeat([]byte{0xff}, 16), 0, ErrTooLong},
		{"empty", nil, 0, ErrUnexpectedEnd},
		{"cut", []byte{0x80, 0x80}, 0, ErrUnexpectedEnd},
	} {
		r := NewReader(c.in)
		if got := r.U32(); got != c.want || !errors.Is(r.Err(), c.err) {
			t.Errorf("%s: U32 = %d, %v; want %d, %v", c.name, got, r.Err(), c.want, c.err)
		}
		r = NewReader(c.in)
		if got := r.S32(); int64(got) != int64(c.want) || !errors.Is(r.Err(), c.err) {
			t.Errorf("%s: S32 = %d, %v; want %d, %v", c.name, got, r.Err(), c.want, c.err)
		}
		r = NewReader(c.in)
		if got := r.LEB(5); (c.err == nil) != (got != nil) || !errors.Is(r.Err(), c.err) {
			t.Errorf("%s: LEB = % x, %v; want error %v", c.name, got, r.Err(), c.err)
		}
	}
	// An i64 immediate takes up to ten bytes.
	ten := append(bytes.Repeat([]byte{0x80}, 9), 0x00)
	if r := NewReader(ten); len(r.LEB(10)) != 10 || r.Err() != nil {
		t.Errorf("LEB(10) of ten bytes: %v", r.Err())
	}
	if r := NewReader(ten); r.LEB(5) != nil || !errors.Is(r.Err(), ErrTooLong) {
		t.Errorf("LEB(5) of ten bytes: %v, want %v", r.Err(), ErrTooLong)
	}
}

// The first error sticks: later reads answer zero values and keep it, even where the input
// would have had what they ask for.
func TestStickyError(t *testing.T) {
	r := NewReader([]byte{0x06, 'a', 'b', 0x01, 0x02, 0x03})
	if got := r.Name(); got != "" || !errors.Is(r.Err(), ErrUnexpectedEnd) {
		t.Fatalf("Name of 6 bytes in 5 = %q, %v", got, r.Err())
	}
	first := r.Err()
	if b := r.Byte(); b != 0 {
		t.Errorf("Byte after an error = %d", b)
	}
	if v := r.U32(); v != 0 {
		t.Errorf("U32 after an error = %d", v)
	}
	if v := r.S32(); v != 0 {
		t.Errorf("S32 after an error = %d", v)
	}
	if b := r.Bytes(1); b != nil {
		t.Errorf("Bytes after an error = % x", b)
	}
	if b := r.LEB(5); b != nil {
		t.Errorf("LEB after an error = % x", b)
	}
	r.Limits()
	r.Fail(errors.New("later"))
	if r.Err() != first || !r.Done() {
		t.Errorf("error %v, done %v; want the first error %v kept", r.Err(), r.Done(), first)
	}
}

func TestReads(t *testing.T) {
	in := AppendName([]byte{0x2a}, "env")
	in = append(in, 0x01, 0x02, 0x03) // limits with a maximum: 2..3
	in = append(in, 0x00, 0x04)       // limits without: 4..
	in = append(in, 0xde, 0xad)
	r := NewReader(in)
	if b := r.Byte(); b != 0x2a {
		t.Errorf("Byte = %#x", b)
	}
	if n := r.Name(); n != "env" {
		t.Errorf("Name = %q", n)
	}
	r.Limits()
	r.Limits()
	if b := r.Bytes(2); !bytes.Equal(b, []byte{0xde, 0xad}) {
		t.Errorf("Bytes = % x", b)
	}
	if r.Err() != nil || !r.Done() {
		t.Errorf("error %v, %d bytes left", r.Err(), len(r.Rest()))
	}
	if r.Bytes(-1); !errors.Is(r.Err(), ErrUnexpectedEnd) {
		t.Errorf("Bytes(-1): %v", r.Err())
	}
}

func TestSections(t *testing.T) {
	secs := []Section{{SecType, []byte{0x01, 0x60, 0x00, 0x00}}, {SecCustom, AppendName(nil, "x")}, {SecMemory, []byte{0x01, 0x00, 0x01}}}
	mod := Encode(secs...)
	got, err := Sections(mod)
	if err != nil || len(got) != len(secs) {
		t.Fatalf("Sections = %v, %v", got, err)
	}
	for i := range secs {
		if got[i].ID != secs[i].ID || !bytes.Equal(got[i].Body, secs[i].Body) {
			t.Errorf("section %d = %v, want %v", i, got[i], secs[i])
		}
	}
	if got, err := Sections([]byte(Header)); err != nil || len(got) != 0 {
		t.Errorf("header alone: %v, %v", got, err)
	}
	for _, c := range []struct {
		name string
		in   []byte
		err  error
	}{
		{"empty", nil, ErrNotModule},
		{"short", []byte("\x00asm\x01"), ErrNotModule},
		{"magic", []byte("\x00wasm\x01\x00\x00"), ErrNotModule},
		{"version 2", []byte("\x00asm\x02\x00\x00\x00"), ErrNotModule},
		{"cut body", mod[:len(mod)-1], ErrUnexpectedEnd},
		{"cut size", append([]byte(Header), SecType), ErrUnexpectedEnd},
		{"size too long", append([]byte(Header), SecType, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), ErrTooLong},
	} {
		if _, err := Sections(c.in); !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
	}
}

func TestOrder(t *testing.T) {
	// The format's order: type, import, function, table, memory, tag, global, export, start,
	// element, data count, code, data.
	seq := []byte{SecType, SecImport, SecFunction, SecTable, SecMemory, SecTag, SecGlobal, SecExport,
		SecStart, SecElement, SecDataCount, SecCode, SecData}
	for i := 1; i < len(seq); i++ {
		if Order(seq[i-1]) >= Order(seq[i]) {
			t.Errorf("section %d ranks %d, not before section %d at %d", seq[i-1], Order(seq[i-1]), seq[i], Order(seq[i]))
		}
	}
	if Order(SecCustom) != 0 || Order(99) != 0 || Order(SecType) == 0 {
		t.Errorf("custom %d, unknown %d, type %d", Order(SecCustom), Order(99), Order(SecType))
	}
}

// FuzzSections: no input makes the reader panic, and whatever splits into sections encodes
// back to the same bytes.
func FuzzSections(f *testing.F) {
	f.Add(Encode(Section{SecType, []byte{0x01, 0x60, 0x00, 0x00}}, Section{SecFunction, []byte{0x01, 0x00}},
		Section{SecCode, []byte{0x01, 0x02, 0x00, 0x0b}}))
	f.Add([]byte(Header))
	f.Fuzz(func(t *testing.T, b []byte) {
		secs, err := Sections(b)
		if err == nil {
			// Encoding again writes the same sections; only a size written in more bytes
			// than needed comes out shorter.
			again := Encode(secs...)
			secs2, err := Sections(again)
			if err != nil || len(secs2) != len(secs) || len(again) > len(b) {
				t.Fatalf("% x split and encoded again as % x: %v", b, again, err)
			}
			for i := range secs {
				if secs[i].ID != secs2[i].ID || !bytes.Equal(secs[i].Body, secs2[i].Body) {
					t.Fatalf("section %d changed: %v, %v", i, secs[i], secs2[i])
				}
			}
		}
		// The reader's every method on the same bytes ends without a panic and, once
		// failed, stays failed.
		r := NewReader(b)
		for !r.Done() {
			r.Byte()
			r.U32()
			r.S32()
			r.LEB(10)
			r.Name()
			r.Limits()
		}
		if err := r.Err(); err != nil {
			r.Byte()
			if r.Err() != err {
				t.Fatalf("error %v replaced by %v", err, r.Err())
			}
		}
	})
}

// FuzzLEB: every number round-trips through the encoders and the reader.
func FuzzLEB(f *testing.F) {
	for _, v := range []int64{0, 1, -1, 63, 64, -64, -65, 127, 128, math.MaxInt32, math.MinInt32, math.MaxUint32} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v int64) {
		u := uint32(v)
		r := NewReader(AppendU32(nil, u))
		if got := r.U32(); got != u || r.Err() != nil || !r.Done() {
			t.Fatalf("U32 round trip of %d: %d, %v", u, got, r.Err())
		}
		s := int32(v)
		r = NewReader(AppendS32(nil, s))
		if got := r.S32(); got != s || r.Err() != nil || !r.Done() {
			t.Fatalf("S32 round trip of %d: %d, %v", s, got, r.Err())
		}
	})
}

func TestFuncTypes(t *testing.T) {
	for _, c := range []struct {
		name    string
		in      []byte
		types   int
		want    []uint32
		bad     bool  // an index past the types
		readErr error // the reader's error
	}{
		{"none", []byte{0x00}, 0, nil, false, nil},
		{"three", []byte{0x03, 0x00, 0x01, 0x00}, 2, []uint32{0, 1, 0}, false, nil},
		{"index past the types", []byte{0x02, 0x00, 0x02}, 2, nil, true, nil},
		{"cut", []byte{0x03, 0x00, 0x01}, 2, []uint32{0, 1}, false, ErrUnexpectedEnd},
		{"count too long", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 2, nil, false, ErrTooLong},
	} {
		r := NewReader(c.in)
		got, err := r.FuncTypes(c.types)
		if (err != nil) != c.bad || !errors.Is(r.Err(), c.readErr) || len(got) != len(c.want) {
			t.Errorf("%s: %v, %v, reader %v", c.name, got, err, r.Err())
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		}
	}
}

func TestGrow(t *testing.T) {
	for _, c := range []struct {
		name  string
		body  []byte
		n     uint32
		items []byte
		want  []byte
		err   error
	}{
		{"empty vector", []byte{0x00}, 1, []byte{0xaa}, []byte{0x01, 0xaa}, nil},
		{"after the own items", []byte{0x02, 0x01, 0x02}, 2, []byte{0x03, 0x04}, []byte{0x04, 0x01, 0x02, 0x03, 0x04}, nil},
		{"count grows a byte", append([]byte{0x7f}, make([]byte, 3)...), 1, []byte{0x09}, []byte{0x80, 0x01, 0, 0, 0, 0x09}, nil},
		{"no count", nil, 1, []byte{0x01}, nil, ErrUnexpectedEnd},
		{"count too long", []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, 1, nil, nil, ErrTooLong},
	} {
		got, err := Grow(c.body, c.n, c.items)
		if !bytes.Equal(got, c.want) || !errors.Is(err, c.err) {
			t.Errorf("%s: % x, %v; want % x, %v", c.name, got, err, c.want, c.err)
		}
	}
}

func TestAppendOp(t *testing.T) {
	if got := AppendOpU32([]byte{0x01}, 0x23, 200); !bytes.Equal(got, []byte{0x01, 0x23, 0xc8, 0x01}) {
		t.Errorf("global.get 200 = % x", got)
	}
	if got := AppendOpS32(nil, 0x41, -1); !bytes.Equal(got, []byte{0x41, 0x7f}) {
		t.Errorf("i32.const -1 = % x", got)
	}
}

func TestAppendSized(t *testing.T) {
	if got := AppendSized([]byte{0x01}, []byte{0x00, 0x0b}); !bytes.Equal(got, []byte{0x01, 0x02, 0x00, 0x0b}) {
		t.Errorf("AppendSized = % x", got)
	}
	body := make([]byte, 200)
	got := AppendSection(nil, SecCode, body)
	if !bytes.Equal(got[:3], []byte{SecCode, 0xc8, 0x01}) || !bytes.Equal(got[3:], body) {
		t.Errorf("AppendSection of 200 bytes starts % x, %d bytes", got[:3], len(got))
	}
}
