// Package auth owns the device's REST access control: the shared API key and its two
// credentials (stateless Bearer and the dev_sid session cookie), the RAM session table, the
// CSRF origin check for cookie-authenticated writes, the global wrong-key throttle, the
// setup-portal exemption, the lost-key recovery window with its power-cycle counter, and the
// /auth/login, /auth/logout and /auth/status endpoints.
//
// The HTTP server calls Check for every protected route before any handler runs and before the
// body is read, and answers a failure with WriteError (which adds WWW-Authenticate to a 401
// and Retry-After to a 429).
//
// Choices where the specification is silent:
//
//   - The 401 challenge is `WWW-Authenticate: Bearer realm="<realm>"`: the realm is sent as an
//     RFC 7235 quoted-string (quotes and backslashes in it are escaped); the default realm is
//     "dev".
//   - The Authorization scheme is matched case-insensitively (RFC 7235), so `bearer` works.
//     `Bearer` with no token is 401 and is not counted as a wrong key (no key was offered). An
//     Authorization header with another scheme (Basic, Digest) is ignored: the cookie is still
//     looked at, and without one the answer is 401. A Bearer header takes precedence over a
//     cookie on the same request; a wrong Bearer is 401 even when the cookie is live.
//   - A session lives for httpd.session_ttl_s from its login (absolute, like the cookie's
//     Max-Age the browser holds), not from its last use. Shortening the TTL applies to live
//     sessions at once; lengthening it does not stretch sessions already issued. A TTL of zero
//     or less is read as the default of one day. Session ids are 128 random bits in lowercase
//     hex (32 characters).
//   - The origin check applies to cookie-authenticated requests of every method except GET,
//     HEAD and OPTIONS (a superset of PUT, POST and DELETE). It compares the host:port of Origin
//     (or, only when Origin is absent, of Referer) with the Host header exactly, ignoring ASCII
//     case; default ports are not normalised, so `Origin: http://dev.local:80` does not match
//     `Host: dev.local` (browsers never send it so). `Origin: null` or an unparsable value is a
//     mismatch.
//   - Throttle: a wrong key is counted when it is at most 60 s old. The fifth wrong key within
//     60 s starts a 30 s lockout and empties the count, so after the lockout the window starts
//     afresh. Key checks during the lockout are answered 429 without being compared or counted.
//     Retry-After carries the whole seconds left, rounded up.
//   - GET /auth/status carrying a Bearer during a lockout is a key check too and answers 429.
//     In open mode (no key) a station-side request reports authenticated false and method none
//     (it carried no credential and needed none); a portal request with no key reports
//     authenticated true and method portal.
//   - Login checks, in order: no key configured (409 auth_open), the body (400 validation), the
//     lockout (429), the key (401, counted). Any non-empty string is a key attempt; an empty
//     `key` is 401 without being counted, like a Bearer header without a token. Logout needs neither a credential nor an origin check (the cookie is
//     SameSite=Strict and the JSON content type forces a preflight cross-origin).
//   - HTTPD_PORTAL_RECOVERY=n (Options.Recovery false) removes every recovery window: the
//     power-cycle count is never read or written and OpenWindow does nothing. OpenWindow never
//     shortens a window already open.
//   - The recovery counter is cleared after 20 s of uptime on every boot (any reset reason),
//     and only written when it is not already zero, to spare the flash.
package auth

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"devhost/host/api"

	"github.com/jonboulle/clockwork"
)

// Method is how a request was let in.
type Method string

// Methods of the auth status document.
const (
	MethodNone   Method = "none"
	MethodBearer Method = "bearer"
	MethodCookie Method = "cookie"
	MethodPortal Method = "portal"
)

// Limits and names of the specification (HTTPD_* are its build-time constants).
const (
	MaxSessions          = 4                // HTTPD_MAX_SESSIONS
	RecoveryCycles       = 3                // HTTPD_RECOVERY_CYCLES
	RecoveryClear        = 20 * time.Second // HTTPD_RECOVERY_CLEAR_S
	RecoveryWindowS      = 600              // HTTPD_RECOVERY_WINDOW_S
	MaxKeyLen            = 64
	DefaultSessionTTL    = 86400 * time.Second
	ThrottleFailures     = 5
	ThrottleWindow       = 60 * time.Second
	ThrottleLockout      = 30 * time.Second
	CookieName           = "dev_sid"
	DefaultRealm         = "dev"
	sessionIDBytes       = 16
	sessionIDLen         = 2 * sessionIDBytes
	maxCookiesConsidered = 4
)

// CounterStore keeps the recovery power-cycle count in non-volatile storage.
type CounterStore interface {
	Load() (int, error)
	Save(n int) error
}

