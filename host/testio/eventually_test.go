package testio

import (
	"sync/atomic"
	"testing"
	"time"
)

// Eventually returns as soon as the condition holds, polling again until it does.
func TestEventuallyPollsUntilTrue(t *testing.T) {
	var calls atomic.Int32
	Eventually(t, time.Minute, func() bool { return calls.Add(1) >= 3 })
	if n := calls.Load(); n != 3 {
		t.Fatalf("cond called %d times, want 3", n)
	}
}

// fatalTB records a failure instead of ending the test, to look at Eventually's own failure.
type fatalTB struct {
	testing.TB
	failed string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) { f.failed = format }

// A condition that never holds fails the test once the timeout has passed.
func TestEventuallyFailsAfterTimeout(t *testing.T) {
	f := &fatalTB{TB: t}
	Eventually(f, 0, func() bool { return false })
	if f.failed == "" {
		t.Fatal("no failure reported")
	}
}
