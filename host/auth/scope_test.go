package auth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func ended(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// waitEnded waits for a scope to end: the watcher runs in its own goroutine.
func waitEnded(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	<-ctx.Done()
	if ctx.Err() == nil {
		t.Fatalf("%s: scope not ended", what)
	}
}

// TestScopeEndsWithTheCredential is defect 4: a stream opened with the old key, with a session
// that was dropped, or without a key (open mode) ends when its credential becomes void.
func TestScopeEndsWithTheCredential(t *testing.T) {
	bearer := func(*testing.T, *Auth) []string { return bearerHdr(testKey) }
	for _, c := range []struct {
		name        string
		key, newKey string // the key when the stream opens, and the one it changes to
		hdr         func(*testing.T, *Auth) []string
		what        string
	}{
		{"bearer with the old key, key changed", testKey, "another good key", bearer, "bearer"},
		{"bearer, key cleared", testKey, "", bearer, "bearer"},
		{"open mode, key set", "", testKey, func(*testing.T, *Auth) []string { return nil }, "open"},
		{"cookie, key changed", testKey, "another good key", func(t *testing.T, a *Auth) []string { return cookieHdr(mustLogin(t, a)) }, "cookie"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, e := newAuth(t, c.key, nil)
			ctx, cancel := a.Scope(context.Background(), request(http.MethodGet, stationIP, "", c.hdr(t, a)...))
			defer cancel()
			e.setKey(c.newKey)
			a.KeyChanged()
			waitEnded(t, ctx, c.what)
		})
	}
	t.Run("cookie, session logged out; other sessions untouched", func(t *testing.T) {
		a, _ := newAuth(t, testKey, nil)
		id, other := mustLogin(t, a), mustLogin(t, a)
		ctx, cancel := a.Scope(context.Background(), request(http.MethodGet, stationIP, "", cookieHdr(id)...))
		defer cancel()
		octx, ocancel := a.Scope(context.Background(), request(http.MethodGet, stationIP, "", cookieHdr(other)...))
		defer ocancel()
		w := httptest.NewRecorder()
		a.handleLogout(w, request(http.MethodPost, stationIP, "", append(cookieHdr(id), "Content-Type", "application/json")...))
		waitEnded(t, ctx, "logged-out cookie")
		if ended(octx) {
			t.Fatal("another session's stream ended")
		}
	})
	t.Run("cookie, session evicted by a fifth login", func(t *testing.T) {
		a, e := newAuth(t, testKey, nil)
		id := mustLogin(t, a)
		ctx, cancel := a.Scope(context.Background(), request(http.MethodGet, stationIP, "", cookieHdr(id)...))
		defer cancel()
		for range MaxSessions {
			e.clock.Advance(1)
			mustLogin(t, a)
		}
		waitEnded(t, ctx, "evicted cookie")
	})
}

func TestScopeCancelReleases(t *testing.T) {
	a, _ := newAuth(t, testKey, nil)
	ctx, cancel := a.Scope(context.Background(), request(http.MethodGet, stationIP, "", bearerHdr(testKey)...))
	cancel()
	waitEnded(t, ctx, "cancelled")
	if context.Cause(ctx) != context.Canceled {
		t.Fatalf("cause %v", context.Cause(ctx))
	}
}

func TestScopeEndsAtTheSessionsLifetime(t *testing.T) {
	a, e := newAuth(t, testKey, nil)
	e.setTTL(time.Hour)
	id := mustLogin(t, a)
	ctx, cancel := a.Scope(context.Background(), request(http.MethodGet, stationIP, "", cookieHdr(id)...))
	defer cancel()
	if err := e.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Hour - time.Second)
	if ended(ctx) {
		t.Fatal("ended before the session's lifetime")
	}
	e.clock.Advance(time.Second)
	waitEnded(t, ctx, "expired session")
}