// Options configure an Auth. Nil functions read as their zero value ("" key, default TTL, no
// portal); a nil Clock is the real clock, a nil Logger discards.
type Options struct {
	Clock  clockwork.Clock
	Logger *slog.Logger
	// Key returns the current httpd.api_key; "" means the API is open.
	Key func() string
	// SessionTTL returns httpd.session_ttl_s.
	SessionTTL func() time.Duration
	// Required is HTTPD_AUTH_REQUIRED.
	Required bool
	// PortalIP returns the access point's IP while the portal is up, "" while it is down.
	PortalIP func() string
	// Recovery is HTTPD_PORTAL_RECOVERY (the device defaults it to true).
	Recovery bool
	// Counter stores the recovery power-cycle count; nil disables power-cycle counting.
	Counter CounterStore
	// PowerOn is true when this boot's reset reason is a power-on.
	PowerOn bool
	// Realm is the WWW-Authenticate realm; "" means DefaultRealm.
	Realm string
}

// Auth is the device's access control. Its methods are safe for concurrent use.
type Auth struct {
	clock    clockwork.Clock
	log      *slog.Logger
	key      func() string
	ttl      func() time.Duration
	required bool
	portalIP func() string
	recovery bool
	counter  CounterStore
	realm    string
	booted   time.Time

	mu        sync.Mutex
	sessions  [MaxSessions]session
	failures  []time.Time // wrong keys of the last ThrottleWindow, oldest first
	lockUntil time.Time
	windowEnd time.Time
	keyEpoch  chan struct{} // closed and replaced by KeyChanged
}

// New builds the access control for this boot. When the boot is a power-on and a key is set it
// counts the power cycle in the recovery counter and, on the third, opens the recovery window.
func New(opts Options) *Auth {
	a := &Auth{
		clock:    opts.Clock,
		log:      opts.Logger,
		key:      opts.Key,
		ttl:      opts.SessionTTL,
		required: opts.Required,
		portalIP: opts.PortalIP,
		recovery: opts.Recovery,
		counter:  opts.Counter,
		realm:    opts.Realm,
	}
	a.clock = cmp.Or(a.clock, clockwork.NewRealClock())
	a.log = cmp.Or(a.log, slog.New(slog.DiscardHandler))
	if a.key == nil {
		a.key = func() string { return "" }
	}
	if a.ttl == nil {
		a.ttl = func() time.Duration { return DefaultSessionTTL }
	}
	if a.portalIP == nil {
		a.portalIP = func() string { return "" }
	}
	a.realm = cmp.Or(a.realm, DefaultRealm)
	a.failures = make([]time.Time, 0, ThrottleFailures)
	a.keyEpoch = make(chan struct{})
	a.booted = a.clock.Now()
	if opts.PowerOn {
		a.countPowerCycle()
	}
	return a
}

// Challenge is the WWW-Authenticate value of every 401.
func (a *Auth) Challenge() string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `Bearer realm="` + r.Replace(a.realm) + `"`
}

// Throttled is the 429 `too_many_attempts` answer; it unwraps to the *api.Error the server
// writes and carries the Retry-After seconds.
type Throttled struct {
	Err        *api.Error
	RetryAfter int
}

func (t *Throttled) Error() string { return t.Err.Error() }

// Unwrap lets errors.As find the *api.Error.
func (t *Throttled) Unwrap() error { return t.Err }

// RetryAfter returns the Retry-After seconds of a throttle answer, 0 for any other error.
func RetryAfter(err error) int {
	var t *Throttled
	if errors.As(err, &t) {
		return t.RetryAfter
	}
	return 0
}

// WriteError answers a failure of Check (or of any auth handler) with the spec's JSON error,
// adding WWW-Authenticate to a 401 and Retry-After to a 429.
func (a *Auth) WriteError(w http.ResponseWriter, err error) {
	var e *api.Error
	if errors.As(err, &e) && e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", a.Challenge())
	}
	if s := RetryAfter(err); s > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(s))
	}
	api.WriteErr(w, err)
}

func errUnauthorized(msg string) *api.Error {
	return &api.Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthorized, Message: msg}
}

// Check decides whether r may reach a protected handler. It reads only the headers and the
// connection's local address, never the body.
func (a *Auth) Check(r *http.Request) (Method, error) {
	return a.check(r, a.key())
}

func (a *Auth) check(r *http.Request, key string) (Method, error) {
	portal := a.fromPortal(r)
	if key == "" {
		switch {
		case portal:
			return MethodPortal, nil
		case a.required:
			return MethodNone, &api.Error{Status: http.StatusForbidden, Code: api.CodeAuthUnconfigured,
				Message: "a key must be set from the setup portal first"}
		default:
			return MethodNone, nil
		}
	}
	// The recovery window exempts the portal network before any credential or lockout is
	// looked at: a locked-out owner must still be able to set a new key there.
	if portal && a.windowOpen() {
		return MethodPortal, nil
	}
	if token, ok := bearer(r); ok {
		if err := a.checkKey(token, key); err != nil {
			return MethodNone, err
		}
		return MethodBearer, nil
	}
	if err := a.cookieAuth(r, !safeMethod(r.Method)); err != nil {
		return MethodNone, err
	}
	return MethodCookie, nil
}

