package events

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"devhost/host/api/apitest"
	"devhost/host/testio"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const wait = 5 * time.Second

func setup(t *testing.T, opts Options) (*Hub, *clockwork.FakeClock, *httptest.Server) {
	t.Helper()
	fc := clockwork.NewFakeClockAt(time.Date(2026, 11, 21, 23, 50, 0, 0, time.UTC))
	opts.Clock = fc
	h := New(opts)
	mux := http.NewServeMux()
	for _, rt := range h.Routes() {
		mux.HandleFunc(rt.Method+" "+rt.Path, rt.Handler)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	// Cleanups run last-in first-out: streams end before the server waits for its handlers.
	t.Cleanup(h.Close)
	return h, fc, srv
}

// client reads one SSE response frame by frame (a frame ends with an empty line).
type client struct {
	resp   *http.Response
	frames chan string
	err    error // why the body ended; read after frames is closed
}

// openStream connects and reads the retry line every stream opens with.
func openStream(t *testing.T, srv *httptest.Server) *client {
	t.Helper()
	c := connect(t, srv)
	c.expect(t, "retry: 3000\n\n")
	return c
}

func connect(t *testing.T, srv *httptest.Server) *client {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		resp.Body.Close()
		t.Fatalf("status %d", resp.StatusCode)
	}
	c := &client{resp: resp, frames: make(chan string, 256)}
	go func() {
		defer close(c.frames)
		rd := bufio.NewReader(resp.Body)
		var cur strings.Builder
		for {
			line, err := rd.ReadString('\n')
			cur.WriteString(line)
			if err != nil {
				c.err = err
				return
			}
			if line == "\n" {
				c.frames <- cur.String()
				cur.Reset()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		for range c.frames {
		}
	})
	return c
}

func (c *client) next(t *testing.T) string {
	t.Helper()
	select {
	case f, ok := <-c.frames:
		if !ok {
			t.Fatalf("stream ended: %v", c.err)
		}
		return f
	case <-time.After(wait):
		t.Fatal("no frame")
	}
	return ""
}

func (c *client) expect(t *testing.T, want string) {
	t.Helper()
	if got := c.next(t); got != want {
		t.Fatalf("frame %q, want %q", got, want)
	}
}

// expectEOF waits for the response to end cleanly.
func (c *client) expectEOF(t *testing.T) {
	t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case f, ok := <-c.frames:
			if !ok {
				if !errors.Is(c.err, io.EOF) {
					t.Fatalf("stream ended with %v, want EOF", c.err)
				}
				return
			}
			t.Logf("frame before the end: %q", f)
		case <-timeout:
			t.Fatal("stream did not end")
		}
	}
}

func TestRoutes(t *testing.T) {
	rts := New(Options{}).Routes()
	if len(rts) != 1 || rts[0].Method != http.MethodGet || rts[0].Path != "/events" || !rts[0].Stream || rts[0].Public {
		t.Errorf("routes %+v", rts)
	}
}

func TestStreamStartAndSnapshots(t *testing.T) {
	h, _, srv := setup(t, Options{})
	for i := range 9 {
		ok := h.OnConnect(func() []Event { return []Event{{Name: fmt.Sprintf("c%d", i), Data: map[string]int{"n": i}}} })
		if want := i < DefaultMaxConnectCallbacks; ok != want {
			t.Errorf("registration %d answered %v, want %v", i+1, ok, want)
		}
	}
	c := connect(t, srv)
	if ct := c.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	if cc := c.resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control %q", cc)
	}
	if len(c.resp.TransferEncoding) != 1 || c.resp.TransferEncoding[0] != "chunked" {
		t.Errorf("transfer encoding %v", c.resp.TransferEncoding)
	}
	c.expect(t, "retry: 3000\n\n")
	for i := range 8 {
		c.expect(t, fmt.Sprintf("event: c%d\ndata: {\"n\":%d}\n\n", i, i))
	}
	// The ninth callback is missing: the next frame is a live event.
	h.Publish("live", true)
	c.expect(t, "event: live\ndata: true\n\n")
}

func TestSnapshotOrderWithinACallbackAndBadEvents(t *testing.T) {
	h, _, srv := setup(t, Options{})
	h.OnConnect(func() []Event {
		return []Event{{Name: "a", Data: 1}, {Name: "bad", Data: make(chan int)}, {Name: "b", Data: 2}}
	})
	h.OnConnect(func() []Event { return nil })
	h.OnConnect(func() []Event { return []Event{{Name: "line\nbreak", Data: 0}, {Name: "c", Data: 3}} })
	if h.OnConnect(nil) {
		t.Error("nil callback accepted")
	}
	c := openStream(t, srv)
	c.expect(t, "event: a\ndata: 1\n\n")
	c.expect(t, "event: b\ndata: 2\n\n")
	c.expect(t, "event: c\ndata: 3\n\n")
}

