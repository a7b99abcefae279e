//go:build !wasip1

package sdk

import (
	"errors"
	"testing"

	"devhost/abi"
)

func TestSleepNow(t *testing.T) {
	h := start(t, &Plugin{}, abi.CapPowerSleep)
	if err := SleepNow(); err != nil || h.SleepAsked != 1 {
		t.Fatalf("sleep now: %v, asked %d", err, h.SleepAsked)
	}
	h.SleepRefuse = true
	if err := SleepNow(); !errors.Is(err, ErrState) || h.SleepAsked != 1 {
		t.Fatalf("sleep now while an update is unconfirmed: %v", err)
	}
}
