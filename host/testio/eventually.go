package testio

import (
	"testing"
	"time"
)

// Poll intervals of Eventually: it asks again soon at first, so that a condition reached at
// once costs the test almost nothing, then less and less often, so that a long wait does not
// load a busy machine.
const (
	firstPoll = time.Millisecond
	maxPoll   = 20 * time.Millisecond
)

// Eventually calls cond until it holds and fails the test if it still does not after timeout.
// The timeout is a guard against a hang, not a measurement: give it room for a loaded machine.
// Call it from the test's own goroutine (it may call t.Fatalf).
func Eventually(t testing.TB, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for pause := firstPoll; !cond(); pause = min(2*pause, maxPoll) {
		if time.Now().After(deadline) {
			t.Fatalf("condition not reached within %v", timeout)
			return
		}
		time.Sleep(pause)
	}
}
