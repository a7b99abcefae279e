package auth

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"time"

	"devhost/host/api"
)

// session is one slot of the RAM session table; id "" marks a free slot.
type session struct {
	id       string
	created  time.Time
	expires  time.Time // created + the TTL at login, the cookie's Max-Age
	lastUsed time.Time
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
	a.sessions[slot] = session{id: id, created: now, expires: now.Add(ttl), lastUsed: now}
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
				a.sessions[i] = session{}
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
		a.sessions[i] = session{}
	}
	if n > 0 {
		a.log.Info("API key changed; sessions dropped", "sessions", n)
	}
}
