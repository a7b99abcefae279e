package httpd

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"devhost/host/api"
	"devhost/host/httpd/httpdtest"
)

func manyHeaders(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString("X-H")
		b.WriteString(strings.Repeat("a", i%7))
		b.WriteString(": v\r\n")
	}
	return b.String()
}

// TestGoPlainErrorsBecomeJSON sends what net/http refuses before any handler runs, as raw
// bytes, to API and UI paths alike.
func TestGoPlainErrorsBecomeJSON(t *testing.T) {
	_, base := newTestServer(t, nil)
	cases := []struct {
		name, req string
		status    int
		code      string
	}{
		{"garbage", "GARBAGE\r\n\r\n", 400, "bad_request"},
		{"binary garbage", "\x00\x01\x02\xff\r\n\r\n", 400, "bad_request"},
		{"request line without version", "GET /api/v1/thing\r\nHost: x\r\n\r\n", 400, "bad_request"},
		{"malformed header line", "GET /api/v1/thing HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n", 400, "bad_request"},
		{"space before colon", "GET /api/v1/thing HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n", 400, "bad_request"},
		{"missing Host", "GET /api/v1/thing HTTP/1.1\r\n\r\n", 400, "bad_request"},
		{"HTTP/9.9", "GET /api/v1/thing HTTP/9.9\r\nHost: x\r\n\r\n", 505, CodeHTTPVersion},
		{"HTTP/9.9 on a UI path", "GET /index.html HTTP/9.9\r\nHost: x\r\n\r\n", 505, CodeHTTPVersion},
		{"two different Content-Length", "PUT /api/v1/thing HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, "bad_request"},
		{"unknown transfer coding", "PUT /api/v1/thing HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: gzip\r\n\r\n", 501, CodeNotImplemented},
		{"one header over 8 KiB", "GET /api/v1/thing HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 9<<10) + "\r\n\r\n", 431, "headers_too_large"},
		{"UI path, header over 8 KiB", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 9<<10) + "\r\n\r\n", 431, "headers_too_large"},
		{"over 1 MiB of headers", "GET /api/v1/thing HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 1<<20+10) + "\r\n\r\n", 431, "headers_too_large"},
		{"20,000 headers", "GET /api/v1/thing HTTP/1.1\r\nHost: x\r\n" + manyHeaders(20000) + "\r\n", 431, "headers_too_large"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, b := rawExchange(t, base, c.req)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d (%s)", resp.StatusCode, c.status, b)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("content type %q: %s", ct, b)
			}
			var e struct{ Error, Message string }
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("body %q: %v", b, err)
			}
			if e.Error != c.code || e.Message == "" {
				t.Fatalf("body %s, want error %q with a message", b, c.code)
			}
		})
	}
}

// TestHeadJustUnderTheLimitIsServed keeps the cap honest from the other side.
func TestHeadJustUnderTheLimitIsServed(t *testing.T) {
	_, base := newTestServer(t, nil)
	head := "GET /api/v1/thing HTTP/1.1\r\nHost: x\r\nX-Big: "
	pad := DefaultMaxHeader - len(head) - len("\r\n\r\n")
	resp, b := rawExchange(t, base, head+strings.Repeat("a", pad)+"\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
}

func TestPlainToJSONLeavesOrdinaryResponsesAlone(t *testing.T) {
	for _, p := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nDate: x\r\n\r\nhi",
		"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nDate: x\r\n\r\n400 Bad Request",
		"HTTP/1.1 204 No Content" + plainHeaders,
		"{\"a\":1}",
	} {
		if _, ok := plainToJSON([]byte(p), 8192); ok {
			t.Fatalf("rewrote %q", p)
		}
	}
}

// TestConnectionCapKeepsTheNewest fills the cap with connections that never send a request:
// the newest client is served and the oldest idle connection is closed.
func TestConnectionCapKeepsTheNewest(t *testing.T) {
	s := New(Options{MaxConns: 4})
	base := serveOK(t, s)
	idle := idleConns(t, s, base, base, base, base)
	resp, b := rawExchange(t, base, "GET /api/v1/thing HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("newest client: %d %s", resp.StatusCode, b)
	}
	// The first (oldest) connection was closed by the server.
	wantClosed(t, idle[0], "oldest idle connection")
	if n := s.conns.open(); n > 4 {
		t.Fatalf("%d connections open over a cap of 4", n)
	}
}

// TestConnectionCapRefusesWhenAllBusy: with every connection inside a request, the newcomer
// gets a JSON 503 and nobody is cut off.
func TestConnectionCapRefusesWhenAllBusy(t *testing.T) {
	s := New(Options{MaxConns: 2})
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	if err := s.Handle(api.Route{Method: "GET", Path: "/slow", Handler: func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
		api.WriteJSON(w, 200, "ok")
	}}); err != nil {
		t.Fatal(err)
	}
	base := httpdtest.Start(t, s)
	results := make(chan int, 2)
	for range 2 {
		go func() {
			resp, err := http.Get(base + "/api/v1/slow")
			if err != nil {
				results <- 0
				return
			}
			resp.Body.Close()
			results <- resp.StatusCode
		}()
	}
	<-entered
	<-entered
	resp, b := rawExchange(t, base, "GET /api/v1/slow HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 503 || !strings.Contains(string(b), CodeTooManyConns) {
		t.Fatalf("newcomer: %d %s", resp.StatusCode, b)
	}
	close(release)
	for range 2 {
		if st := <-results; st != 200 {
			t.Fatalf("busy client got %d", st)
		}
	}
}

// TestConnectionCapSpansListeners: the station and the portal listener share one cap.
func TestConnectionCapSpansListeners(t *testing.T) {
	s := New(Options{MaxConns: 2})
	first := serveOK(t, s)
	second := httpdtest.Start(t, s)
	idle := idleConns(t, s, first, second)
	resp, b := rawExchange(t, second, "GET /api/v1/thing HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	wantClosed(t, idle[0], "the first listener's idle connection")
}

// TestUIFileServedThroughTheWrapper: a file body goes out through ReadFrom intact.
func TestUIFileServedThroughTheWrapper(t *testing.T) {
	dir := t.TempDir()
	content := strings.Repeat("0123456789abcdef", 8<<10)
	if err := os.WriteFile(filepath.Join(dir, "big.js"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	s := New(Options{UI: http.FileServer(http.Dir(dir))})
	base := httpdtest.Start(t, s)
	resp, err := http.Get(base + "/big.js")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != content {
		t.Fatalf("got %d bytes (%v), want %d", len(b), err, len(content))
	}
}
