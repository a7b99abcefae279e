package logs

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"devhost/host/api"
	"devhost/host/api/apitest"
	"devhost/host/testio"
)

func serve(t *testing.T, r *Ring) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	for _, rt := range r.Routes() {
		mux.HandleFunc(rt.Method+" "+rt.Path, rt.Handler)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestRoutes(t *testing.T) {
	r := New(Options{})
	got := map[string]bool{}
	for _, rt := range r.Routes() {
		if rt.Public {
			t.Errorf("%s %s is public", rt.Method, rt.Path)
		}
		got[rt.Method+" "+rt.Path] = rt.Stream
	}
	if stream, ok := got["GET /logs"]; !ok || !stream {
		t.Errorf("GET /logs missing or not a stream route: %v", got)
	}
	if stream, ok := got["PUT /logs/level"]; !ok || stream {
		t.Errorf("PUT /logs/level missing or a stream route: %v", got)
	}
}

func getPage(t *testing.T, srv *httptest.Server, query string) (*http.Response, Page) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + "/logs" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var p Page
	if resp.StatusCode == http.StatusOK {
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("page %q: %v", b, err)
		}
		var raw map[string]any
		_ = json.Unmarshal(b, &raw)
		for _, k := range []string{"first", "next", "dropped", "size", "used", "gap", "from", "lines"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("page lacks %q", k)
			}
		}
	} else {
		code := apitest.ErrorCode(b)
		if code == "" {
			t.Fatalf("error body %q", b)
		}
		resp.Header.Set("X-Test-Error", code)
	}
	return resp, p
}

func TestGetLogsPageIsChunked(t *testing.T) {
	r, _, _ := newRing(Options{})
	r.SetWallClock(func() (time.Time, bool) { return t0, true })
	for i := range 300 {
		r.Logger("t").Info("line", "i", i, "html", "<&>", "uni", "⚓")
	}
	srv := serve(t, r)
	resp, p := getPage(t, srv, "?limit=1000")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("transfer encoding %v, want chunked", resp.TransferEncoding)
	}
	if resp.ContentLength != -1 {
		t.Errorf("content length %d set", resp.ContentLength)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	want := r.Read(-1, 1000)
	if fmt.Sprint(p) != fmt.Sprint(want) {
		t.Errorf("page differs from the ring:\n got %+v\nwant %+v", p, want)
	}
	if p.Dropped == 0 || len(p.Lines) == 0 || p.From != p.First || p.Next != p.From+int64(len(p.Lines)) {
		t.Errorf("unexpected page shape %+v", p)
	}
	if !strings.Contains(p.Lines[0], " 2026-11-21T23:50:00.000Z) t: line") || !strings.Contains(p.Lines[0], "html=<&> uni=⚓") {
		t.Errorf("line %q", p.Lines[0])
	}
}

func TestGetLogsSmallPageStillChunked(t *testing.T) {
	r, _, _ := newRing(Options{})
	srv := serve(t, r)
	resp, p := getPage(t, srv, "")
	if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Errorf("transfer encoding %v, want chunked", resp.TransferEncoding)
	}
	if p.Lines == nil || len(p.Lines) != 0 || p.Next != FirstSeq {
		t.Errorf("empty page %+v", p)
	}
}