// bearer extracts the token of an `Authorization: Bearer` header. ok is false when the header
// is absent or uses another scheme; a Bearer header without a token is ok with token "".
func bearer(r *http.Request) (token string, ok bool) {
	var h string
	// The name is already canonical: indexing skips Get's canonicalisation on every request.
	if vs := r.Header["Authorization"]; len(vs) > 0 {
		h = vs[0]
	}
	scheme, rest, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.Trim(rest, " \t"), true
}

// checkKey is one key check: refused during a lockout, counted when wrong.
func (a *Auth) checkKey(offered, key string) error {
	if offered == "" {
		return errUnauthorized("no key offered")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// The clock is read only when a lockout is set or a key was wrong: a read costs about a
	// quarter of a microsecond on a virtual machine's clock source, a noticeable part of an
	// authenticated GET's own work, and the right key outside a lockout needs no time.
	if !a.lockUntil.IsZero() {
		now := a.clock.Now()
		if now.Before(a.lockUntil) {
			return a.throttled(now)
		}
		a.lockUntil = time.Time{} // over
	}
	if ctEqual(offered, key, MaxKeyLen) {
		return nil
	}
	a.countFailure(a.clock.Now())
	return errUnauthorized("wrong key")
}

func (a *Auth) throttled(now time.Time) error {
	left := a.lockUntil.Sub(now)
	secs := int((left + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	return &Throttled{
		Err:        &api.Error{Status: http.StatusTooManyRequests, Code: api.CodeTooManyAttempts, Message: "too many wrong keys"},
		RetryAfter: secs,
	}
}

// countFailure records a wrong key and starts the lockout at the fifth within the window.
// Callers hold a.mu.
func (a *Auth) countFailure(now time.Time) {
	keep := a.failures[:0]
	for _, t := range a.failures {
		if now.Sub(t) < ThrottleWindow {
			keep = append(keep, t)
		}
	}
	a.failures = append(keep, now)
	if len(a.failures) >= ThrottleFailures {
		a.failures = a.failures[:0]
		a.lockUntil = now.Add(ThrottleLockout)
		a.log.Warn("wrong API key limit reached; key checks locked",
			"failures", ThrottleFailures, "lockout_s", int(ThrottleLockout/time.Second))
		return
	}
	a.log.Info("wrong API key", "failures_in_window", len(a.failures))
}

// fromPortal reports whether the request arrived on the access point's address.
// OnPortal reports whether r arrived on the setup portal network (its local address is the
// access point's IP), as the portal exemption decides it.
func (a *Auth) OnPortal(r *http.Request) bool { return a.fromPortal(r) }

func (a *Auth) fromPortal(r *http.Request) bool {
	ps := a.portalIP()
	if ps == "" { // the portal is down: the common case, decided without parsing
		return false
	}
	pip := net.ParseIP(ps)
	if pip == nil {
		return false
	}
	addr, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if addr == nil {
		return false
	}
	var ip net.IP
	switch v := addr.(type) {
	case *net.TCPAddr:
		ip = v.IP
	default:
		host, _, err := net.SplitHostPort(addr.String())
		if err != nil {
			host = addr.String()
		}
		ip = net.ParseIP(host)
	}
	return ip != nil && ip.Equal(pip)
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// sameOrigin implements the origin rule: the host:port of Origin, else of Referer, must equal
// Host.
func sameOrigin(r *http.Request) bool {
	src := r.Header.Get("Origin")
	if src == "" {
		src = r.Header.Get("Referer")
	}
	if src == "" {
		return false
	}
	host := urlHost(src)
	return host != "" && r.Host != "" && strings.EqualFold(host, r.Host)
}

// urlHost returns the host[:port] of an absolute http(s) URL, "" when it has none.
func urlHost(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User != nil || u.Opaque != "" {
		return ""
	}
	if !strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https") {
		return ""
	}
	return u.Host
}

// Run clears the recovery power-cycle count once this boot has lasted HTTPD_RECOVERY_CLEAR_S,
// then returns; it returns early when ctx ends. Storage failures are logged, never returned:
// they must not stop the device, so the result is always nil.
func (a *Auth) Run(ctx context.Context) error {
	if wait := RecoveryClear - a.clock.Since(a.booted); wait > 0 {
		t := a.clock.NewTimer(wait)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil
		case <-t.Chan():
		}
	}
	a.clearPowerCycles()
	return nil
}
