package auth

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"devhost/host/api"
)

func TestSessionTableEvictsIdleLongest(t *testing.T) {
	a, e := newAuth(t, testKey, nil)
	ids := map[string]string{}
	for _, n := range []string{"A", "B", "C", "D"} {
		ids[n] = mustLogin(t, a)
		e.clock.Advance(time.Second)
	}
	// Use them in the order C, A, D, B: C is now the one idle longest, though A is older.
	for _, n := range []string{"C", "A", "D", "B"} {
		if !cookieOK(t, a, ids[n]) {
			t.Fatalf("session %s rejected", n)
		}
		e.clock.Advance(time.Second)
	}
	ids["E"] = mustLogin(t, a)
	e.clock.Advance(time.Second)
	if cookieOK(t, a, ids["C"]) {
		t.Fatal("C (idle longest) survived the fifth login")
	}
	for _, n := range []string{"A", "B", "D", "E"} { // this pass leaves A idle longest
		if !cookieOK(t, a, ids[n]) {
			t.Fatalf("session %s was evicted", n)
		}
		e.clock.Advance(time.Second)
	}
	ids["F"] = mustLogin(t, a)
	want := map[string]bool{"A": false, "B": true, "D": true, "E": true, "F": true}
	for n, live := range want {
		if cookieOK(t, a, ids[n]) != live {
			t.Errorf("session %s live = %v, want %v", n, !live, live)
		}
	}
}

func TestSessionLoginReusesExpiredSlotFirst(t *testing.T) {
	a, e := newAuth(t, testKey, nil)
	e.setTTL(100 * time.Second)
	old := mustLogin(t, a)
	e.clock.Advance(50 * time.Second)
	live := []string{mustLogin(t, a), mustLogin(t, a), mustLogin(t, a)}
	e.clock.Advance(60 * time.Second) // old has expired; the three are 60 s old
	live = append(live, mustLogin(t, a))
	for i, id := range live {
		if !cookieOK(t, a, id) {
			t.Fatalf("live session %d evicted while an expired slot was free", i)
		}
	}
	if cookieOK(t, a, old) {
		t.Fatal("expired session accepted")
	}
}

func TestSessionTTLIsAbsolute(t *testing.T) {
	a, e := newAuth(t, testKey, nil)
	e.setTTL(100 * time.Second)
	id := mustLogin(t, a)
	for range 99 { // used every second: use does not extend the lifetime
		e.clock.Advance(time.Second)
		if !cookieOK(t, a, id) {
			t.Fatalf("session refused at %v", e.clock.Since(time.Time{}))
		}
	}
	e.clock.Advance(time.Second)
	_, err := a.Check(request(http.MethodGet, stationIP, "", cookieHdr(id)...))
	if st, code := errCode(t, err); st != http.StatusUnauthorized || code != api.CodeUnauthorized {
		t.Fatalf("expired cookie = %d %s, want 401 unauthorized", st, code)
	}
}

func TestSessionTTLChange(t *testing.T) {
	a, e := newAuth(t, testKey, nil)
	e.setTTL(100 * time.Second)
	id := mustLogin(t, a)
	e.clock.Advance(20 * time.Second)

	e.setTTL(1000 * time.Second) // longer: the issued cookie's lifetime is not stretched
	e.clock.Advance(80 * time.Second)
	if cookieOK(t, a, id) {
		t.Fatal("session outlived the Max-Age it was issued with")
	}

	e.setTTL(100 * time.Second)
	id = mustLogin(t, a)
	e.clock.Advance(20 * time.Second)
	e.setTTL(10 * time.Second) // shorter: applies to live sessions at once
	if cookieOK(t, a, id) {
		t.Fatal("session survived a TTL shortened below its age")
	}
}

func TestStaleAndUnknownCookies(t *testing.T) {
	a, _ := newAuth(t, testKey, nil)
	id := mustLogin(t, a)
	for _, c := range []string{"", "00000000000000000000000000000000", id[:31], id + "0", "x"} {
		_, err := a.Check(request(http.MethodGet, stationIP, "", cookieHdr(c)...))
		if st, _ := errCode(t, err); st != http.StatusUnauthorized {
			t.Errorf("cookie %q = %d, want 401", c, st)
		}
	}
	// A stale cookie beside the live one does not hide it.
	hdr := []string{"Cookie", CookieName + "=ffffffffffffffffffffffffffffffff; " + CookieName + "=" + id}
	if m, err := a.Check(request(http.MethodGet, stationIP, "", hdr...)); err != nil || m != MethodCookie {
		t.Fatalf("stale plus live cookie = %q, %v", m, err)
	}
}

func TestKeyChangedDropsAllSessions(t *testing.T) {
	a, e := newAuth(t, testKey, nil)
	ids := []string{mustLogin(t, a), mustLogin(t, a), mustLogin(t, a)}
	e.setKey("a brand new key")
	a.KeyChanged()
	for i, id := range ids {
		if cookieOK(t, a, id) {
			t.Errorf("session %d survived the key change", i)
		}
	}
	if m, err := a.Check(request(http.MethodGet, stationIP, "", bearerHdr("a brand new key")...)); err != nil || m != MethodBearer {
		t.Fatalf("new key = %q, %v", m, err)
	}
}

func TestConcurrentUse(t *testing.T) {
	a, e := newAuth(t, testKey, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 20 {
				id := mustLogin(t, a)
				_, _ = a.Check(request(http.MethodPost, stationIP, "", cookieHdr(id)...))
				_, _ = a.Status(request(http.MethodGet, portalIP, "", bearerHdr(testKey)...))
				if (i+j)%7 == 0 {
					a.KeyChanged()
					e.clock.Advance(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	n := 0
	for _, s := range a.sessions {
		if s.id != "" {
			n++
		}
	}
	if n > MaxSessions {
		t.Fatalf("%d sessions in a table of %d", n, MaxSessions)
	}
}