func TestGetLogsQuery(t *testing.T) {
	r, _, _ := newRing(Options{Size: 130, LineMax: 40})
	fill(r, 0, 15)
	srv := serve(t, r)
	tests := []struct {
		query     string
		status    int
		from, nxt int64
		n         int
		gap       bool
	}{
		{"", 200, 6, 16, 10, false},
		{"?after=0", 200, 6, 16, 10, true},
		{"?after=9&limit=2", 200, 10, 12, 2, false},
		{"?limit=1000", 200, 6, 16, 10, false},
		{"?limit=1", 200, 6, 7, 1, false},
		{"?after=15", 200, 16, 16, 0, false},
		{"?after=9223372036854775807", 200, 16, 16, 0, false},
		{"?after=7&unrelated=1", 200, 8, 16, 8, false},
		{"?after=-1", 400, 0, 0, 0, false},
		{"?after=abc", 400, 0, 0, 0, false},
		{"?after=", 400, 0, 0, 0, false},
		{"?after=1.5", 400, 0, 0, 0, false},
		{"?after=9223372036854775808", 400, 0, 0, 0, false},
		{"?after=1&after=2", 400, 0, 0, 0, false},
		{"?limit=0", 400, 0, 0, 0, false},
		{"?limit=-5", 400, 0, 0, 0, false},
		{"?limit=1001", 400, 0, 0, 0, false},
		{"?limit=ten", 400, 0, 0, 0, false},
		{"?limit=1&limit=2", 400, 0, 0, 0, false},
		{"?after=%zz", 400, 0, 0, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			resp, p := getPage(t, srv, tc.query)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status != 200 {
				if e := resp.Header.Get("X-Test-Error"); e != "validation" {
					t.Errorf("error %q, want validation", e)
				}
				return
			}
			if p.From != tc.from || p.Next != tc.nxt || len(p.Lines) != tc.n || p.Gap != tc.gap {
				t.Errorf("got from %d next %d n %d gap %v; want %d %d %d %v", p.From, p.Next, len(p.Lines), p.Gap, tc.from, tc.nxt, tc.n, tc.gap)
			}
		})
	}
}

// TestParseQueryNamesTheParameter: a refused query parameter is named in the error's path,
// as a refused body member is.
func TestParseQueryNamesTheParameter(t *testing.T) {
	for q, want := range map[string]string{
		"after=abc": "after", "after=1&after=2": "after", "limit=0": "limit",
		"limit=1&limit=2": "limit", "after=%zz": "",
	} {
		_, _, err := ParseQuery(q)
		e := apitest.Err(t, err)
		if e.Code != api.CodeValidation || e.Path == nil || *e.Path != want {
			t.Errorf("%s: %v path %v, want %q", q, err, e.Path, want)
		}
	}
}

func TestGetLogsDefaultLimit(t *testing.T) {
	r, _, _ := newRing(Options{})
	fill(r, 0, 250)
	srv := serve(t, r)
	_, p := getPage(t, srv, "?after=0")
	if len(p.Lines) != DefaultLimit || p.Next != p.From+DefaultLimit {
		t.Errorf("default page has %d lines, next %d", len(p.Lines), p.Next)
	}
}

