package httpd

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"devhost/host/api"
	"devhost/host/api/apitest"
	"devhost/host/foreground"
	"devhost/host/httpd/httpdtest"
)

type fakeAuth struct{ err error }

func (f *fakeAuth) Check(*http.Request) error { return f.err }
func (f *fakeAuth) WriteError(w http.ResponseWriter, err error) {
	if e, ok := err.(retryErr); ok {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter()))
	}
	if e, ok := err.(*api.Error); ok && e.Status == 401 {
		w.Header().Set("WWW-Authenticate", `Bearer realm="dev"`)
	}
	api.WriteErr(w, err)
}

type retryErr struct{ e *api.Error }

func (r retryErr) Error() string { return r.e.Error() }
func (r retryErr) Unwrap() error { return r.e }
func (retryErr) RetryAfter() int { return 30 }

func TestChainErrors(t *testing.T) {
	_, base := newTestServer(t, nil)
	cases := []struct {
		name, method, path, ct, body string
		status                       int
		code                         string
	}{
		{"unknown api path", "GET", "/api/v1/nope", "", "", 404, "not_found"},
		{"trailing slash is not redirected", "GET", "/api/v1/thing/", "", "", 404, "not_found"},
		{"case is not fixed", "GET", "/API/v1/Thing", "", "", 200, ""}, // not under /api/: the UI
		{"unknown version", "GET", "/api/v2/thing", "", "", 404, "not_found"},
		{"wrong method", "DELETE", "/api/v1/thing", "application/json", "", 405, "method_not_allowed"},
		{"no content type", "PUT", "/api/v1/thing", "", `{"a":1}`, 415, "unsupported_media_type"},
		{"wrong content type", "PUT", "/api/v1/thing", "text/plain", `{"a":1}`, 415, "unsupported_media_type"},
		{"json with charset", "PUT", "/api/v1/thing", "application/json; charset=utf-8", `{"a":1}`, 200, ""},
		{"no-body POST still needs JSON type", "POST", "/api/v1/act", "", "", 415, "unsupported_media_type"},
		{"no-body POST", "POST", "/api/v1/act", "application/json", "", 202, ""},
		{"too large", "PUT", "/api/v1/thing", "application/json", `{"a":"` + strings.Repeat("x", 16<<10) + `"}`, 413, "too_large"},
		{"trailing data", "PUT", "/api/v1/thing", "application/json", `{"a":1} x`, 400, "validation"},
		{"handler panic", "GET", "/api/v1/boom", "", "", 500, "internal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := do(t, c.method, base+c.path, c.ct, c.body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			if c.code != "" {
				if got := apitest.ResponseCode(t, resp); got != c.code {
					t.Fatalf("error %q, want %q", got, c.code)
				}
			} else {
				resp.Body.Close()
			}
		})
	}
}

