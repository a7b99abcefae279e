package mdnstest

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// Logger is a logger that writes to t's log until the test ends (responders may still log
// from their goroutines after it).
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(Writer(t), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// Writer writes lines to t's log until the test ends: a child process's output, or a
// logger's.
func Writer(t testing.TB) io.Writer {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}
