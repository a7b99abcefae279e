package health

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"devhost/host/api/apitest"
)

func TestParseDrill(t *testing.T) {
	key23 := "test." + strings.Repeat("k", 18)
	key24 := key23 + "k"
	msg95 := strings.Repeat("m", 95)
	msg96 := msg95 + "m"
	ok := func(key string, st State, msg string, ttl time.Duration) *Drill {
		return &Drill{Key: key, State: st, Message: msg, TTL: ttl}
	}
	cases := []struct {
		body string
		want *Drill // nil: refused
		path string // path of the validation error
	}{
		// accepted
		{`{"key":"test.a","state":"warn"}`, ok("test.a", Warn, DrillDefaultMessage, 45*time.Second), ""},
		{`{"key":"test.a","state":"alarm","message":"hi","ttl_s":1}`, ok("test.a", Alarm, "hi", time.Second), ""},
		{`{"key":"test.a","state":"alarm","ttl_s":300}`, ok("test.a", Alarm, DrillDefaultMessage, 300*time.Second), ""},
		{`{"key":"test.a","state":"alarm","ttl_s":1.5}`, ok("test.a", Alarm, DrillDefaultMessage, 1500*time.Millisecond), ""},
		{`{"key":"test.a","state":"alarm","ttl_s":2.5e1}`, ok("test.a", Alarm, DrillDefaultMessage, 25*time.Second), ""},
		{`{"key":"test.a","state":"normal"}`, ok("test.a", Normal, "", 45*time.Second), ""},
		{`{"key":"test.a","state":"warn","message":""}`, ok("test.a", Warn, "", 45*time.Second), ""},
		{`{"key":"test.a","state":"warn","message":null,"ttl_s":null}`, ok("test.a", Warn, DrillDefaultMessage, 45*time.Second), ""},
		{`{"key":"` + key23 + `","state":"warn"}`, ok(key23, Warn, DrillDefaultMessage, 45*time.Second), ""},
		{`{"key":"test.a","state":"warn","message":"` + msg95 + `"}`, ok("test.a", Warn, msg95, 45*time.Second), ""},
		{` {"state":"warn","key":"test.ü"} ` + "\n", ok("test.ü", Warn, DrillDefaultMessage, 45*time.Second), ""},
		// refused: document
		{``, nil, ""},
		{`null`, nil, ""},
		{`[]`, nil, ""},
		{`"x"`, nil, ""},
		{`{"key":"test.a","state":"warn"}x`, nil, ""},
		{`{"key":"test.a","state":"warn"`, nil, ""},
		// refused: members
		{`{"key":"test.a","state":"warn","extra":1}`, nil, "extra"},
		{`{"key":"test.a","key":"test.b","state":"warn"}`, nil, "key"},
		{`{"state":"warn"}`, nil, "key"},
		{`{"key":null,"state":"warn"}`, nil, "key"},
		{`{"key":5,"state":"warn"}`, nil, "key"},
		{`{"key":"a.b","state":"warn"}`, nil, "key"},
		{`{"key":"test.","state":"warn"}`, nil, "key"},
		{`{"key":"Test.a","state":"warn"}`, nil, "key"},
		{`{"key":"` + key24 + `","state":"warn"}`, nil, "key"},
		{`{"key":"test.a b","state":"warn"}`, nil, "key"},
		{`{"key":"test.a\u0000","state":"warn"}`, nil, "key"},
		{`{"key":"test.a"}`, nil, "state"},
		{`{"key":"test.a","state":null}`, nil, "state"},
		{`{"key":"test.a","state":"fatal"}`, nil, "state"},
		{`{"key":"test.a","state":"WARN"}`, nil, "state"},
		{`{"key":"test.a","state":1}`, nil, "state"},
		{`{"key":"test.a","state":"warn","message":5}`, nil, "message"},
		{`{"key":"test.a","state":"warn","message":true}`, nil, "message"},
		{`{"key":"test.a","state":"warn","message":"` + msg96 + `"}`, nil, "message"},
		{`{"key":"test.a","state":"warn","ttl_s":0}`, nil, "ttl_s"},
		{`{"key":"test.a","state":"warn","ttl_s":0.5}`, nil, "ttl_s"},
		{`{"key":"test.a","state":"warn","ttl_s":0.999}`, nil, "ttl_s"},
		{`{"key":"test.a","state":"warn","ttl_s":301}`, nil, "ttl_s"},
		{`{"key":"test.a","state":"warn","ttl_s":300.001}`, nil, "ttl_s"},
		{`{"key":"test.a","state":"warn","ttl_s":-5}`, nil, "ttl_s"},
		{`{"key":"test.a","state":"warn","ttl_s":1e999}`, nil, "ttl_s"},
		{`{"key":"test.a","state":"warn","ttl_s":"10"}`, nil, "ttl_s"},
		{`{"key":"test.a","state":"warn","ttl_s":true}`, nil, "ttl_s"},
		{`{"key":"test.a","state":"warn","ttl_s":[10]}`, nil, "ttl_s"},
		{`{"key":"test.a","state":"warn","ttl_s":{}}`, nil, "ttl_s"},
	}
	for _, c := range cases {
		d, err := ParseDrill([]byte(c.body))
		if c.want != nil {
			if err != nil || d != *c.want {
				t.Errorf("%s: got %+v, %v; want %+v", c.body, d, err, *c.want)
			}
			continue
		}
		if !apitest.IsValidation(err) {
			t.Errorf("%s: err %v, want 400 validation", c.body, err)
			continue
		}
		if ae := apitest.Err(t, err); ae.Path == nil || *ae.Path != c.path {
			t.Errorf("%s: path %v, want %q", c.body, ae.Path, c.path)
		}
	}
}