func TestEventPublishedDuringConnectFollowsSnapshots(t *testing.T) {
	h, _, srv := setup(t, Options{})
	h.OnConnect(func() []Event {
		// A change racing the snapshot: the stream is already registered, so it is kept.
		h.Publish("net", "changed")
		return []Event{{Name: "net", Data: "snapshot"}}
	})
	c := openStream(t, srv)
	c.expect(t, "event: net\ndata: \"snapshot\"\n\n")
	c.expect(t, "event: net\ndata: \"changed\"\n\n")
}

func TestEventFraming(t *testing.T) {
	h, _, srv := setup(t, Options{})
	c := openStream(t, srv)
	tests := []struct {
		name string
		data any
		want string
	}{
		{"config", map[string]string{"ns": "wifi", "key": "ssid0"}, "event: config\ndata: {\"key\":\"ssid0\",\"ns\":\"wifi\"}\n\n"},
		{"logs", struct {
			Next int64 `json:"next"`
		}{42}, "event: logs\ndata: {\"next\":42}\n\n"},
		{"multi", "line1\nline2\r", "event: multi\ndata: \"line1\\nline2\\r\"\n\n"},
		{"null", nil, "event: null\ndata: null\n\n"},
		{"raw", json.RawMessage(`{"a": [1, 2]}`), "event: raw\ndata: {\"a\":[1,2]}\n\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Unframeable events are dropped without disturbing the stream.
			h.Publish("", 1)
			h.Publish("a\nb", 1)
			h.Publish("bad", func() {})
			h.Publish(tc.name, tc.data)
			got := c.next(t)
			if got != tc.want {
				t.Fatalf("frame %q, want %q", got, tc.want)
			}
			data := strings.TrimSuffix(strings.SplitN(got, "\ndata: ", 2)[1], "\n\n")
			if !json.Valid([]byte(data)) {
				t.Errorf("data %q is not JSON", data)
			}
		})
	}
}

func TestPing(t *testing.T) {
	h, fc, srv := setup(t, Options{})
	c := openStream(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := fc.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("stream did not start its ping ticker")
	}
	fc.Advance(DefaultPing - time.Millisecond)
	h.Publish("marker", 1)
	c.expect(t, "event: marker\ndata: 1\n\n") // no ping came before it
	fc.Advance(time.Millisecond)
	c.expect(t, ": ping\n\n")
	fc.Advance(DefaultPing - time.Millisecond)
	h.Publish("marker", 2)
	c.expect(t, "event: marker\ndata: 2\n\n")
	fc.Advance(time.Millisecond)
	c.expect(t, ": ping\n\n")
}

func TestFourthStreamEvictsOldest(t *testing.T) {
	h, _, srv := setup(t, Options{})
	var cs []*client
	for range 3 {
		c := openStream(t, srv)
		cs = append(cs, c)
	}
	if s := h.Stats(); s.Streams != 3 || s.Evicted != 0 {
		t.Fatalf("stats %+v", s)
	}
	c4 := openStream(t, srv)
	cs[0].expectEOF(t)
	h.Publish("x", 1)
	for i, c := range append(cs[1:], c4) {
		if got := c.next(t); got != "event: x\ndata: 1\n\n" {
			t.Errorf("stream %d got %q", i+2, got)
		}
	}
	if s := h.Stats(); s.Streams != 3 || s.Evicted != 1 {
		t.Errorf("stats %+v", s)
	}
	// The next one evicts the second oldest.
	c5 := openStream(t, srv)
	cs[1].expectEOF(t)
	h.Publish("y", 2)
	for _, c := range []*client{cs[2], c4, c5} {
		c.expect(t, "event: y\ndata: 2\n\n")
	}
}

