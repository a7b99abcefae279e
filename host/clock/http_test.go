package clock

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"devhost/host/api"
	"devhost/host/api/apitest"
)

type fakeTZ struct {
	tz     string
	err    error
	onSet  func() // runs inside SetTZ, before the value is stored
	writes []string
}

func (f *fakeTZ) TZ() string { return f.tz }

func (f *fakeTZ) SetTZ(tz string) error {
	if f.onSet != nil {
		f.onSet()
	}
	if f.err != nil {
		return f.err
	}
	f.writes = append(f.writes, tz)
	f.tz = tz
	return nil
}

func route(t *testing.T, c *Clock, method string) http.HandlerFunc {
	t.Helper()
	for _, r := range c.Routes() {
		if r.Method == method && r.Path == "/time" {
			if r.Public {
				t.Fatalf("%s /time is public", method)
			}
			return r.Handler
		}
	}
	t.Fatalf("no %s /time route", method)
	return nil
}

func do(t *testing.T, c *Clock, method, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, "/api/v1/time", strings.NewReader(body))
	rec := httptest.NewRecorder()
	route(t, c, method)(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}
	if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("cache control %q", cc)
	}
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	return rec.Code, m
}

func TestGetTimeDocument(t *testing.T) {
	tz := &fakeTZ{tz: "CET-1CEST,M3.5.0,M10.5.0/3"}
	c, fc := newTest(t, Options{TZ: tz, SNTP: func() SNTPConfig {
		return SNTPConfig{Enabled: true, Running: true, FromDHCP: true, Servers: []string{"pool.ntp.org"}}
	}})
	code, m := do(t, c, http.MethodGet, "")
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	want := `{"iso":"","now":0,"sntp":{"enabled":true,"from_dhcp":true,"running":true,"servers":["pool.ntp.org"]},"source":"none","synced":false,"tz":"CET-1CEST,M3.5.0,M10.5.0/3"}`
	if got := mustJSON(t, m); got != want {
		t.Fatalf("unset document\n got %s\nwant %s", got, want)
	}

	if err := c.Set(SourceSNTP, t0.Add(123*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	fc.Advance(1500 * time.Millisecond)
	_, m = do(t, c, http.MethodGet, "")
	want = `{"iso":"2025-06-01T12:00:01.623Z","now":1748779201623,"sntp":{"enabled":true,"from_dhcp":true,"running":true,"servers":["pool.ntp.org"]},"source":"sntp","synced":true,"tz":"CET-1CEST,M3.5.0,M10.5.0/3"}`
	if got := mustJSON(t, m); got != want {
		t.Fatalf("set document\n got %s\nwant %s", got, want)
	}
}

func TestGetTimeDefaults(t *testing.T) {
	c, _ := newTest(t, Options{})
	_, m := do(t, c, http.MethodGet, "")
	want := `{"iso":"","now":0,"sntp":{"enabled":false,"from_dhcp":false,"running":false,"servers":[]},"source":"none","synced":false,"tz":"UTC0"}`
	if got := mustJSON(t, m); got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPutTimeSetsManualAndTZ(t *testing.T) {
	tz := &fakeTZ{tz: "UTC0"}
	c, fc := newTest(t, Options{TZ: tz})
	code, m := do(t, c, http.MethodPut, `{"now": 1748779200000}`)
	if code != 200 || m["source"] != "manual" || m["now"] != float64(1748779200000) || m["synced"] != true {
		t.Fatalf("%d %v", code, m)
	}
	if len(tz.writes) != 0 {
		t.Fatalf("tz written without tz: %v", tz.writes)
	}
	fc.Advance(time.Second)
	code, m = do(t, c, http.MethodPut, `{"tz":"EST5EDT,M3.2.0,M11.1.0"}`)
	if code != 200 || m["tz"] != "EST5EDT,M3.2.0,M11.1.0" || m["now"] != float64(1748779201000) {
		t.Fatalf("tz alone: %d %v", code, m)
	}
	code, m = do(t, c, http.MethodPut, "{\"now\":1748779300000,\"tz\":\"<+0530>-5:30\"}\n")
	if code != 200 || m["tz"] != "<+0530>-5:30" || m["now"] != float64(1748779300000) || m["source"] != "manual" {
		t.Fatalf("both: %d %v", code, m)
	}
	// manual refreshes manual and overrides sk and rtc.
	c2, _ := holdBy(t, SourceSK)
	if code, m := do(t, c2, http.MethodPut, `{"now":1748779300000}`); code != 200 || m["source"] != "manual" {
		t.Fatalf("over sk: %d %v", code, m)
	}
}

func TestPutTimeOutranked(t *testing.T) {
	tz := &fakeTZ{tz: "UTC0"}
	c, _ := newTest(t, Options{TZ: tz})
	if err := c.Set(SourceSNTP, t0); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"now":1748779300000}`, `{"now":1748779300000,"tz":"CET-1"}`} {
		code, m := do(t, c, http.MethodPut, body)
		if code != http.StatusConflict || m["error"] != "outranked" {
			t.Fatalf("%s: %d %v", body, code, m)
		}
	}
	if len(tz.writes) != 0 || tz.tz != "UTC0" {
		t.Fatalf("tz changed by a refused PUT: %v", tz.writes)
	}
	if now, src, _ := c.Now(); src != SourceSNTP || !now.Equal(t0) {
		t.Fatalf("clock changed: %v %s", now, src)
	}
	// tz alone is not a clock set and is never outranked.
	if code, m := do(t, c, http.MethodPut, `{"tz":"CET-1"}`); code != 200 || m["tz"] != "CET-1" || m["source"] != "sntp" {
		t.Fatalf("tz alone: %d %v", code, m)
	}
}

// SNTP wins between the rank check and the clock set: the tz written meanwhile is put back.
func TestPutTimeOutrankedMidwayRestoresTZ(t *testing.T) {
	tz := &fakeTZ{tz: "UTC0"}
	c, _ := newTest(t, Options{TZ: tz})
	tz.onSet = func() {
		tz.onSet = nil
		if err := c.Set(SourceSNTP, t0); err != nil {
			t.Error(err)
		}
	}
	code, m := do(t, c, http.MethodPut, `{"now":1748779300000,"tz":"CET-1"}`)
	if code != http.StatusConflict || m["error"] != "outranked" {
		t.Fatalf("%d %v", code, m)
	}
	if tz.tz != "UTC0" {
		t.Fatalf("tz %q after the refused PUT, want UTC0 restored", tz.tz)
	}
}

func TestPutTimeStoreFailure(t *testing.T) {
	tz := &fakeTZ{tz: "UTC0", err: errors.New("disk gone")}
	c, _ := newTest(t, Options{TZ: tz})
	code, m := do(t, c, http.MethodPut, `{"now":1748779300000,"tz":"CET-1"}`)
	if code != 500 || m["error"] != "write_failed" {
		t.Fatalf("%d %v", code, m)
	}
	if _, src, _ := c.Now(); src != SourceNone {
		t.Fatal("clock set although the request failed")
	}
	tz.err = api.Validation("time.tz", "refused by the store")
	code, m = do(t, c, http.MethodPut, `{"tz":"CET-1"}`)
	if code != 400 || m["error"] != "validation" || m["path"] != "time.tz" {
		t.Fatalf("store validation: %d %v", code, m)
	}
}

// TestPutTimeEmptyObjectIsANoOp: `{}` names neither member, so nothing changes and the
// answer is the time document.
func TestPutTimeEmptyObjectIsANoOp(t *testing.T) {
	tz := &fakeTZ{tz: "UTC0"}
	c, _ := newTest(t, Options{TZ: tz})
	code, m := do(t, c, http.MethodPut, ` { } `)
	if code != 200 || m["source"] != "none" || m["tz"] != "UTC0" || m["synced"] != false {
		t.Fatalf("%d %v, want 200 and the unchanged time document", code, m)
	}
	if _, src, _ := c.Now(); src != SourceNone || len(tz.writes) != 0 {
		t.Fatalf("{} changed something: %s %v", src, tz.writes)
	}
}

func TestPutTimeBadBodies(t *testing.T) {
	cases := []struct {
		name, body, path string
	}{
		{"empty body", ``, ""},
		{"null", `null`, ""},
		{"array", `[1]`, ""},
		{"number", `1748779300000`, ""},
		{"malformed", `{"now":`, ""},
		{"trailing data", `{"now":1748779300000} x`, ""},
		{"second document", `{"now":1748779300000}{}`, ""},
		{"unknown member", `{"now":1748779300000,"tzz":"x"}`, "tzz"},
		{"unknown only", `{"source":"sntp"}`, "source"},
		{"duplicate now", `{"now":1748779300000,"now":1748779300001}`, "now"},
		{"float", `{"now":1748779300000.5}`, "now"},
		{"float integral", `{"now":1748779300000.0}`, "now"},
		{"exponent", `{"now":1.7487793e12}`, "now"},
		{"string", `{"now":"1748779300000"}`, "now"},
		{"zero", `{"now":0}`, "now"},
		{"negative", `{"now":-1748779300000}`, "now"},
		{"bool", `{"now":true}`, "now"},
		{"null now", `{"now":null}`, "now"},
		{"object now", `{"now":{}}`, "now"},
		{"1970", `{"now":1000}`, "now"},
		{"before floor", `{"now":1577836799999}`, "now"},
		{"at ceiling", `{"now":4102444800000}`, "now"},
		{"int64 overflow", `{"now":92233720368547758070}`, "now"},
		{"tz number", `{"tz":5}`, "tz"},
		{"tz null", `{"tz":null}`, "tz"},
		{"tz empty", `{"tz":""}`, "tz"},
		{"tz too long", `{"tz":"` + strings.Repeat("A", 65) + `"}`, "tz"},
		{"tz space", `{"tz":"CET -1"}`, "tz"},
		{"tz control", `{"tz":"CET\n-1"}`, "tz"},
		{"tz non-ascii", `{"tz":"CÉT-1"}`, "tz"},
		{"tz invalid UTF-8", "{\"tz\":\"CET\xff-1\"}", ""},
		{"tz lone surrogate", `{"tz":"CET\ud800"}`, ""},
		{"good now bad tz", `{"now":1748779300000,"tz":7}`, "tz"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tz := &fakeTZ{tz: "UTC0"}
			c, _ := newTest(t, Options{TZ: tz})
			code, m := do(t, c, http.MethodPut, tc.body)
			if code != 400 || m["error"] != "validation" {
				t.Fatalf("%d %v, want 400 validation", code, m)
			}
			if m["path"] != tc.path {
				t.Fatalf("path %v, want %q", m["path"], tc.path)
			}
			if _, src, _ := c.Now(); src != SourceNone || len(tz.writes) != 0 {
				t.Fatalf("a refused body changed something: %s %v", src, tz.writes)
			}
		})
	}
	// The edges that are accepted.
	for _, body := range []string{
		`{"now":1577836800000}`, `{"now":4102444799999}`, `{"tz":"` + strings.Repeat("A", 64) + `"}`,
		` { "now" : 1748779300000 } `,
	} {
		c, _ := newTest(t, Options{})
		if code, m := do(t, c, http.MethodPut, body); code != 200 {
			t.Errorf("%s: %d %v", body, code, m)
		}
	}
}

func FuzzParsePut(f *testing.F) {
	seeds := []string{
		`{"now":1748779300000}`, `{"tz":"UTC0"}`, `{"now":1748779300000,"tz":"CET-1CEST"}`,
		`{}`, `{"now":1.5}`, `{"now":-0}`, `{"a":1,"a":2}`, `{"now":"x"}`, `[]`, `null`, `{"tz":"\u0000"}`,
	}
	apitest.FuzzParser(f, seeds, parsePut, func(t *testing.T, b []byte, req putRequest) {
		if req.now == nil && req.tz == nil {
			var m map[string]any
			if api.Unmarshal(b, &m) != nil || len(m) != 0 {
				t.Fatalf("accepted %q, which sets nothing and is not {}", b)
			}
		}
		if req.now != nil && checkRange(*req.now) != nil {
			t.Fatalf("accepted now %v", *req.now)
		}
		if req.tz != nil && (len(*req.tz) == 0 || len(*req.tz) > MaxTZLen) {
			t.Fatalf("accepted tz %q", *req.tz)
		}
	})
}

func FuzzDecodeRTC(f *testing.F) {
	good, _ := RTCValue{Wall: t0, Source: SourceSNTP, SyncedAt: t0, SleptFor: time.Minute}.MarshalBinary()
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte("DCLK\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeRTC(b)
		if err != nil {
			if v != nil || !errors.Is(err, ErrBadRTC) {
				t.Fatalf("DecodeRTC = %v, %v", v, err)
			}
			return
		}
		again, err := v.MarshalBinary()
		if err != nil || string(again) != string(b) {
			t.Fatalf("re-encode %x, %v; input %x", again, err, b)
		}
	})
}