func drillOf(key string, st State, ttl time.Duration) Drill {
	return Drill{Key: key, State: st, Message: "m", TTL: ttl}
}

func TestDrillLifecycle(t *testing.T) {
	r, fc := newTestRegistry(t, Options{Policy: true})
	var s recorder[Condition]
	_ = r.AddSink(s.add)

	if err := r.ApplyDrill(drillOf("test.a", Alarm, 15*time.Second)); err != nil {
		t.Fatal(err)
	}
	if c := mustCond(t, r, "test.a"); c.State != Alarm || c.RebootOnAlarm || s.n() != 1 {
		t.Fatalf("drill %+v, %d sink calls", c, s.n())
	}
	if d := r.Snapshot(); d.Fatal != nil || d.Worst != Alarm {
		t.Fatalf("drill made fatal %v", d.Fatal)
	}
	// A second drill clears the first.
	_ = r.ApplyDrill(drillOf("test.b", Warn, 15*time.Second))
	if a, b := mustCond(t, r, "test.a"), mustCond(t, r, "test.b"); a.State != Normal || b.State != Warn {
		t.Fatalf("a %+v b %+v", a, b)
	}
	if s.n() != 3 {
		t.Fatalf("sink calls %d, want 3", s.n())
	}
	// Re-posting the active key replaces it directly.
	_ = r.ApplyDrill(drillOf("test.b", Alarm, 15*time.Second))
	if s.n() != 4 || s.last().State != Alarm {
		t.Fatalf("replace: %d calls, last %+v", s.n(), s.last())
	}
	// Expiry by tick: not before the ttl, at the first tick after it.
	step(r, fc) // t=10 < 15
	if mustCond(t, r, "test.b").State != Alarm {
		t.Fatal("expired early")
	}
	step(r, fc) // t=20 >= 15
	if c := mustCond(t, r, "test.b"); c.State != Normal || c.Message != "" {
		t.Fatalf("not expired by the tick: %+v", c)
	}
	if r.strikes != 0 {
		t.Fatalf("drill struck %d", r.strikes)
	}

	// A normal drill for a key without a slot claims none.
	_ = r.ApplyDrill(drillOf("test.never", Normal, time.Second))
	if len(r.Conditions()) != 2 {
		t.Fatalf("conditions %+v", r.Conditions())
	}
	// A normal drill clears the active one even under another key.
	_ = r.ApplyDrill(drillOf("test.a", Warn, 100*time.Second))
	_ = r.ApplyDrill(Drill{Key: "test.b", State: Normal, TTL: time.Second})
	if mustCond(t, r, "test.a").State != Normal || r.drill != nil {
		t.Fatalf("normal drill left %+v", r.Conditions())
	}
}

