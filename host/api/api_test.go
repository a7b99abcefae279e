package api

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestUnmarshalStrict(t *testing.T) {
	type login struct {
		Key string `json:"key"`
	}
	cases := []struct {
		name, in string
		into     func() any
		path     string // "" with ok false means any path
		ok       bool
	}{
		{"plain object", `{"a":1,"b":{"c":[1,2]}}`, mapInto, "", true},
		{"same name in sibling objects", `{"a":{"x":1},"b":{"x":2}}`, mapInto, "", true},
		{"same name in array elements", `[{"x":1},{"x":2}]`, anyInto, "", true},
		{"valid surrogate pair", `{"a":"\ud83d\ude00"}`, mapInto, "", true},
		{"escaped U+FFFD is a real character", `{"a":"\ufffd"}`, mapInto, "", true},
		{"escaped backslash before u", `{"a":"\\ud800"}`, mapInto, "", true},
		{"number beyond float64", `{"a":1e400}`, func() any { var v any; return &v }, "", true},
		{"non-ASCII UTF-8", `{"a":"été"}`, mapInto, "", true},
		{"duplicate top-level member", `{"level":"info","level":"none"}`, mapInto, "level", false},
		{"duplicate nested member", `{"wifi":{"ssid0":"a","ssid0":"b"}}`, mapInto, "wifi.ssid0", false},
		{"duplicate inside an array", `{"a":[{"x":1,"x":2}]}`, mapInto, "a.x", false},
		{"duplicate into a struct", `{"key":"a","key":"b"}`, func() any { return &login{} }, "key", false},
		{"unknown member of a struct", `{"key":"a","other":1}`, func() any { return &login{} }, "other", false},
		{"invalid UTF-8 in a value", "{\"a\":\"\xff\xfe\"}", mapInto, "", false},
		{"invalid UTF-8 in a name", "{\"\xc3\":1}", mapInto, "", false},
		{"lone high surrogate", `{"a":"\ud800"}`, mapInto, "", false},
		{"lone low surrogate", `{"a":"x\udc00"}`, mapInto, "", false},
		{"high surrogate then a letter", `{"a":"\ud800\u0041"}`, mapInto, "", false},
		{"trailing data", `{"a":1} x`, mapInto, "", false},
		{"malformed", `{"a":`, mapInto, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Unmarshal([]byte(c.in), c.into())
			if c.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Status != 400 || e.Code != CodeValidation {
				t.Fatalf("got %v, want 400 validation", err)
			}
			if c.path != "" && (e.Path == nil || *e.Path != c.path) {
				t.Fatalf("path %v, want %q (%v)", e.Path, c.path, err)
			}
		})
	}
}

// A value of the wrong type is said in JSON's words with the member's path, never with Go's
// type names (an operator reads these messages).
func TestUnmarshalWrongType(t *testing.T) {
	type inner struct {
		Pins []int `json:"pins"`
		On   bool  `json:"on"`
	}
	type doc struct {
		URL   *string `json:"url"`
		Count uint    `json:"count"`
		TTL   float64 `json:"ttl"`
		Inner inner   `json:"inner"`
	}
	cases := []struct{ in, path, msg string }{
		{`{"url":5}`, "url", "must be a string, not a number"},
		{`{"url":true}`, "url", "must be a string, not a boolean"},
		{`{"url":{}}`, "url", "must be a string, not an object"},
		{`{"count":-5}`, "count", "must be an integer, not -5"},
		{`{"count":1.5}`, "count", "must be an integer, not 1.5"},
		{`{"ttl":"5"}`, "ttl", "must be a number, not a string"},
		{`{"inner":[]}`, "inner", "must be an object, not an array"},
		{`{"inner":{"pins":[1,"x"]}}`, "inner.pins", "must be an integer, not a string"},
		{`{"inner":{"on":"yes"}}`, "inner.on", "must be a boolean, not a string"},
		{`[]`, "", "must be an object, not an array"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			var e *Error
			if err := Unmarshal([]byte(c.in), &doc{}); !errors.As(err, &e) || e.Status != 400 || e.Code != CodeValidation {
				t.Fatalf("got %v, want 400 validation", err)
			}
			if e.Path == nil || *e.Path != c.path || e.Message != c.msg {
				t.Fatalf("path %v message %q, want %q %q", e.Path, e.Message, c.path, c.msg)
			}
		})
	}
}

func mapInto() any { return &map[string]any{} }
func anyInto() any { var v any; return &v }

// ReadParsed hands the whole body to the parser, and a body over the server's cap is 413
// without the parser being called.
func TestReadParsed(t *testing.T) {
	parse := func(b []byte) (int, error) { return len(b), nil }
	r := httptest.NewRequest(http.MethodPut, "/", strings.NewReader("abcd"))
	if n, err := ReadParsed(r, parse); n != 4 || err != nil {
		t.Fatalf("ReadParsed = %d, %v; want 4, nil", n, err)
	}
	r = httptest.NewRequest(http.MethodPut, "/", strings.NewReader("abcd"))
	r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, 2)
	called := false
	_, err := ReadParsed(r, func(b []byte) (int, error) { called = true; return 0, nil })
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusRequestEntityTooLarge || called {
		t.Fatalf("over the cap: %v (parser called %v), want 413 without the parser", err, called)
	}
}

// Document answers the document as JSON with 200.
func TestDocument(t *testing.T) {
	w := httptest.NewRecorder()
	Document(func() map[string]int { return map[string]int{"a": 1} })(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" || strings.TrimSpace(w.Body.String()) != `{"a":1}` {
		t.Fatalf("%d %q %q", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
}
