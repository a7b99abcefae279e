//go:build !wasip1

package sdk

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"devhost/abi"
)

// quickJSON answers true only for text encoding/json accepts, and true for the ASCII text of
// modest nesting that it does.
func TestQuickJSON(t *testing.T) {
	for _, c := range []struct {
		text string
		ok   bool // what quickJSON answers
	}{
		{`{"longitude":-122.5,"latitude":37.75}`, true},
		{` {"yaw":null,"pitch":0.001,"roll":-1e-7} `, true},
		{`{"state":"alert","method":["visual","sound"],"message":"a \"b\" \\ \/ \u00e9\n"}`, true},
		{`{"count":2,"satellites":[{"id":1,"SNR":4.5E+1},{}]}`, true},
		{"[]", true}, {"{}", true}, {"[ ]", true}, {"{ }", true}, {"[[],{}]", true},
		{"0", true}, {"-0", true}, {"1.5e3", true}, {"true", true}, {"false", true}, {"null", true}, {`""`, true},
		{"\t[1,\r\n2]\n", true},
		{strings.Repeat("[", 64) + strings.Repeat("]", 64), true},
		// malformed
		{"", false}, {" ", false}, {"{", false}, {"[1,]", false}, {`{"a":1,}`, false}, {`{"a"}`, false},
		{`{"a":1 "b":2}`, false}, {`{1:2}`, false}, {"[1 2]", false}, {"01", false}, {"1.", false},
		{".5", false}, {"1e", false}, {"-", false}, {"+1", false}, {"tru", false}, {"nul", false},
		{`"a`, false}, {"\"a\x01\"", false}, {`"\x"`, false}, {`"\u12"`, false}, {`"\u12g4"`, false},
		{"[1]]", false}, {"{]", false}, {"[}", false}, {"1 2", false}, {"NaN", false},
		// well formed, but left to encoding/json
		{`"é"`, false}, {"\"\xff\"", false}, {strings.Repeat("[", 65) + strings.Repeat("]", 65), false},
	} {
		if got := quickJSON([]byte(c.text)); got != c.ok {
			t.Errorf("%q: %v, want %v", c.text, got, c.ok)
		}
		if c.ok && !json.Valid([]byte(c.text)) {
			t.Errorf("%q: accepted but not valid", c.text)
		}
	}
}

// FuzzQuickJSON holds quickJSON to encoding/json: never true where json.Valid (or UTF-8)
// says no, and for ASCII text nested no deeper than 64, the same answer.
func FuzzQuickJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,-2.5e-3,true,false,null,"x\u0041\n"]}`, `[]`, `{"a":{}}`, `0`, `"\""`, `[1,]`, "\"\xc3\xa9\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		quick, valid := quickJSON(b), json.Valid(b)
		if quick && (!valid || !utf8.Valid(b)) {
			t.Fatalf("%q accepted, json.Valid %v", b, valid)
		}
		ascii, depth, deepest := true, 0, 0
		for _, c := range b {
			switch {
			case c >= 0x80:
				ascii = false
			case c == '[' || c == '{':
				depth++
				deepest = max(deepest, depth)
			case c == ']' || c == '}':
				depth--
			}
		}
		if ascii && deepest <= 64 && quick != valid {
			t.Fatalf("%q: quick %v, json.Valid %v", b, quick, valid)
		}
	})
}

// PublishJSON and Publish of a json.RawMessage queue the text as it is and refuse what
// Publish always refused, with the same errors; PublishTo takes the quick way too.
func TestPublishJSON(t *testing.T) {
	var errs []error
	var text []byte
	h := start(t, &Plugin{OnInit: func(Info) error {
		text = []byte(`{"longitude":1.5,"latitude":-2}`)
		errs = []error{
			PublishJSON("n.p", text),
			Publish("n.q", json.RawMessage(`{"a":"é"}`)), // the long way
			PublishJSON("n.r", []byte(`[1,`)),
			PublishJSON("n.s", nil),
			PublishJSON("n..t", text),
			PublishJSON("n.u", []byte("\"\xff\"")),
			PublishJSON("n.v", []byte(`"`+strings.Repeat("x", abi.MaxValue)+`"`)),
			PublishTo("vessels.urn:mrn:imo:mmsi:230123456", "n.w", json.RawMessage(`[true]`)),
			PublishTo("vessels.urn:mrn:imo:mmsi:230123456", "n.x", json.RawMessage(`[true`)),
		}
		copy(text, "XXXXXXXX") // the queue holds its own copy
		return nil
	}}, abi.CapSKPublish)
	for i, err := range errs {
		if bad := i >= 2 && i <= 6 || i == 8; (err != nil) != bad || bad && !errors.Is(err, ErrInvalid) {
			t.Errorf("call %d: %v", i, err)
		}
	}
	// The words are those Publish gives through ToValue.
	for i, v := range []json.RawMessage{json.RawMessage(`[1,`), nil, json.RawMessage("\"\xff\"")} {
		_, want := ToValue(v)
		if got := errs[2+[]int{0, 1, 3}[i]]; want == nil || got.Error() != want.Error()+": "+ErrInvalid.Error() {
			t.Errorf("value %q: %v, want %v", v, got, want)
		}
	}
	want := []PathValue{{Path: "n.p", Value: abi.JSON([]byte(`{"longitude":1.5,"latitude":-2}`))},
		{Path: "n.q", Value: abi.JSON([]byte(`{"a":"é"}`))}}
	if !reflect.DeepEqual(h.Published, want) {
		t.Fatalf("published %+v", h.Published)
	}
	if got := h.Contexts["vessels.urn:mrn:imo:mmsi:230123456"]; len(got) != 1 || got[0].Value.Str != "[true]" {
		t.Fatalf("context values %+v", got)
	}
}

// Events are sent through a reused buffer: each arrives as it was sent.
func TestEmitReusesBuffer(t *testing.T) {
	var errs []error
	h := start(t, &Plugin{OnInit: func(Info) error {
		for _, s := range []string{`[1,2,3]`, `{"a":1}`, `"` + strings.Repeat("x", 8000) + `"`, `"` + strings.Repeat("y", 50000) + `"`, `2`} {
			errs = append(errs, EmitJSON("t", []byte(s), false))
		}
		return nil
	}}, abi.CapEvents)
	if errs[0] != nil || errs[1] != nil || errs[2] != nil || !errors.Is(errs[3], ErrInvalid) || errs[4] != nil {
		t.Fatalf("errors %v", errs)
	}
	var got []string
	for _, e := range h.SSE {
		got = append(got, string(e.Data))
	}
	if len(got) != 4 || got[0] != `[1,2,3]` || got[1] != `{"a":1}` || len(got[2]) != 8002 || got[3] != `2` {
		t.Fatalf("events %.40q", got)
	}
	if cap(rt.emit) > keepEmit {
		t.Errorf("kept a buffer of %d bytes", cap(rt.emit))
	}
}
