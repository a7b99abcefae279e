package auth

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"
)

// bootOpts describes one boot of the device.
type bootOpts struct {
	key      string
	powerOn  bool
	recovery bool
	uptime   time.Duration // how long the boot lasts before the power goes
}

// boot runs one boot against the shared counter: New, Run for the uptime, then power off. It
// returns the Auth and its env as they were at the end of the boot.
func boot(t *testing.T, c *fakeCounter, b bootOpts) (*Auth, *env) {
	t.Helper()
	e := newEnv(b.key)
	o := e.options()
	o.Counter, o.PowerOn, o.Recovery = c, b.powerOn, b.recovery
	a := New(o)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	if err := e.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(b.uptime)
	if b.uptime < RecoveryClear {
		cancel() // the power goes before the clear
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	return a, e
}

func quick(key string) bootOpts {
	return bootOpts{key: key, powerOn: true, recovery: true, uptime: 5 * time.Second}
}

func TestRecoveryThreeQuickPowerCyclesOpenWindow(t *testing.T) {
	c := newFakeCounter()
	for i := 1; i <= 2; i++ {
		a, _ := boot(t, c, quick(testKey))
		if c.value() != i || a.RecoveryRemaining() != 0 {
			t.Fatalf("boot %d: counter %d, window %d", i, c.value(), a.RecoveryRemaining())
		}
	}
	// The third power-on opens the window at once and resets the count.
	e := newEnv(testKey)
	o := e.options()
	o.Counter, o.PowerOn = c, true
	a := New(o)
	if got := a.RecoveryRemaining(); got != RecoveryWindowS {
		t.Fatalf("window = %d, want %d", got, RecoveryWindowS)
	}
	if c.value() != 0 || !slices.Equal(c.writes(), []int{1, 2, 0}) {
		t.Fatalf("counter writes %v", c.writes())
	}
	if m, err := a.Check(request(http.MethodPut, portalIP, "")); err != nil || m != MethodPortal {
		t.Fatalf("portal during the window = %q, %v", m, err)
	}
	if _, err := a.Check(request(http.MethodPut, stationIP, "")); err == nil {
		t.Fatal("station side exempt during the window")
	}

	// The window expires; recovery_s counts down on the way.
	e.clock.Advance(599*time.Second + 500*time.Millisecond)
	if got := a.RecoveryRemaining(); got != 1 {
		t.Fatalf("with 0.5 s left recovery_s = %d, want 1", got)
	}
	e.clock.Advance(500 * time.Millisecond)
	if got := a.RecoveryRemaining(); got != 0 {
		t.Fatalf("after 600 s recovery_s = %d", got)
	}
	_, err := a.Check(request(http.MethodPut, portalIP, ""))
	if st, _ := errCode(t, err); st != http.StatusUnauthorized {
		t.Fatalf("portal after the window = %d, want 401", st)
	}
}

func TestRecoveryLongBootClearsCount(t *testing.T) {
	c := newFakeCounter()
	boot(t, c, quick(testKey))
	long := quick(testKey)
	long.uptime = RecoveryClear
	boot(t, c, long) // counts to 2, then clears after 20 s
	if c.value() != 0 {
		t.Fatalf("counter after a 20 s boot = %d, want 0", c.value())
	}
	a, _ := boot(t, c, quick(testKey))
	if c.value() != 1 || a.RecoveryRemaining() != 0 {
		t.Fatalf("third boot: counter %d, window %d", c.value(), a.RecoveryRemaining())
	}
	if !slices.Equal(c.writes(), []int{1, 2, 0, 1}) {
		t.Fatalf("writes %v", c.writes())
	}
}

func TestRecoveryBootJustUnderClearTimeKeepsCount(t *testing.T) {
	c := newFakeCounter()
	b := quick(testKey)
	b.uptime = RecoveryClear - time.Millisecond
	boot(t, c, b)
	boot(t, c, b)
	if c.value() != 2 {
		t.Fatalf("counter = %d, want 2", c.value())
	}
}

func TestRecoveryClearSkipsWriteWhenZero(t *testing.T) {
	c := newFakeCounter()
	c.n = 0
	b := bootOpts{key: testKey, powerOn: false, recovery: true, uptime: time.Minute}
	boot(t, c, b)
	if len(c.writes()) != 0 {
		t.Fatalf("writes %v, want none: the count was already zero", c.writes())
	}
}

func TestRecoveryNonPowerOnBootsDoNotCount(t *testing.T) {
	c := newFakeCounter()
	boot(t, c, quick(testKey))
	soft := quick(testKey)
	soft.powerOn = false // watchdog, panic, software restart, brown-out
	for range 3 {
		a, _ := boot(t, c, soft)
		if a.RecoveryRemaining() != 0 {
			t.Fatal("a non-power-on boot opened the window")
		}
	}
	a, _ := boot(t, c, quick(testKey))
	if c.value() != 2 || a.RecoveryRemaining() != 0 {
		t.Fatalf("counter %d, window %d; want 2, 0", c.value(), a.RecoveryRemaining())
	}
}

func TestRecoveryCounterUntouchedWithoutKey(t *testing.T) {
	c := newFakeCounter()
	c.n = 2 // left from when a key was set
	long := quick("")
	long.uptime = time.Minute
	for _, b := range []bootOpts{quick(""), quick(""), quick(""), long} {
		if a, _ := boot(t, c, b); a.RecoveryRemaining() != 0 {
			t.Fatal("window opened without a key")
		}
	}
	if len(c.writes()) != 0 || c.loads != 0 {
		t.Fatalf("counter read %d times, written %v; want untouched", c.loads, c.writes())
	}
}

func TestRecoveryDisabledByBuildOption(t *testing.T) {
	c := newFakeCounter()
	b := quick(testKey)
	b.recovery = false
	for range 3 {
		boot(t, c, b)
	}
	b.uptime = time.Minute
	a, _ := boot(t, c, b)
	if len(c.writes()) != 0 || c.loads != 0 {
		t.Fatalf("counter touched: %d loads, writes %v", c.loads, c.writes())
	}
	a.OpenWindow(600)
	if a.RecoveryRemaining() != 0 {
		t.Fatal("OpenWindow worked with recovery removed")
	}
}

func TestRecoveryUnreadableCounterCountsFromZero(t *testing.T) {
	c := newFakeCounter()
	c.loadErr = errors.New("flash read error")
	boot(t, c, quick(testKey))
	if !slices.Equal(c.writes(), []int{1}) {
		t.Fatalf("writes %v, want [1]", c.writes())
	}
}

func TestRecoveryWindowIgnoresLockout(t *testing.T) {
	a, e := newAuth(t, testKey, nil)
	for range 5 {
		wrongBearer(t, a)
	}
	if RetryAfter(rightBearer(a)) == 0 {
		t.Fatal("not locked")
	}
	a.OpenWindow(RecoveryWindowS)
	for _, hdr := range [][]string{nil, bearerHdr(testKey), bearerHdr("still wrong")} {
		if m, err := a.Check(request(http.MethodPut, portalIP, "", hdr...)); err != nil || m != MethodPortal {
			t.Fatalf("portal with %v during lockout and window = %q, %v", hdr, m, err)
		}
	}
	// The station side stays locked, and the portal requests did not extend the lockout.
	if RetryAfter(rightBearer(a)) != 30 {
		t.Fatal("station side not locked for 30 s")
	}
	e.clock.Advance(30 * time.Second)
	if err := rightBearer(a); err != nil {
		t.Fatalf("after lockout: %v", err)
	}
}

func TestOpenWindowFromPresenceEvent(t *testing.T) {
	a, e := newAuth(t, testKey, nil)
	a.OpenWindow(0)
	a.OpenWindow(-5)
	if a.RecoveryRemaining() != 0 {
		t.Fatal("a non-positive window opened")
	}
	a.OpenWindow(120)
	e.clock.Advance(500 * time.Millisecond)
	if got := a.RecoveryRemaining(); got != 120 {
		t.Fatalf("recovery_s = %d, want 120 (rounded up)", got)
	}
	a.OpenWindow(10) // never shortens
	if got := a.RecoveryRemaining(); got != 120 {
		t.Fatalf("a shorter window shortened it: %d", got)
	}
	a.OpenWindow(300)
	if got := a.RecoveryRemaining(); got != 300 {
		t.Fatalf("a longer window did not extend it: %d", got)
	}
	if m, err := a.Check(request(http.MethodPost, portalIP, "")); err != nil || m != MethodPortal {
		t.Fatalf("portal = %q, %v", m, err)
	}
}
