package auth

import "time"

// countPowerCycle counts this power-on in the recovery counter and opens the window on the
// HTTPD_RECOVERY_CYCLES-th. The counter is touched only while a key is set.
func (a *Auth) countPowerCycle() {
	if !a.recovery || a.counter == nil || a.key() == "" {
		return
	}
	n, err := a.counter.Load()
	if err != nil {
		a.log.Warn("recovery counter unreadable; counting from zero", "err", err)
		n = 0
	}
	if n < 0 {
		n = 0
	}
	n++
	if n >= RecoveryCycles {
		a.OpenWindow(RecoveryWindowS)
		n = 0
	}
	if err := a.counter.Save(n); err != nil {
		a.log.Error("recovery counter not saved", "err", err)
	}
}

// clearPowerCycles forgets the power cycles counted so far, once this boot has lasted long
// enough not to be part of a recovery sequence.
func (a *Auth) clearPowerCycles() {
	if !a.recovery || a.counter == nil || a.key() == "" {
		return
	}
	if n, err := a.counter.Load(); err == nil && n == 0 {
		return
	}
	if err := a.counter.Save(0); err != nil {
		a.log.Error("recovery counter not cleared", "err", err)
	}
}

// OpenWindow opens (or extends) a recovery window of the given seconds, during which the
// portal network is exempt from the key. It is for hardware presence events only (board
// button, jumper, key switch); never call it from a timer or a network request.
func (a *Auth) OpenWindow(seconds int) {
	if !a.recovery || seconds <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	end := a.clock.Now().Add(time.Duration(seconds) * time.Second)
	if end.After(a.windowEnd) {
		a.windowEnd = end
	}
	a.log.Warn("recovery window open: the setup portal needs no key", "seconds", seconds)
}

func (a *Auth) windowOpen() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.clock.Now().Before(a.windowEnd)
}

// RecoveryRemaining is the whole seconds left of the recovery window (rounded up), 0 when none
// is open.
func (a *Auth) RecoveryRemaining() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	left := a.windowEnd.Sub(a.clock.Now())
	if left <= 0 {
		return 0
	}
	return int((left + time.Second - 1) / time.Second)
}
