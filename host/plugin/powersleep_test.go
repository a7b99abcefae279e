package plugin

import (
	"fmt"
	"testing"

	"devhost/abi"
)

// fakeSleeper is a Power that takes sleep-now requests, refusing them while refuse is set.
type fakeSleeper struct {
	fakePower
	asked  int
	refuse bool
}

func (p *fakeSleeper) SleepNow() error {
	if p.refuse {
		return fmt.Errorf("%w: update unconfirmed", abi.ErrState)
	}
	p.asked++
	return nil
}

func TestPowerSleep(t *testing.T) {
	m := fuzzManager(t)
	p := m.newPlugin(record{ID: "ps", Wanted: WantRunning})
	p.man = manifest("ps", abi.CapPowerSleep)
	inst := &instance{alloc: &allocator{}, memory: &linearMem{buf: make([]byte, 64)}}
	call := func(s *session, arg uint64) int32 {
		return s.invoke(abi.FunctionCapability[abi.FnPowerSleep], fnPowerSleep, []uint64{arg})
	}

	denied := newSession(p, inst, p.inbox.open(), nil)
	if rc := call(denied, 0); rc != int32(abi.ErrPermission) {
		t.Fatalf("without power.sleep: %d", rc)
	}
	denied.end()

	s := newSession(p, inst, p.inbox.open(), []string{string(abi.CapPowerSleep)})
	defer s.end()
	if rc := call(s, 0); rc != int32(abi.ErrUnavailable) {
		t.Fatalf("a device without sleep-now: %d", rc)
	}
	sl := &fakeSleeper{}
	m.opts.Power = sl
	if rc := call(s, 1); rc != int32(abi.ErrInvalid) {
		t.Fatalf("reserved argument: %d", rc)
	}
	if rc := call(s, 0); rc != 0 || sl.asked != 1 {
		t.Fatalf("sleep now: %d, asked %d", rc, sl.asked)
	}
	sl.refuse = true
	if rc := call(s, 0); rc != int32(abi.ErrState) || sl.asked != 1 {
		t.Fatalf("refused sleep now: %d", rc)
	}
}
