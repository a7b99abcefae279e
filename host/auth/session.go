package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/api"
)

// session is one slot of the RAM session table; id "" marks a free slot.
type session struct {
	id       string
	created  time.Time
	expires  time.Time // created + the TTL at login, the cookie's Max-Age
	lastUsed time.Time
	// ended is closed when the session is dropped (logout, eviction, key change), ending the
	// streams it opened.
	ended chan struct{}
}

// live reports whether the slot holds a session that has not expired under the current TTL.
func (s *session) live(now time.Time, ttl time.Duration) bool {
	return s.id != "" && now.Before(s.expires) && now.Before(s.created.Add(ttl))
}

// sessionTTL is httpd.session_ttl_s, with the default for a value under one second.
func (a *Auth) sessionTTL() time.Duration {
	d := a.ttl()
	if d < time.Second {
		return DefaultSessionTTL
	}
	return d
}

// newSession issues a session, evicting the one idle longest when the table is full.
func (a *Auth) newSession(ttl time.Duration) string {
	var raw [sessionIDBytes]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails (it crashes the program instead)
	id := hex.EncodeToString(raw[:])

	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock.Now()
	slot := -1
	for i := range a.sessions {
		if !a.sessions[i].live(now, ttl) {
			slot = i
			break
		}
	}
	if slot < 0 {
		slot = 0
		for i := range a.sessions {
			if a.sessions[i].lastUsed.Before(a.sessions[slot].lastUsed) {
				slot = i
			}
		}
		a.log.Info("session table full; evicted the session idle longest",
			"idle_s", int(now.Sub(a.sessions[slot].lastUsed)/time.Second))
	}
	a.endLocked(slot)
	a.sessions[slot] = session{id: id, created: now, expires: now.Add(ttl), lastUsed: now, ended: make(chan struct{})}
	return id
}

// sessionCookies returns the values of the first few dev_sid cookies of r.
func sessionCookies(r *http.Request) []string {
	var vals []string
	for _, c := range r.CookiesNamed(CookieName) {
		if len(vals) == maxCookiesConsidered {
			break
		}
		vals = append(vals, c.Value)
	}
	return vals
}

// findLocked returns the slot of the live session with this id, or -1. Every slot is compared
// in constant time, whatever matches. Callers hold a.mu.
func (a *Auth) findLocked(id string, now time.Time, ttl time.Duration) int {
	found := -1
	for i := range a.sessions {
		s := &a.sessions[i]
		match := ctEqual(id, s.id, sessionIDLen)
		if match && s.live(now, ttl) {
			found = i
		}
	}
	return found
}

// cookieAuth accepts a request by its session cookie. needOrigin asks for the origin check
// of state-changing requests; a refused request does not count as a use of the session.
func (a *Auth) cookieAuth(r *http.Request, needOrigin bool) error {
	ids := sessionCookies(r)
	if len(ids) == 0 {
		return errUnauthorized("a valid key or session is required")
	}
	originOK := !needOrigin || sameOrigin(r)
	ttl := a.sessionTTL()

	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clock.Now()
	for _, id := range ids {
		i := a.findLocked(id, now, ttl)
		if i < 0 {
			continue
		}
		if !originOK {
			return &api.Error{Status: http.StatusForbidden, Code: api.CodeForbidden,
				Message: "cross-origin request refused"}
		}
		a.sessions[i].lastUsed = now
		return nil
	}
	return errUnauthorized("session expired or unknown")
}

// dropSession ends the sessions named by r's cookies.
func (a *Auth) dropSessions(r *http.Request) {
	ids := sessionCookies(r)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		for i := range a.sessions {
			if a.sessions[i].id != "" && ctEqual(id, a.sessions[i].id, sessionIDLen) {
				a.endLocked(i)
			}
		}
	}
}

// KeyChanged ends every session at once. The device calls it whenever httpd.api_key is
// changed or cleared.
func (a *Auth) KeyChanged() {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for i := range a.sessions {
		if a.sessions[i].id != "" {
			n++
		}
		a.endLocked(i)
	}
	// Every credential accepted before (the old key, a dropped session, no key at all) is
	// void: streams opened with one end.
	close(a.keyEpoch)
	a.keyEpoch = make(chan struct{})
	if n > 0 {
		a.log.Info("API key changed; sessions dropped", "sessions", n)
	}
}

// endLocked frees slot i and ends the streams its session opened. Callers hold a.mu.
func (a *Auth) endLocked(i int) {
	if a.sessions[i].ended != nil {
		close(a.sessions[i].ended)
	}
	a.sessions[i] = session{}
}

// Scope returns a context derived from ctx that ends when the credential r was accepted with
// stops being valid: at any change of the key (which voids the old key, every session and
// open access alike) and, for a request authenticated by its session cookie, when that
// session is dropped or reaches the end of its lifetime. The HTTP server runs long-lived streams (GET /events) under it, so a
// stream never outlives its credential. cancel releases the watcher and must be called.
func (a *Auth) Scope(ctx context.Context, r *http.Request) (context.Context, context.CancelFunc) {
	a.mu.Lock()
	epoch := a.keyEpoch
	var ended chan struct{}
	var life clockwork.Timer // the session's end of life; nil without a session
	if _, hasBearer := bearer(r); !hasBearer {
		now, ttl := a.clock.Now(), a.sessionTTL()
		for _, id := range sessionCookies(r) {
			if i := a.findLocked(id, now, ttl); i >= 0 {
				s := a.sessions[i]
				ended = s.ended
				end := s.expires
				if e := s.created.Add(ttl); e.Before(end) {
					end = e
				}
				life = a.clock.NewTimer(end.Sub(now))
				break
			}
		}
	}
	a.mu.Unlock()
	var expiry <-chan time.Time // nil (blocks forever) without a session
	if life != nil {
		expiry = life.Chan()
	}
	sctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-epoch:
		case <-ended: // nil unless a session carried the request
		case <-expiry:
		case <-sctx.Done():
		}
		if life != nil {
			life.Stop()
		}
		cancel()
	}()
	return sctx, cancel
}
