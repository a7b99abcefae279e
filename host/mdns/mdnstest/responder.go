package mdnstest

import (
	"log/slog"
	"testing"
)

// Responder builds host's responder with newResponder, given a logger that names the host,
// starts it and closes it when t ends. A failed start says what the namespace's interfaces
// hold. The responder comes from a constructor because package mdns's own tests use this
// package, which therefore cannot import it.
func Responder[R interface {
	Start() error
	Close() error
}](t testing.TB, host string, newResponder func(*slog.Logger) (R, error)) R {
	t.Helper()
	r, err := newResponder(Logger(t).With("host", host))
	if err != nil {
		t.Fatalf("responder %s: %v", host, err)
	}
	if err := r.Start(); err != nil {
		t.Fatalf("start %s: %v (%s)", host, err, Describe())
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}