func TestMethodNotAllowedCarriesAllow(t *testing.T) {
	_, base := newTestServer(t, nil)
	resp := do(t, "POST", base+"/api/v1/thing", "application/json", "{}")
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, PUT" {
		t.Fatalf("status %d allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	resp.Body.Close()
}

func TestLengthRequired(t *testing.T) {
	_, base := newTestServer(t, nil)
	cases := []struct {
		name, req string
		status    int
	}{
		{"chunked body", "PUT /api/v1/thing HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 411},
		{"neither length nor body", "PUT /api/v1/thing HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n", 411},
		{"HTTP/1.0 without length", "PUT /api/v1/thing HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\n\r\n", 411},
		{"chunked to a no-body route", "POST /api/v1/act HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 411},
		{"no-body route needs no length", "POST /api/v1/act HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n", 202},
		{"explicit zero length reaches the handler", "PUT /api/v1/thing HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n", 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := raw(t, base, c.req, 0, "")
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			if c.status == 411 && apitest.ResponseCode(t, resp) != "length_required" {
				t.Fatal("wrong code")
			}
		})
	}
}

func TestUnsupportedMediaNamesTheHeader(t *testing.T) {
	_, base := newTestServer(t, nil)
	resp := do(t, "PUT", base+"/api/v1/thing", "text/plain", `{"a":1}`)
	defer resp.Body.Close()
	var b struct{ Error, Message string }
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 415 || !strings.Contains(b.Message, "Content-Type: application/json") {
		t.Fatalf("%d %+v", resp.StatusCode, b)
	}
}

func TestSlowBodyTimesOut(t *testing.T) {
	_, base := newTestServer(t, nil)
	// The body timeout is an option (300 ms here); the spec names no value for it.
	resp := raw(t, base, "PUT /api/v1/thing HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 20\r\n\r\n{\"a\":", 0, "")
	if resp.StatusCode != 408 || apitest.ResponseCode(t, resp) != "timeout" {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestHeadersTooLarge(t *testing.T) {
	_, base := newTestServer(t, nil)
	req, _ := http.NewRequest("GET", base+"/api/v1/thing", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 9<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 431 || apitest.ResponseCode(t, resp) != "headers_too_large" {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestRestartingRefusesWritesOnly(t *testing.T) {
	s, base := newTestServer(t, nil)
	s.SetRestarting()
	resp := do(t, "PUT", base+"/api/v1/thing", "application/json", `{"a":1}`)
	if resp.StatusCode != 503 || apitest.ResponseCode(t, resp) != "restarting" {
		t.Fatalf("status %d", resp.StatusCode)
	}
	resp = do(t, "GET", base+"/api/v1/thing", "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("GET while restarting: %d", resp.StatusCode)
	}
	resp.Body.Close()
}

func TestAuthRefusals(t *testing.T) {
	a := &fakeAuth{}
	_, base := newTestServer(t, a)
	a.err = &api.Error{Status: 401, Code: api.CodeUnauthorized}
	resp := do(t, "GET", base+"/api/v1/thing", "", "")
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Bearer realm="dev"` || apitest.ResponseCode(t, resp) != "unauthorized" {
		t.Fatalf("401: %d %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	// Authentication comes before the content-type check, the body limits and before the
	// body is read.
	resp = do(t, "PUT", base+"/api/v1/thing", "text/plain", "junk")
	if resp.StatusCode != 401 {
		t.Fatalf("unauthenticated bad write: %d", resp.StatusCode)
	}
	resp.Body.Close()
	resp = do(t, "PUT", base+"/api/v1/thing", "application/json", `{"a":"`+strings.Repeat("x", 16<<10)+`"}`)
	if resp.StatusCode != 401 {
		t.Fatalf("unauthenticated over-long write: %d, want 401 before 413", resp.StatusCode)
	}
	resp.Body.Close()
	for _, req := range []string{
		"PUT /api/v1/thing HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
		"PUT /api/v1/thing HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n",
	} {
		resp = raw(t, base, req, 0, "")
		if resp.StatusCode != 401 {
			t.Fatalf("unauthenticated unframed write: %d, want 401 before 411", resp.StatusCode)
		}
		resp.Body.Close()
	}
	resp = do(t, "GET", base+"/api/v1/open", "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("public route: %d", resp.StatusCode)
	}
	resp.Body.Close()
	a.err = retryErr{e: &api.Error{Status: 429, Code: api.CodeTooManyAttempts}}
	resp = do(t, "GET", base+"/api/v1/thing", "", "")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "30" || apitest.ResponseCode(t, resp) != "too_many_attempts" {
		t.Fatalf("429: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func TestUIGetsEverythingOutsideAPI(t *testing.T) {
	_, base := newTestServer(t, nil)
	for _, p := range []string{"/", "/index.html", "/apix", "/settings/wifi"} {
		resp := do(t, "GET", base+p, "", "")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "ui:"+p {
			t.Fatalf("%s: %q", p, b)
		}
	}
}

func TestAppRoutes(t *testing.T) {
	s, base := newTestServer(t, &fakeAuth{})
	h := func(msg string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) { api.WriteJSON(w, 200, msg) }
	}
	if err := s.AddApp("n2k", api.Route{Method: "GET", Path: "/thing", Handler: h("x")}); err == nil {
		t.Fatal("an application route shadowed a core route")
	}
	if err := s.AddApp("n2k", api.Route{Method: "GET", Path: "/n2k/status", Handler: h("n2k")}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddApp("ble", api.Route{Method: "GET", Path: "/n2k/status", Handler: h("ble")}); err == nil {
		t.Fatal("two owners share a route")
	}
	if err := s.AddApp("ble", api.Route{Method: "GET", Path: "/ble/status", Handler: h("ble"), Public: true}); err != nil {
		t.Fatal(err)
	}
	get := func(p string) (int, string) {
		resp := do(t, "GET", base+p, "", "")
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if st, b := get("/api/v1/n2k/status"); st != 200 || b != `"n2k"` {
		t.Fatalf("n2k: %d %s", st, b)
	}
	s.RemoveApp("n2k")
	if st, _ := get("/api/v1/n2k/status"); st != 404 {
		t.Fatalf("removed route answers %d", st)
	}
	if st, b := get("/api/v1/ble/status"); st != 200 || b != `"ble"` {
		t.Fatalf("ble: %d %s", st, b)
	}
}

func TestAppRoutesAreProtectedUnlessPublic(t *testing.T) {
	a := &fakeAuth{err: &api.Error{Status: 401, Code: api.CodeUnauthorized}}
	s, base := newTestServer(t, a)
	ok := func(w http.ResponseWriter, _ *http.Request) { api.WriteJSON(w, 200, "ok") }
	if err := s.AddApp("app", api.Route{Method: "GET", Path: "/app/a", Handler: ok}, api.Route{Method: "GET", Path: "/app/b", Handler: ok, Public: true}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]int{"/api/v1/app/a": 401, "/api/v1/app/b": 200} {
		resp := do(t, "GET", base+p, "", "")
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s: %d, want %d", p, resp.StatusCode, want)
		}
	}
}

func TestConflictingCoreRouteIsAnError(t *testing.T) {
	s := New(Options{})
	ok := func(http.ResponseWriter, *http.Request) {}
	if err := s.Handle(api.Route{Method: "GET", Path: "/config/schema", Handler: ok}); err != nil {
		t.Fatal(err)
	}
	if err := s.Handle(api.Route{Method: "GET", Path: "/config/:ns", Handler: ok}); err == nil {
		t.Fatal("httprouter conflict did not surface as an error")
	}
	if err := s.Handle(api.Route{Method: "GET", Path: "/config/schema", Handler: ok}); err == nil {
		t.Fatal("duplicate accepted")
	}
	if err := s.Handle(api.Route{Method: "PATCH", Path: "/x", Handler: ok}); err == nil {
		t.Fatal("PATCH accepted")
	}
}

// scopeAuth revokes every credential when revoke is closed.
type scopeAuth struct {
	fakeAuth
	revoke chan struct{}
}

func (s *scopeAuth) Scope(ctx context.Context, _ *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-s.revoke:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// TestStreamEndsWithItsCredential: a stream route runs under the authenticator's scope.
func TestStreamEndsWithItsCredential(t *testing.T) {
	a := &scopeAuth{revoke: make(chan struct{})}
	s := New(Options{Auth: a})
	if err := s.Handle(api.Route{Method: "GET", Path: "/stream", Stream: true, Handler: func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "open\n")
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}}); err != nil {
		t.Fatal(err)
	}
	base := httpdtest.Start(t, s)
	resp, err := http.Get(base + "/api/v1/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "open\n" {
		t.Fatalf("stream start %q %v", line, err)
	}
	close(a.revoke)
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatalf("stream did not end cleanly: %v", err)
	}
}

// A core route's request counts as foreground work while it is answered (plugin code gives
// way to it); an application's route and an event stream do not.
func TestForegroundCountsCoreRequests(t *testing.T) {
	s := New(Options{})
	busy := make(chan bool, 1)
	seen := func(w http.ResponseWriter, _ *http.Request) {
		busy <- foreground.Busy()
		api.WriteJSON(w, 200, "ok")
	}
	for _, rt := range []api.Route{{Method: "GET", Path: "/core", Handler: seen}, {Method: "GET", Path: "/events", Stream: true, Handler: seen}} {
		if err := s.Handle(rt); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddApp("p", api.Route{Method: "GET", Path: "/p/x", Handler: seen}); err != nil {
		t.Fatal(err)
	}
	base := httpdtest.Start(t, s)
	for _, c := range []struct {
		path string
		want bool
	}{{"/api/v1/core", true}, {"/api/v1/events", false}, {"/api/v1/p/x", false}} {
		resp := do(t, "GET", base+c.path, "", "")
		resp.Body.Close()
		if got := <-busy; got != c.want {
			t.Errorf("%s: busy %v while answered, want %v", c.path, got, c.want)
		}
	}
	if foreground.Busy() {
		t.Error("busy after every request was answered")
	}
}