func TestSlowClientNeverBlocksPublish(t *testing.T) {
	fc := clockwork.NewFakeClock()
	h := New(Options{Clock: fc, Buffer: 4})
	returned := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.serve(w, r)
		returned <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)

	// A client that sends its request and never reads.
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /events HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	testio.Eventually(t, wait, func() bool { return h.Stats().Streams == 1 })

	pending := func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(h.streams) == 0 {
			return 0
		}
		return len(h.streams[0].ch)
	}
	payload := strings.Repeat("x", 64<<10)
	published := make(chan struct{})
	go func() {
		defer close(published)
		// Publish one event at a time until the handler stops taking them: it is then stuck
		// in a write to a full socket. Publishing on must end the stream, not wait for it.
		stuck := false
		for range 5000 {
			h.Publish("big", payload)
			if h.Stats().Slow > 0 {
				return
			}
			if !stuck {
				deadline := time.Now().Add(200 * time.Millisecond)
				for pending() > 0 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				stuck = pending() > 0
			}
		}
	}()
	select {
	case <-published:
	case <-time.After(60 * time.Second):
		t.Fatal("Publish blocked behind a client that does not read")
	}
	if s := h.Stats(); s.Slow != 1 || s.Streams != 0 {
		t.Errorf("stats %+v, want the slow stream closed and counted", s)
	}
	// The handler was stuck writing to the full socket; closing the stream cut that write
	// off, while the client still has not read a byte.
	select {
	case <-returned:
	case <-time.After(wait):
		t.Fatal("the slow stream's handler is still blocked")
	}
}

func TestCloseEndsStreams(t *testing.T) {
	h, _, srv := setup(t, Options{})
	a, b := openStream(t, srv), openStream(t, srv)
	h.Close()
	a.expectEOF(t)
	b.expectEOF(t)
	if s := h.Stats(); s.Streams != 0 {
		t.Errorf("stats after close %+v", s)
	}
	h.Publish("after", 1) // nothing to deliver to, must not panic
	h.Close()             // idempotent

	resp, err := srv.Client().Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	if code := apitest.ResponseCode(t, resp); resp.StatusCode != http.StatusServiceUnavailable || code != "restarting" {
		t.Errorf("connect after close: %d %q", resp.StatusCode, code)
	}
}

func TestClientGoneFreesItsSlot(t *testing.T) {
	h, _, srv := setup(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	testio.Eventually(t, wait, func() bool { return h.Stats().Streams == 1 })
	cancel()
	resp.Body.Close()
	testio.Eventually(t, wait, func() bool { return h.Stats().Streams == 0 })
	if s := h.Stats(); s.Evicted != 0 || s.Slow != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestOptionsDefaults(t *testing.T) {
	h := New(Options{})
	if h.maxStreams != 3 || h.maxCBs != 8 || h.ping != 15*time.Second || h.buffer != DefaultBuffer {
		t.Errorf("defaults %d %d %v %d", h.maxStreams, h.maxCBs, h.ping, h.buffer)
	}
	h = New(Options{MaxStreams: 1, MaxConnectCallbacks: 2, Ping: time.Second})
	n := 0
	for h.OnConnect(func() []Event { return nil }) {
		n++
	}
	if n != 2 || h.maxStreams != 1 || h.ping != time.Second {
		t.Errorf("options not applied: %d callbacks", n)
	}
}

// BenchmarkPublish fans one event out to three streams. The streams are drained in-process
// with the timer stopped, so it measures the hub (marshal once, three buffered sends), not
// the network or the scheduler.
func BenchmarkPublish(b *testing.B) {
	const buffer = 1024
	h := New(Options{Buffer: buffer})
	var streams []*stream
	for range 3 {
		s, _, err := h.attach(nil)
		if err != nil {
			b.Fatal(err)
		}
		streams = append(streams, s)
	}
	data := struct {
		NS  string `json:"ns"`
		Key string `json:"key"`
	}{"wifi", "ssid0"}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		h.Publish("config", data)
		if n++; n == buffer {
			b.StopTimer()
			for _, s := range streams {
				for len(s.ch) > 0 {
					<-s.ch
				}
			}
			n = 0
			b.StartTimer()
		}
	}
	b.StopTimer()
	if s := h.Stats(); s.Slow != 0 || s.Streams != 3 {
		b.Errorf("stats %+v: a stream fell behind", s)
	}
	h.Close()
}

// countedJSON counts how often it is marshalled.
type countedJSON struct{ n *int }

func (c countedJSON) MarshalJSON() ([]byte, error) {
	*c.n++
	return []byte(`{}`), nil
}

// With no stream open, an event costs no marshalling.
func TestPublishWithNobodyListening(t *testing.T) {
	h := New(Options{})
	defer h.Close()
	n := 0
	for range 3 {
		h.Publish("status", countedJSON{&n})
	}
	if n != 0 {
		t.Fatalf("marshalled %d times for no stream", n)
	}
}
