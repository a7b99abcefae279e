package abi

import (
	"fmt"
	"testing"
)

// TestEnumNames pins the names the host logs and reports for each ABI enum, and the fallback
// for a value a later minor may add.
func TestEnumNames(t *testing.T) {
	for _, c := range []struct {
		v    fmt.Stringer
		want string
	}{
		{EvInit, "init"}, {EvPutAnswer, "put_answer"}, {EvStop, "stop"},
		{EventKind(0), "event(0)"}, {EventKind(99), "event(99)"},
		{PutSuccess, "success"}, {PutInvalid, "invalid argument"}, {PutFailure, "failure"},
		{PutDeferred, "deferred"}, {PutResult(4), "result(4)"},
		{HealthNormal, "normal"}, {HealthWarn, "warn"}, {HealthAlarm, "alarm"},
		{HealthState(3), "state(3)"},
		{ClockNone, "none"}, {ClockRTC, "rtc"}, {ClockSK, "sk"}, {ClockManual, "manual"},
		{ClockSNTP, "sntp"}, {ClockSource(255), "source(255)"},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%T %d: %q, want %q", c.v, c.v, got, c.want)
		}
	}
}