func putLevel(t *testing.T, srv *httptest.Server, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, srv.URL+"/logs/level", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func TestPutLogLevel(t *testing.T) {
	long := strings.Repeat("t", 32)
	// answer is the whole body of a 200, and the error's `path` member of a 400 (the member
	// at fault; empty for the document as a whole).
	tests := []struct {
		body   string
		status int
		answer string
		check  func(r *Ring) bool
	}{
		{`{"level":"debug"}`, 200, `{"tag":"*","level":"debug"}`, func(r *Ring) bool { return r.Level("any") == "debug" }},
		{`{"level":"none","tag":"wifi"}`, 200, `{"tag":"wifi","level":"none"}`, func(r *Ring) bool { return r.Level("wifi") == "none" && r.Level("x") == "info" }},
		{`{"tag":"sk","level":"verbose"}`, 200, `{"tag":"sk","level":"verbose"}`, func(r *Ring) bool { return r.Level("sk") == "verbose" }},
		{`{"level":"warn","tag":"*"}`, 200, `{"tag":"*","level":"warn"}`, func(r *Ring) bool { return r.Level("x") == "warn" }},
		{`{"level":"error","tag":"` + long + `"}`, 200, `{"tag":"` + long + `","level":"error"}`, nil},
		{` {"level":"info"} ` + "\n", 200, `{"tag":"*","level":"info"}`, nil},
		{`{"level":"DEBUG"}`, 400, "level", nil},
		{`{"level":"trace"}`, 400, "level", nil},
		{`{"level":""}`, 400, "level", nil},
		{`{"tag":"wifi"}`, 400, "level", nil},
		{`{}`, 400, "level", nil},
		{`{"level":1}`, 400, "level", nil},
		{`{"level":null}`, 400, "level", nil},
		{`{"level":["info"]}`, 400, "level", nil},
		{`{"level":"info","tag":null}`, 400, "tag", nil},
		{`{"level":"info","tag":5}`, 400, "tag", nil},
		{`{"level":"info","tag":""}`, 400, "tag", nil},
		{`{"level":"info","tag":"a b"}`, 400, "tag", nil},
		{`{"level":"info","tag":"` + long + `x"}`, 400, "tag", nil},
		{`{"level":"info","extra":1}`, 400, "extra", nil},
		{`{"level":"info"} {}`, 400, "", nil},
		{`{"level":"info"`, 400, "", nil},
		{`[]`, 400, "", nil},
		{`null`, 400, "", nil},
		{`"info"`, 400, "", nil},
		{``, 400, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.body, func(t *testing.T) {
			r, _, _ := newRing(Options{})
			srv := serve(t, r)
			status, answer := putLevel(t, srv, tc.body)
			if status != tc.status {
				t.Fatalf("status %d (%s), want %d", status, answer, tc.status)
			}
			if tc.status == 200 {
				if answer != tc.answer {
					t.Errorf("answer %s, want %s", answer, tc.answer)
				}
				if tc.check != nil && !tc.check(r) {
					t.Error("level not applied")
				}
				return
			}
			if apitest.ErrorCode([]byte(answer)) != api.CodeValidation {
				t.Errorf("error body %s", answer)
			}
			var e struct{ Path string }
			if err := json.Unmarshal([]byte(answer), &e); err != nil || e.Path != tc.answer {
				t.Errorf("error body %s: path %q, want %q", answer, e.Path, tc.answer)
			}
			if r.Level("*") != "info" || r.Level("wifi") != "info" {
				t.Error("a refused request changed a level")
			}
		})
	}
}

func TestPutLogLevelTagCap(t *testing.T) {
	r, _, _ := newRing(Options{})
	srv := serve(t, r)
	for i := range maxTagOverrides {
		if status, b := putLevel(t, srv, fmt.Sprintf(`{"level":"debug","tag":"t%d"}`, i)); status != 200 {
			t.Fatalf("tag %d: %d %s", i, status, b)
		}
	}
	if status, b := putLevel(t, srv, `{"level":"debug","tag":"extra"}`); status != 400 || !strings.Contains(b, `"validation"`) {
		t.Errorf("tag over the cap: %d %s", status, b)
	}
}

// blockingWriter is a ResponseWriter whose writes wait until released, standing in for a
// client that does not read.
type blockingWriter struct {
	h       http.Header
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (w *blockingWriter) Header() http.Header { return w.h }
func (w *blockingWriter) WriteHeader(int)     {}
func (w *blockingWriter) Flush()              {}
func (w *blockingWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.entered) })
	<-w.release
	return len(p), nil
}

func TestGetLogsDoesNotHoldTheLockWhileWriting(t *testing.T) {
	r, _, _ := newRing(Options{})
	fill(r, 0, 5)
	w := &blockingWriter{h: http.Header{}, entered: make(chan struct{}), release: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		r.serveLogs(w, httptest.NewRequest(http.MethodGet, "/logs", nil))
	}()
	<-w.entered
	logged := make(chan struct{})
	go func() {
		r.Printf('I', "t", "while a client is slow")
		close(logged)
	}()
	select {
	case <-logged:
	case <-time.After(hangGuard):
		t.Error("logging blocked behind a response being written")
	}
	close(w.release)
	<-served
	<-logged
}