func TestDrillFull(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	for i := range MaxConditions - 1 {
		_ = r.Report(fmt.Sprintf("c%d", i), Normal, "")
	}
	if err := r.ApplyDrill(drillOf("test.a", Warn, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := r.ApplyDrill(drillOf("test.b", Warn, time.Minute)); !errors.Is(err, ErrFull) {
		t.Fatalf("second key in a full table: %v", err)
	}
	// Refused: the first drill is untouched.
	if c := mustCond(t, r, "test.a"); c.State != Warn || r.drill == nil || r.drill.key != "test.a" {
		t.Fatalf("507 changed the active drill: %+v", c)
	}
	// The drill's own key still works.
	if err := r.ApplyDrill(drillOf("test.a", Alarm, time.Minute)); err != nil {
		t.Fatal(err)
	}
}

func serve(r *Registry, method, path, body string) *httptest.ResponseRecorder {
	var h http.HandlerFunc
	for _, rt := range r.Routes() {
		if rt.Method == method && rt.Path == path {
			h = rt.Handler
		}
	}
	w := httptest.NewRecorder()
	req := httptest.NewRequest(method, "/api/v1"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h(w, req)
	return w
}

func decodeDoc(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q: %v", w.Body.String(), err)
	}
	return m
}

func TestRoutes(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	rts := r.Routes()
	if len(rts) != 2 {
		t.Fatalf("routes %+v", rts)
	}
	for _, rt := range rts {
		if rt.Public || rt.Handler == nil {
			t.Fatalf("route %s %s must be protected with a handler", rt.Method, rt.Path)
		}
	}
}

func TestHTTP(t *testing.T) {
	r, fc := newTestRegistry(t, Options{Policy: true})
	_ = r.ReportFatal("skLinkStalled", Alarm, "stalled")

	w := serve(r, http.MethodGet, "/health", "")
	if w.Code != 200 || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("GET %d %v", w.Code, w.Header())
	}
	m := decodeDoc(t, w)
	if m["worst"] != "alarm" || m["fatal"] != "skLinkStalled" {
		t.Fatalf("doc %v", m)
	}
	if _, ok := m["truncated"]; ok {
		t.Fatalf("truncated present: %v", m)
	}
	c := m["conditions"].([]any)[0].(map[string]any)
	if c["key"] != "skLinkStalled" || c["state"] != "alarm" || c["message"] != "stalled" || c["reboot_on_alarm"] != true {
		t.Fatalf("condition %v", c)
	}

	// POST answers the same document, now with the drill.
	w = serve(r, http.MethodPost, "/health/test", `{"key":"test.x","state":"warn","message":"drill","ttl_s":5}`)
	if w.Code != 200 {
		t.Fatalf("POST %d %s", w.Code, w.Body)
	}
	m = decodeDoc(t, w)
	conds := m["conditions"].([]any)
	if len(conds) != 2 || conds[1].(map[string]any)["key"] != "test.x" || conds[1].(map[string]any)["reboot_on_alarm"] != false {
		t.Fatalf("POST doc %v", m)
	}
	// GET expires a due drill without waiting for the tick.
	fc.Advance(4 * time.Second)
	m = decodeDoc(t, serve(r, http.MethodGet, "/health", ""))
	if m["conditions"].([]any)[1].(map[string]any)["state"] != "warn" {
		t.Fatal("drill expired early")
	}
	fc.Advance(time.Second)
	m = decodeDoc(t, serve(r, http.MethodGet, "/health", ""))
	if m["conditions"].([]any)[1].(map[string]any)["state"] != "normal" {
		t.Fatalf("GET did not expire the drill: %v", m)
	}

	// Validation.
	w = serve(r, http.MethodPost, "/health/test", `{"key":"test.x","state":"warn","ttl_s":"10"}`)
	if w.Code != 400 || decodeDoc(t, w)["error"] != "validation" {
		t.Fatalf("bad ttl: %d %s", w.Code, w.Body)
	}

	// 507 when the table is full.
	for i := len(r.Conditions()); i < MaxConditions; i++ {
		_ = r.Report(fmt.Sprintf("c%d", i), Normal, "")
	}
	w = serve(r, http.MethodPost, "/health/test", `{"key":"test.y","state":"alarm"}`)
	if w.Code != http.StatusInsufficientStorage || decodeDoc(t, w)["error"] != "insufficient_storage" {
		t.Fatalf("full: %d %s", w.Code, w.Body)
	}
	// Clearing needs no slot.
	if w = serve(r, http.MethodPost, "/health/test", `{"key":"test.y","state":"normal"}`); w.Code != 200 {
		t.Fatalf("normal drill on a full table: %d %s", w.Code, w.Body)
	}
}

// The drill fans out to every sink, including its expiry.
func TestDrillFansOut(t *testing.T) {
	r, fc := newTestRegistry(t, Options{})
	var sinks [MaxSinks]recorder[Condition]
	for i := range sinks {
		_ = r.AddSink(sinks[i].add)
	}
	serve(r, http.MethodPost, "/health/test", `{"key":"test.x","state":"alarm","ttl_s":1}`)
	fc.Advance(time.Second)
	serve(r, http.MethodGet, "/health", "")
	for i := range sinks {
		if sinks[i].n() != 2 || sinks[i].got[0].State != Alarm || sinks[i].got[1].State != Normal {
			t.Fatalf("sink %d: %+v", i, sinks[i].got)
		}
	}
}

func FuzzParseDrill(f *testing.F) {
	seeds := []string{
		`{"key":"test.a","state":"warn"}`,
		`{"key":"test.a","state":"alarm","message":"m","ttl_s":1.5}`,
		`{"key":"test.a","state":"normal","ttl_s":300}`,
		`{"key":"test.a","state":"warn","ttl_s":"10"}`,
		`{"key":"test.a","key":"test.b","state":"warn"}`,
		`{"key":"test.aaaaaaaaaaaaaaaaaaaaaaaaaaaaa","state":"warn"}`,
		`{"key":"test.a","state":"warn","ttl_s":1e999}`,
		`null`, `[]`, ``, `{"key":"test.a","state":"warn"} x`,
	}
	apitest.FuzzParser(f, seeds, ParseDrill, func(t *testing.T, b []byte, d Drill) {
		if !strings.HasPrefix(d.Key, DrillPrefix) || len(d.Key) <= len(DrillPrefix) || len(d.Key) >= DrillKeyLimit || CheckKey(d.Key) != nil {
			t.Fatalf("accepted key %q", d.Key)
		}
		if !d.State.valid() || len(d.Message) >= DrillMessageLimit {
			t.Fatalf("accepted %+v", d)
		}
		if d.TTL < time.Second || d.TTL > 300*time.Second {
			t.Fatalf("accepted ttl %s", d.TTL)
		}
		// An accepted drill applies without error to an empty table.
		r := New(Options{})
		if err := r.ApplyDrill(d); err != nil {
			t.Fatalf("apply %+v: %v", d, err)
		}
	})
}
