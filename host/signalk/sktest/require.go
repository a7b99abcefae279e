package sktest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

func insecureTLS() *tls.Config {
	// The harness's own admin calls to its own loopback server; the device never uses this.
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec
}

// Required reports whether a missing or failing server is a test failure rather than a skip:
// in CI (CI=true) and under `make test` (SKTEST_REQUIRED=1), which installs the server first.
func Required() bool { return os.Getenv("CI") == "true" || os.Getenv("SKTEST_REQUIRED") == "1" }

// unavailable skips t when the server is optional and fails it when it is required.
func unavailable(t testing.TB, err error) {
	t.Helper()
	if Required() {
		t.Fatalf("the real Signal K server is required here (CI=true or SKTEST_REQUIRED=1): %v", err)
	}
	t.Skipf("skipping: the real Signal K server is not available here: %v", err)
}

// installTimeout bounds an install from scratch (about a minute measured).
const installTimeout = 8 * time.Minute

var installOnce struct {
	sync.Mutex
	done bool
	dir  string
	err  error
}

// Ensure installs the server once per test binary (cached across runs and binaries) and
// answers the install folder. A failure skips t locally and fails it under CI=true. Under
// -short (the fast loop) every test that needs the real server is skipped.
func Ensure(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("skipping: the real Signal K server is not started under -short")
	}
	installOnce.Lock()
	defer installOnce.Unlock()
	if !installOnce.done {
		installOnce.dir, installOnce.err = Prepare(context.Background(), testLog{t})
		installOnce.done = true
	}
	if installOnce.err != nil {
		unavailable(t, installOnce.err)
	}
	return installOnce.dir
}

type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Logf("%s", p)
	return len(p), nil
}

// Require starts a fresh server for t (stopped when t ends). Prefer Shared: a start costs
// about 3 s.
func Require(t testing.TB, opts Options) *Server {
	t.Helper()
	opts.Dir = Ensure(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	s, err := Start(ctx, opts)
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			unavailable(t, err)
		}
		t.Fatalf("start signalk-server: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("signalk-server log:\n%s", s.LogTail(4000))
		}
		_ = s.Stop()
	})
	return s
}

var shared struct {
	sync.Mutex
	srv *Server
	err error
}

// Shared answers the test binary's one plain-http server, started on first use and stopped by
// Main. Tests sharing it use their own client ids, so they do not see each other's requests.
func Shared(t testing.TB) *Server {
	t.Helper()
	dir := Ensure(t)
	shared.Lock()
	defer shared.Unlock()
	if shared.srv == nil && shared.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		shared.srv, shared.err = Start(ctx, Options{Dir: dir})
		cancel()
	}
	if shared.err != nil {
		if errors.Is(shared.err, ErrUnavailable) {
			unavailable(t, shared.err)
		}
		t.Fatalf("start signalk-server: %v", shared.err)
	}
	return shared.srv
}

// Main runs the tests and stops the shared server. Use it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(sktest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	shared.Lock()
	if shared.srv != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "signalk-server log:\n%s\n", shared.srv.LogTail(4000))
		}
		_ = shared.srv.Stop()
		shared.srv = nil
	}
	shared.Unlock()
	return code
}
