package skstream

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"devhost/host/skstream/skpeer"
)

func TestParseFrameKinds(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		kind  FrameKind
		check func(t *testing.T, f Frame)
	}{
		{"hello", skpeer.Hello, FrameHello, func(t *testing.T, f Frame) {
			if f.Hello.Version != "2.32.0" || f.Hello.Name != "signalk-server" || len(f.Hello.Roles) != 2 ||
				!strings.HasPrefix(f.Hello.Self, "vessels.urn:") {
				t.Fatalf("hello %+v", f.Hello)
			}
		}},
		{"delta with source label", `{"context":"vessels.self","updates":[{"source":{"label":"x"},"values":[{"path":"a","value":1},{"path":"b"}]}]}`,
			FrameDelta, func(t *testing.T, f Frame) {
				u := f.Updates[0]
				if u.Source != "x" || len(u.Values) != 2 || string(u.Values[1].Value) != "null" {
					t.Fatalf("update %+v", u)
				}
			}},
		{"put answer", `{"requestId":"r","state":"COMPLETED","statusCode":200,"message":null,"put":{"path":"a","value":1}}`,
			FramePutAnswer, func(t *testing.T, f Frame) {
				if f.RequestID != "r" || f.State != "COMPLETED" || f.StatusCode != 200 {
					t.Fatalf("answer %+v", f)
				}
			}},
		{"put request array", `{"requestId":"r","context":"vessels.self","put":[{"path":"a","value":{"x":1}}]}`,
			FramePutRequest, func(t *testing.T, f Frame) {
				if len(f.Puts) != 1 || f.Puts[0].Path != "a" || string(f.Puts[0].Value) != `{"x":1}` {
					t.Fatalf("puts %+v", f.Puts)
				}
			}},
		{"put request object", `{"requestId":"r","put":{"path":"a","value":true}}`, FramePutRequest, func(t *testing.T, f Frame) {
			if len(f.Puts) != 1 || string(f.Puts[0].Value) != "true" {
				t.Fatalf("puts %+v", f.Puts)
			}
		}},
		{"unknown", `{"something":"else"}`, FrameUnknown, nil},
		{"answer without id is unknown", `{"state":"COMPLETED"}`, FrameUnknown, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFrame([]byte(tc.in))
			if err != nil || f.Kind != tc.kind {
				t.Fatalf("kind %v err %v, want %v", f.Kind, err, tc.kind)
			}
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
	for _, bad := range []string{"", "null", "[]", "1", `"x"`, "{", `{"updates":{}}`, `{"requestId":"r","state":"X","statusCode":1.5}`,
		`{"requestId":"r","state":"X","statusCode":-1}`, `{"requestId":"r","put":[1]}`, `{"requestId":5,"put":[]}`} {
		if _, err := ParseFrame([]byte(bad)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ParseFrame(%q) err %v", bad, err)
		}
	}
}

func TestAppendDeltaIsValidJSON(t *testing.T) {
	ts := time.Date(2024, 1, 2, 3, 4, 5, 6e6, time.UTC)
	es := []entry{
		{path: "a.n", kind: kindNumber, num: 1e21},
		{path: "a.nan", kind: kindNumber, num: math.NaN()},
		{path: "a.inf", kind: kindNumber, num: math.Inf(-1)},
		{path: "a.s", kind: kindString, str: "quote\" back\\ nl\n tab\t ctl\x01 bad\xff é"},
		{path: "a.b", kind: kindBool, b: false},
		{path: "a.j", kind: kindJSON, raw: []byte(`[1,{"x":null}]`)},
	}
	b := appendDelta(nil, "", "dev.h", ts, es)
	var doc struct {
		Context string `json:"context"`
		Updates []struct {
			Timestamp string `json:"timestamp"`
			Source    struct{ Label, Src string }
			Values    []struct {
				Path  string
				Value any
			}
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	u := doc.Updates[0]
	if doc.Context != "vessels.self" || u.Timestamp != "2024-01-02T03:04:05.006Z" || u.Source.Label != "dev.h" || u.Source.Src != SourceSrc || len(u.Values) != 6 {
		t.Fatalf("doc %+v", doc)
	}
	if u.Values[0].Value != 1e21 || u.Values[1].Value != nil || u.Values[2].Value != nil ||
		u.Values[3].Value != "quote\" back\\ nl\n tab\t ctl\x01 bad\ufffd é" || u.Values[4].Value != false {
		t.Fatalf("values %+v", u.Values)
	}
	if len(b) > batchSize(es)+deltaOverhead+len("dev.h") {
		t.Fatalf("size estimate %d below the encoding %d", batchSize(es)+deltaOverhead, len(b))
	}
}

func TestCheckPath(t *testing.T) {
	good := []string{"a", "navigation.speedOverGround", "electrical.batteries.house-1.voltage", "dev.x_y:z", strings.Repeat("a", MaxPathLen)}
	bad := []string{"", ".a", "a.", "a..b", "a b", "a*", `a"b`, "a/b", strings.Repeat("a", MaxPathLen+1), "é"}
	for _, p := range good {
		if err := checkPath(p); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
	for _, p := range bad {
		if err := checkPath(p); err == nil {
			t.Errorf("%q accepted", p)
		}
	}
}

func TestRingTrimOrder(t *testing.T) {
	var r ring
	r.add(false, []byte("d1"))
	r.add(true, []byte("r1"))
	r.add(false, []byte("d2"))
	r.add(true, []byte("r2"))
	var spared []string
	if n := r.trim(2, 1<<20, 0, func(b []byte) { spared = append(spared, string(b)) }); n != 2 {
		t.Fatalf("dropped %d", n)
	}
	// Only a dropped delta's buffer is handed back for reuse; raw frames belong to callers.
	if !slices.Equal(spared, []string{"d1"}) {
		t.Fatalf("spared %q, want d1 only", spared)
	}
	// The oldest two (d1, r1) went, whatever their kind.
	if r.raw.len() != 1 || r.delta.len() != 1 || string(r.take(true).b) != "r2" || string(r.take(false).b) != "d2" {
		t.Fatal("wrong messages kept")
	}
	r.add(false, []byte("x"))
	m := r.take(false)
	r.putBack(false, m)
	if r.len() != 1 || r.bytes != 1 || r.trim(0, 0, 1, nil) != 0 {
		t.Fatal("putBack or keep broken")
	}
	for i := 0; i < 500; i++ {
		r.add(false, []byte{byte(i)})
		if i%3 == 0 {
			r.take(false)
		}
	}
	if r.len() != 1+500-167 || r.bytes != r.len() {
		t.Fatalf("len %d bytes %d", r.len(), r.bytes)
	}
}

func FuzzParseFrame(f *testing.F) {
	seeds := []string{
		skpeer.Hello,
		`{"context":"vessels.self","updates":[{"$source":"a.b","timestamp":"2024-01-01T00:00:00Z","values":[{"path":"a","value":1}],"meta":[{"path":"a","value":{"units":"m"}}]}]}`,
		`{"requestId":"r","state":"PENDING","statusCode":202,"href":"/signalk/v1/requests/r"}`,
		`{"requestId":"r","context":"vessels.self","put":[{"path":"a","value":{"x":[1,2]}}]}`,
		`{"requestId":"r","put":{"path":"a","value":null}}`,
		`{"updates":[{"values":[{"value":1}]}]}`,
		`{"updates":null,"requestId":"r","put":[]}`,
		"[", "{}", `{"statusCode":1e400}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := ParseFrame(b)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("error not wrapping ErrInvalidArgument: %v", err)
			}
			return
		}
		for _, u := range fr.Updates {
			for _, pv := range append(append([]PathValue{}, u.Values...), u.Meta...) {
				if !json.Valid(pv.Value) {
					t.Fatalf("invalid value %q", pv.Value)
				}
			}
		}
		for _, pv := range fr.Puts {
			if !json.Valid(pv.Value) {
				t.Fatalf("invalid put value %q", pv.Value)
			}
		}
		if fr.Kind == FramePutAnswer && (fr.RequestID == "" || fr.StatusCode < 0 || fr.StatusCode > 999) {
			t.Fatalf("answer %+v", fr)
		}
	})
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"b\\", "\x00\x1f\x7f", "\xff\xfe", "é中🙂", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q encoded as %s: %v", s, b, err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("round trip %q -> %q", s, back)
		}
	})
}

func TestAppendNumber(t *testing.T) {
	cases := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{1, "1"},
		{-2.5, "-2.5"},
		{1000000123, "1000000123"},
		{3.141592653589793, "3.141592653589793"},
		{0.000001, "0.000001"},
		{0.0000001, "1e-7"},
		{-1.5e-10, "-1.5e-10"},
		{1e20, "100000000000000000000"},
		{1e21, "1e+21"},
		{1.7976931348623157e308, "1.7976931348623157e+308"},
		{5e-324, "5e-324"},
	}
	for _, c := range cases {
		got := string(appendNumber([]byte("x"), c.in))
		if got != "x"+c.want {
			t.Errorf("appendNumber(%v) = %q, want %q", c.in, got[1:], c.want)
		}
		var back float64
		if err := json.Unmarshal([]byte(got[1:]), &back); err != nil || back != c.in {
			t.Errorf("%q reads back as %v (%v), want %v", got[1:], back, err, c.in)
		}
	}
}
