package auth

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"devhost/host/api/apitest"
	"github.com/jonboulle/clockwork"
)

const (
	testKey   = "correct horse battery"
	portalIP  = "127.4.1.1"
	stationIP = "127.0.0.1"
	testHost  = "dev.local"
)

// fakeCounter is the recovery counter's non-volatile storage.
type fakeCounter struct {
	mu      sync.Mutex
	n       int
	loads   int
	saves   []int
	loadErr error
	saved   chan int
}

func newFakeCounter() *fakeCounter { return &fakeCounter{saved: make(chan int, 16)} }

func (c *fakeCounter) Load() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loads++
	if c.loadErr != nil {
		return 0, c.loadErr
	}
	return c.n, nil
}

func (c *fakeCounter) Save(n int) error {
	c.mu.Lock()
	c.n = n
	c.saves = append(c.saves, n)
	c.mu.Unlock()
	c.saved <- n
	return nil
}

func (c *fakeCounter) value() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func (c *fakeCounter) writes() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.saves...)
}

// env holds the live settings an Auth reads through its Options functions.
type env struct {
	clock  *clockwork.FakeClock
	mu     sync.Mutex
	key    string
	ttl    time.Duration
	portal string
}

func (e *env) setKey(k string) { e.mu.Lock(); e.key = k; e.mu.Unlock() }
func (e *env) setTTL(d time.Duration) {
	e.mu.Lock()
	e.ttl = d
	e.mu.Unlock()
}
func (e *env) setPortal(ip string) { e.mu.Lock(); e.portal = ip; e.mu.Unlock() }

func (e *env) options() Options {
	return Options{
		Clock:      e.clock,
		Key:        func() string { e.mu.Lock(); defer e.mu.Unlock(); return e.key },
		SessionTTL: func() time.Duration { e.mu.Lock(); defer e.mu.Unlock(); return e.ttl },
		PortalIP:   func() string { e.mu.Lock(); defer e.mu.Unlock(); return e.portal },
		Recovery:   true,
	}
}

func newEnv(key string) *env {
	return &env{clock: clockwork.NewFakeClock(), key: key, ttl: DefaultSessionTTL, portal: portalIP}
}

// newAuth builds an Auth on a fresh env; tweak adjusts the options.
func newAuth(t *testing.T, key string, tweak func(*Options)) (*Auth, *env) {
	t.Helper()
	e := newEnv(key)
	o := e.options()
	if tweak != nil {
		tweak(&o)
	}
	return New(o), e
}

// request builds a request that arrived on the local address ip, with header pairs.
func request(method, localIP string, body string, hdr ...string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, "http://"+testHost+"/api/v1/thing", rd)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	if localIP != "" {
		addr := &net.TCPAddr{IP: net.ParseIP(localIP), Port: 80}
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
	}
	return r
}

func bearerHdr(k string) []string { return []string{"Authorization", "Bearer " + k} }

func cookieHdr(id string) []string { return []string{"Cookie", CookieName + "=" + id} }

// errCode returns the status and code of an *api.Error, 0 and "" for nil.
func errCode(t *testing.T, err error) (int, string) {
	t.Helper()
	if err == nil {
		return 0, ""
	}
	e := apitest.Err(t, err)
	return e.Status, e.Code
}

// login performs POST /auth/login and returns the recorder.
func login(a *Auth, body string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := request(http.MethodPost, stationIP, body, "Content-Type", "application/json")
	a.handleLogin(w, r)
	return w
}

// mustLogin logs in with testKey and returns the session id.
func mustLogin(t *testing.T, a *Auth) string {
	t.Helper()
	w := login(a, `{"key":"`+testKey+`"}`)
	if w.Code != http.StatusNoContent {
		t.Fatalf("login = %d %s", w.Code, w.Body)
	}
	c, err := http.ParseSetCookie(w.Header().Get("Set-Cookie"))
	if err != nil {
		t.Fatalf("parse Set-Cookie: %v", err)
	}
	return c.Value
}

// cookieOK reports whether the session id lets a GET through.
func cookieOK(t *testing.T, a *Auth, id string) bool {
	t.Helper()
	m, err := a.Check(request(http.MethodGet, stationIP, "", cookieHdr(id)...))
	if err == nil && m != MethodCookie {
		t.Fatalf("cookie check passed with method %q", m)
	}
	return err == nil
}
