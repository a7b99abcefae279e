package auth

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/api"
)

func wrongBearer(t *testing.T, a *Auth) {
	t.Helper()
	_, err := a.Check(request(http.MethodGet, stationIP, "", bearerHdr("wrong key #1")...))
	if st, _ := errCode(t, err); st != http.StatusUnauthorized {
		t.Fatalf("wrong Bearer = %d (%v), want 401", st, err)
	}
}

func rightBearer(a *Auth) error {
	_, err := a.Check(request(http.MethodGet, stationIP, "", bearerHdr(testKey)...))
	return err
}

func TestThrottleLocksAfterFiveWrongKeys(t *testing.T) {
	a, e := newAuth(t, testKey, nil)
	cookie := mustLogin(t, a)
	for range 5 {
		wrongBearer(t, a) // the fifth is still answered 401
		e.clock.Advance(10 * time.Second)
	}
	// The lockout started at the fifth (t=40 s); now is t=50 s.
	err := rightBearer(a)
	if st, code := errCode(t, err); st != http.StatusTooManyRequests || code != api.CodeTooManyAttempts {
		t.Fatalf("right key during lockout = %d %s", st, code)
	}
	if got := RetryAfter(err); got != 20 {
		t.Fatalf("Retry-After = %d, want 20", got)
	}

	// Login with the right key is refused too, with the header.
	w := login(a, `{"key":"`+testKey+`"}`)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "20" {
		t.Fatalf("login during lockout = %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	assertErrBody(t, w, api.CodeTooManyAttempts)

	// A status request with a Bearer is a key check as well.
	w = httptest.NewRecorder()
	a.handleStatus(w, request(http.MethodGet, stationIP, "", bearerHdr(testKey)...))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "20" {
		t.Fatalf("status with Bearer during lockout = %d", w.Code)
	}

	// Live cookies keep working, writes included.
	if m, err := a.Check(request(http.MethodPost, stationIP, "", append(cookieHdr(cookie), "Origin", "http://dev.local")...)); err != nil || m != MethodCookie {
		t.Fatalf("cookie during lockout = %q, %v", m, err)
	}

	e.clock.Advance(19*time.Second + 500*time.Millisecond)
	if got := RetryAfter(rightBearer(a)); got != 1 {
		t.Fatalf("Retry-After with 0.5 s left = %d, want 1 (rounded up)", got)
	}
	e.clock.Advance(500 * time.Millisecond)
	if err := rightBearer(a); err != nil {
		t.Fatalf("right key after the lockout: %v", err)
	}
	// The lockout emptied the count: four more wrong keys do not lock again.
	for range 4 {
		wrongBearer(t, a)
	}
	if err := rightBearer(a); err != nil {
		t.Fatalf("four wrong after a lockout locked: %v", err)
	}
	wrongBearer(t, a)
	if RetryAfter(rightBearer(a)) != 30 {
		t.Fatal("the fifth wrong key of the new window did not lock for 30 s")
	}
}

func TestThrottleFullLockoutIsThirtySeconds(t *testing.T) {
	a, e := newAuth(t, testKey, nil)
	for range 5 {
		wrongBearer(t, a)
	}
	if got := RetryAfter(rightBearer(a)); got != 30 {
		t.Fatalf("Retry-After = %d, want 30", got)
	}
	w := httptest.NewRecorder()
	a.WriteError(w, rightBearer(a))
	if w.Header().Get("Retry-After") != "30" || w.Header().Get("WWW-Authenticate") != "" {
		t.Fatalf("429 headers %v", w.Header())
	}
	// Wrong keys during the lockout are not counted and do not extend it.
	for range 10 {
		_ = a.checkKey("wrong", testKey)
	}
	e.clock.Advance(30 * time.Second)
	if err := rightBearer(a); err != nil {
		t.Fatalf("after 30 s: %v", err)
	}
}

func TestThrottleSlidingWindow(t *testing.T) {
	a, e := newAuth(t, testKey, nil)
	start := e.clock.Now()
	at := func(s int) { e.clock.Advance(start.Add(time.Duration(s) * time.Second).Sub(e.clock.Now())) }
	// Five wrong keys spread over more than 60 s: the first has left the window at the fifth.
	for _, s := range []int{0, 15, 30, 45, 61} {
		at(s)
		wrongBearer(t, a)
	}
	if err := rightBearer(a); err != nil {
		t.Fatalf("five wrong keys over 61 s locked: %v", err)
	}
	// One more at 62 s makes five within 60 s (15, 30, 45, 61, 62).
	at(62)
	wrongBearer(t, a)
	if got := RetryAfter(rightBearer(a)); got != 30 {
		t.Fatalf("Retry-After = %d, want 30", got)
	}
}

func TestThrottleCountsLoginBearerAndStatusTogether(t *testing.T) {
	a, _ := newAuth(t, testKey, nil)
	wrongBearer(t, a)
	wrongBearer(t, a)
	for range 2 {
		if w := login(a, `{"key":"wrong key #2"}`); w.Code != http.StatusUnauthorized {
			t.Fatalf("wrong login = %d", w.Code)
		}
	}
	w := httptest.NewRecorder()
	a.handleStatus(w, request(http.MethodGet, stationIP, "", bearerHdr("wrong key #3")...))
	if w.Code != http.StatusOK {
		t.Fatalf("status with wrong Bearer = %d", w.Code)
	}
	if got := RetryAfter(rightBearer(a)); got != 30 {
		t.Fatalf("after 2 Bearer + 2 login + 1 status wrong keys: Retry-After %d, want 30", got)
	}
}

// countingClock counts the reads of its time.
type countingClock struct {
	*clockwork.FakeClock
	reads atomic.Int32
}

func (c *countingClock) Now() time.Time { c.reads.Add(1); return c.FakeClock.Now() }

// The right key outside a lockout is checked without reading the clock (a read costs a
// noticeable part of an authenticated request on a virtual machine's clock source); a
// lockout still holds and still ends on time, after which the clock is left alone again.
func TestRightKeyReadsNoClock(t *testing.T) {
	clk := &countingClock{FakeClock: clockwork.NewFakeClock()}
	a, _ := newAuth(t, testKey, func(o *Options) { o.Clock = clk })
	reads := func() int32 { return clk.reads.Swap(0) }
	reads()
	if err := rightBearer(a); err != nil || reads() != 0 {
		t.Fatalf("right key: %v, the clock read", err)
	}
	for range 5 {
		wrongBearer(t, a)
	}
	if st, _ := errCode(t, rightBearer(a)); st != http.StatusTooManyRequests {
		t.Fatalf("right key during the lockout = %d, want 429", st)
	}
	clk.Advance(ThrottleLockout)
	if err := rightBearer(a); err != nil {
		t.Fatalf("right key after the lockout: %v", err)
	}
	reads()
	if err := rightBearer(a); err != nil || reads() != 0 {
		t.Fatalf("right key once the lockout ended: %v, the clock read", err)
	}
}
