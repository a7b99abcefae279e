// Package httpdtest runs an httpd.Server on a loopback listener for the tests of the packages
// that serve their routes through it, httpd's own included (so it does not import httpd).
package httpdtest

import (
	"context"
	"net"
	"testing"
)

// Server is what Start runs: an httpd.Server, or anything that serves a listener until ctx ends.
type Server interface {
	Serve(ctx context.Context, ln net.Listener) error
}

// Start serves s on a fresh 127.0.0.1 listener until the test ends, and answers its base URL
// ("http://127.0.0.1:port").
func Start(t testing.TB, s Server) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return "http://" + ln.Addr().String()
}
