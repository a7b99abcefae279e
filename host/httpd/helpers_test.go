package httpd

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"devhost/host/api"
	"devhost/host/httpd/httpdtest"
	"devhost/host/testio"
)

func echo(w http.ResponseWriter, r *http.Request) {
	var v map[string]any
	if err := api.DecodeJSON(r, &v); err != nil {
		api.WriteErr(w, err)
		return
	}
	api.WriteJSON(w, 200, v)
}

func newTestServer(t *testing.T, auth *fakeAuth) (*Server, string) {
	opts := Options{BodyTimeout: 300 * time.Millisecond, UI: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ui:"+r.URL.Path)
	})}
	if auth != nil {
		opts.Auth = auth
	}
	s := New(opts)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Handle(api.Route{Method: "GET", Path: "/thing", Handler: func(w http.ResponseWriter, _ *http.Request) { api.WriteJSON(w, 200, map[string]int{"a": 1}) }}))
	must(s.Handle(api.Route{Method: "PUT", Path: "/thing", Handler: echo}))
	must(s.Handle(api.Route{Method: "POST", Path: "/act", NoBody: true, Handler: func(w http.ResponseWriter, _ *http.Request) { api.WriteJSON(w, 202, map[string]string{"status": "ok"}) }}))
	must(s.Handle(api.Route{Method: "GET", Path: "/open", Public: true, Handler: func(w http.ResponseWriter, _ *http.Request) { api.WriteJSON(w, 200, "open") }}))
	must(s.Handle(api.Route{Method: "GET", Path: "/boom", Handler: func(http.ResponseWriter, *http.Request) { panic("boom") }}))
	return s, httpdtest.Start(t, s)
}

func do(t *testing.T, method, url, ct, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body == "" {
		req.Body = nil
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// raw sends bytes on a fresh connection and returns the parsed response.
func raw(t *testing.T, base, req string, pause time.Duration, rest string) *http.Response {
	t.Helper()
	c := dialServer(t, base)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	if pause > 0 {
		time.Sleep(pause)
		_, _ = io.WriteString(c, rest)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// rawExchange writes req on a fresh connection (concurrently: the server may answer before
// it has read everything) and reads one response.
func rawExchange(t *testing.T, base, req string) (*http.Response, []byte) {
	t.Helper()
	c := dialServer(t, base)
	defer c.Close() // now, not at the test's end: the connection caps count it
	go func() { _, _ = io.WriteString(c, req) }()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, b
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && strings.Contains(ne.Err.Error(), "reset")
}

// serveOK serves GET /thing answering "ok" on s and starts it; it answers the base URL.
func serveOK(t *testing.T, s *Server) string {
	t.Helper()
	if err := s.Handle(api.Route{Method: "GET", Path: "/thing", Handler: func(w http.ResponseWriter, _ *http.Request) {
		api.WriteJSON(w, 200, "ok")
	}}); err != nil {
		t.Fatal(err)
	}
	return httpdtest.Start(t, s)
}

// dialServer opens a raw connection to the server at base, closed when the test ends.
func dialServer(t *testing.T, base string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// wantClosed fails unless the server has closed c (end of stream or a reset).
func wantClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("%s: read %v, want closed", what, err)
	}
}

// idleConns opens an idle connection to each base in turn, each counted by s before the next.
func idleConns(t *testing.T, s *Server, bases ...string) []net.Conn {
	t.Helper()
	var idle []net.Conn
	for _, base := range bases {
		idle = append(idle, dialServer(t, base))
		testio.Eventually(t, 60*time.Second, func() bool { return s.conns.open() == len(idle) })
	}
	return idle
}
