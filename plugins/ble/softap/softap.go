// Package softap is protocomm's HTTP transport, as ESP-IDF's protocomm_httpd serves it on
// the setup access point: POST /<endpoint> at the root, the raw protobuf as the body (the
// clients label it application/x-www-form-urlencoded and ask for text/plain; both labels are
// ignored), 200 for an answer and nothing else counts as success.
//
// A security session belongs to the client's keep-alive connection (its remote address and
// port) or, for clients that reconnect between requests, to the `session` cookie set on the
// first prov-session answer and sent back. The table holds MaxSessions; a new one evicts the
// session idle longest.
package softap

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"devhost/plugins/ble/protocomm"
)

// MaxSessions bounds the session table.
const MaxSessions = 4

// MaxBody bounds a request body: the largest protocomm message (a scan result page) is far
// below it.
const MaxBody = 4096

// CookieName is the session cookie.
const CookieName = "session"

// IsEndpoint reports whether path is one of the provisioning endpoints at the root.
func IsEndpoint(path string) bool {
	name, ok := strings.CutPrefix(path, "/")
	if !ok {
		return false
	}
	for _, ep := range protocomm.Endpoints {
		if ep == name {
			return true
		}
	}
	return false
}

// Server answers the endpoints with the handler that Handler returns (nil: provisioning is
// not running, and the paths are absent).
type Server struct {
	Handler func() *protocomm.Handler
	Now     func() time.Time // nil: time.Now

	mu       sync.Mutex
	sessions map[string]*entry
	owner    *protocomm.Handler // the handler the sessions belong to
}

type entry struct {
	s    *protocomm.Session
	mu   sync.Mutex // one exchange at a time per session
	used time.Time
}

func (s *Server) now() time.Time {
	if s.Now == nil {
		return time.Now()
	}
	return s.Now()
}

// ServeHTTP answers one exchange.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := s.Handler()
	if h == nil || !IsEndpoint(r.URL.Path) {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		http.Error(w, "request body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	ep := strings.TrimPrefix(r.URL.Path, "/")
	e, id, fresh := s.session(h, r)
	if fresh {
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: "/", HttpOnly: true})
	}
	e.mu.Lock()
	out, err := h.Handle(e.s, ep, body)
	e.mu.Unlock()
	if err != nil {
		// The protocol's refusal: anything but 200 fails the client's exchange.
		status := http.StatusBadRequest
		if !errors.Is(err, protocomm.ErrProto) && !errors.Is(err, protocomm.ErrPoP) &&
			!errors.Is(err, protocomm.ErrSession) && !errors.Is(err, protocomm.ErrScheme) {
			status = http.StatusInternalServerError
		}
		http.Error(w, err.Error(), status)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

// session finds the request's session or makes one; fresh reports a new cookie to send.
func (s *Server) session(h *protocomm.Handler, r *http.Request) (*entry, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner != h || s.sessions == nil {
		// Provisioning restarted: sessions of the last run mean nothing now.
		s.owner, s.sessions = h, map[string]*entry{}
	}
	now := s.now()
	if c, err := r.Cookie(CookieName); err == nil {
		if e, ok := s.sessions["c:"+c.Value]; ok {
			e.used = now
			return e, c.Value, false
		}
	}
	if e, ok := s.sessions["a:"+r.RemoteAddr]; ok {
		e.used = now
		return e, "", false
	}
	id := newID()
	e := &entry{s: h.NewSession(), used: now}
	if len(s.sessions) >= 2*MaxSessions {
		s.evictLocked()
	}
	// One session, two keys: the connection and the cookie.
	s.sessions["c:"+id] = e
	s.sessions["a:"+r.RemoteAddr] = e
	return e, id, true
}

// evictLocked drops the session idle longest (both its keys).
func (s *Server) evictLocked() {
	var oldest *entry
	for _, e := range s.sessions {
		if oldest == nil || e.used.Before(oldest.used) {
			oldest = e
		}
	}
	for k, e := range s.sessions {
		if e == oldest {
			delete(s.sessions, k)
		}
	}
}

// Sessions is the number of sessions held.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[*entry]bool{}
	for _, e := range s.sessions {
		seen[e] = true
	}
	return len(seen)
}

func newID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		// crypto/rand does not fail on supported platforms; a time-based id still separates
		// sessions.
		return fmt.Sprintf("t%x", time.Now().UnixNano())
	}
	return hex.EncodeToString(b)
}

// Exchange is the client side: one POST per exchange on one keep-alive client that keeps
// the cookie (devctl prov and the tests).
func Exchange(c *http.Client, base string) protocomm.Exchange {
	base = strings.TrimSuffix(base, "/")
	return func(ep string, body []byte) ([]byte, error) {
		req, err := http.NewRequest(http.MethodPost, base+"/"+ep, strings.NewReader(string(body)))
		if err != nil {
			return nil, fmt.Errorf("request: %w", err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "text/plain")
		resp, err := c.Do(req)
		if err != nil {
			return nil, fmt.Errorf("post %s: %w", ep, err)
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", ep, err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: %s: %s", ep, resp.Status, strings.TrimSpace(string(out)))
		}
		return out, nil
	}
}