func TestNotify(t *testing.T) {
	r, fc, _ := newRing(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan NextEvent, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Notify(ctx, func(name string, data any) {
			if name != "logs" {
				t.Errorf("event %q", name)
			}
			events <- data.(NextEvent)
		})
	}()
	testio.Eventually(t, hangGuard, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.waiters) == 1 })

	expect := func(next int64) {
		t.Helper()
		select {
		case ev := <-events:
			if ev.Next != next {
				t.Fatalf("event next %d, want %d", ev.Next, next)
			}
		case <-time.After(hangGuard):
			t.Fatalf("no event with next %d", next)
		}
	}
	expectNone := func() {
		t.Helper()
		select {
		case ev := <-events:
			t.Fatalf("unexpected event %+v", ev)
		case <-time.After(50 * time.Millisecond):
		}
	}
	wait := func() {
		t.Helper()
		bctx, bcancel := context.WithTimeout(ctx, hangGuard)
		defer bcancel()
		if err := fc.BlockUntilContext(bctx, 1); err != nil {
			t.Fatal("Notify did not start its timer")
		}
	}

	// The first line after a quiet period goes out at once.
	r.Printf('I', "t", "one")
	expect(2)
	// Further lines wait until 500 ms after the previous event and coalesce.
	r.Printf('I', "t", "two")
	wait()
	r.Printf('I', "t", "three")
	fc.Advance(499 * time.Millisecond)
	expectNone()
	fc.Advance(time.Millisecond)
	expect(4)
	// The wake-up left by "three" finds nothing new: no event.
	wait()
	fc.Advance(NotifyInterval)
	expectNone()
	// Filtered records are not lines and announce nothing.
	fc.Advance(2 * time.Second)
	r.Printf('D', "t", "filtered")
	expectNone()
	// After a quiet period the next line goes out at once again.
	r.Printf('E', "t", "four")
	expect(5)

	cancel()
	select {
	case <-done:
	case <-time.After(hangGuard):
		t.Fatal("Notify did not return after cancel")
	}
	r.mu.Lock()
	n := len(r.waiters)
	r.mu.Unlock()
	if n != 0 {
		t.Error("Notify left its waiter registered")
	}
}

func TestNotifyStopsWhileWaiting(t *testing.T) {
	r, fc, _ := newRing(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	published := make(chan struct{}, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Notify(ctx, func(string, any) { published <- struct{}{} })
	}()
	testio.Eventually(t, hangGuard, func() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.waiters) == 1 })
	r.Printf('I', "t", "one")
	<-published
	r.Printf('I', "t", "two")
	bctx, bcancel := context.WithTimeout(ctx, hangGuard)
	defer bcancel()
	if err := fc.BlockUntilContext(bctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(hangGuard):
		t.Fatal("Notify did not return while waiting on its timer")
	}
	if len(published) != 0 {
		t.Error("published after cancel")
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "after=5", "limit=1000", "after=0&limit=1", "after=-1", "limit=1001", "after=%zz", "after=1&after=2", "limit=+5", "after=0x10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		after, limit, err := ParseQuery(q)
		if err != nil {
			return
		}
		if after < -1 || limit < 1 || limit > MaxLimit {
			t.Fatalf("ParseQuery(%q) = %d, %d", q, after, limit)
		}
	})
}

func FuzzParseLevelBody(f *testing.F) {
	seeds := []string{`{"level":"info"}`, `{"level":"none","tag":"wifi"}`, `{"level":1}`, `{"tag":null,"level":"info"}`, `[]`, `{"level":"info","x":0}`, `{"level":"\u0069nfo"}`}
	apitest.FuzzParser(f, seeds, ParseLevelBody, func(t *testing.T, body []byte, lb LevelBody) {
		r := New(Options{})
		if err := r.SetLevel(lb.Tag, lb.Level); err != nil {
			t.Fatalf("accepted body %q fails SetLevel: %v", body, err)
		}
		if r.Level(lb.Tag) != lb.Level {
			t.Fatalf("level %q not applied", lb.Level)
		}
	})
}

// hangGuard bounds the waits of these tests. Each waits on a condition; the bound only turns a
// hang into a failure, so it is far beyond what a loaded machine needs.
const hangGuard = 5 * time.Minute
