package testio

import (
	"testing"
	"time"
)

// Poll intervals of Eventually and Await: they ask again soon at first, so that a condition
// reached at once costs the test almost nothing, then less and less often, so that a long wait
// does not load a busy machine.
const (
	firstPoll = time.Millisecond
	maxPoll   = 20 * time.Millisecond
)

// poll calls cond until it holds (true) or timeout has passed (false).
func poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for pause := firstPoll; !cond(); pause = min(2*pause, maxPoll) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
	}
	return true
}

// Eventually calls cond until it holds and fails the test if it still does not after timeout.
// The timeout is a guard against a hang, not a measurement: give it room for a loaded machine.
// Call it from the test's own goroutine (it may call t.Fatalf).
func Eventually(t testing.TB, timeout time.Duration, cond func() bool) {
	t.Helper()
	if !poll(timeout, cond) {
		t.Fatalf("condition not reached within %v", timeout)
	}
}

// Await calls get until ok accepts its answer and returns that answer. Like Eventually it
// fails the test after timeout, then naming what it waited for and the last answer, which is
// what one needs to see when a state machine stops short of the state awaited.
func Await[T any](t testing.TB, timeout time.Duration, what string, get func() T, ok func(T) bool) T {
	t.Helper()
	var v T
	if !poll(timeout, func() bool { v = get(); return ok(v) }) {
		t.Fatalf("%s: not reached within %v; last %+v", what, timeout, v)
	}
	return v
}
