// Package table is the SoftAP transport's session table without HTTP: which protocomm
// session a request belongs to (its keep-alive connection, or the `session` cookie set on
// the first answer and sent back by clients that reconnect) and the exchange itself, with
// the status code ESP-IDF's clients read (200 an answer, 400 the protocol's refusal, 500 a
// device fault). softap serves it over net/http; the ble plugin over the ABI's portal
// routes, where net/http would only weigh down the module.
package table

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"devhost/plugins/ble/protocomm"
)

// MaxSessions bounds the table.
const MaxSessions = 4

// CookieName is the session cookie.
const CookieName = "session"

// Table answers exchanges with the handler that Handler returns (nil: provisioning is not
// running, and the endpoints are absent).
type Table struct {
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

// Answer is an exchange's outcome: Status 200 with Body, or an error status with the
// reason as Body; SetCookie, when not empty, is the session cookie to send (its value).
type Answer struct {
	Status    int
	Body      []byte
	SetCookie string
}

// ErrAbsent is an exchange while provisioning is not running or for no endpoint.
var ErrAbsent = errors.New("softap: no such endpoint")

// Exchange answers one request to endpoint ep (without the leading slash) from the client
// at remote (address and port) that sent the session cookie value cookie ("" for none).
func (t *Table) Exchange(remote, cookie, ep string, body []byte) (Answer, error) {
	h := t.Handler()
	if h == nil || !IsEndpoint("/"+ep) {
		return Answer{}, ErrAbsent
	}
	e, id, fresh := t.session(h, remote, cookie)
	a := Answer{}
	if fresh {
		a.SetCookie = id
	}
	e.mu.Lock()
	out, err := h.Handle(e.s, ep, body)
	e.mu.Unlock()
	if err != nil {
		// The protocol's refusal: anything but 200 fails the client's exchange.
		a.Status, a.Body = 400, []byte(err.Error())
		if !errors.Is(err, protocomm.ErrProto) && !errors.Is(err, protocomm.ErrPoP) &&
			!errors.Is(err, protocomm.ErrSession) && !errors.Is(err, protocomm.ErrScheme) {
			a.Status = 500
		}
		return a, nil
	}
	a.Status, a.Body = 200, out
	return a, nil
}

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

// Cookie is the session cookie's value in a Cookie header ("" when absent).
func Cookie(header string) string {
	for _, part := range strings.Split(header, ";") {
		if name, value, ok := strings.Cut(strings.TrimSpace(part), "="); ok && name == CookieName {
			return strings.Trim(value, `"`)
		}
	}
	return ""
}

func (t *Table) now() time.Time {
	if t.Now == nil {
		return time.Now()
	}
	return t.Now()
}

// session finds the request's session or makes one; fresh reports a new cookie to send.
func (t *Table) session(h *protocomm.Handler, remote, cookie string) (*entry, string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.owner != h || t.sessions == nil {
		// Provisioning restarted: sessions of the last run mean nothing now.
		t.owner, t.sessions = h, map[string]*entry{}
	}
	now := t.now()
	if cookie != "" {
		if e, ok := t.sessions["c:"+cookie]; ok {
			e.used = now
			return e, cookie, false
		}
	}
	if e, ok := t.sessions["a:"+remote]; ok {
		e.used = now
		return e, "", false
	}
	id := newID()
	e := &entry{s: h.NewSession(), used: now}
	if len(t.sessions) >= 2*MaxSessions {
		t.evictLocked()
	}
	// One session, two keys: the connection and the cookie.
	t.sessions["c:"+id] = e
	t.sessions["a:"+remote] = e
	return e, id, true
}

// evictLocked drops the session idle longest (both its keys).
func (t *Table) evictLocked() {
	var oldest *entry
	for _, e := range t.sessions {
		if oldest == nil || e.used.Before(oldest.used) {
			oldest = e
		}
	}
	for k, e := range t.sessions {
		if e == oldest {
			delete(t.sessions, k)
		}
	}
}

// Sessions is the number of sessions held.
func (t *Table) Sessions() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := map[*entry]bool{}
	for _, e := range t.sessions {
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
