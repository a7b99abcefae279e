package testio

import (
	"fmt"
	"strings"
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

func (f *fatalTB) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

// A condition that never holds fails the test once the timeout has passed.
func TestEventuallyFailsAfterTimeout(t *testing.T) {
	f := &fatalTB{TB: t}
	Eventually(f, 0, func() bool { return false })
	if f.failed == "" {
		t.Fatal("no failure reported")
	}
}

// Await returns the first answer ok accepts.
func TestAwaitReturnsTheAcceptedAnswer(t *testing.T) {
	var n atomic.Int32
	if got := Await(t, time.Minute, "three", func() int32 { return n.Add(1) }, func(v int32) bool { return v >= 3 }); got != 3 {
		t.Fatalf("got %d, want 3", got)
	}
}

// A failed Await names what it waited for and the last answer.
func TestAwaitFailureShowsTheLastAnswer(t *testing.T) {
	f := &fatalTB{TB: t}
	Await(f, 0, "the answer", func() int { return 41 }, func(v int) bool { return v == 42 })
	if !strings.Contains(f.failed, "the answer") || !strings.Contains(f.failed, "last 41") {
		t.Fatalf("failure %q", f.failed)
	}
}
