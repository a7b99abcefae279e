package health

import (
	"context"
	"fmt"
	"strings"
	"time"

	"devhost/host/board"
)

// Run drives the policy tick (every TickInterval) and the task watchdog until ctx ends.
func (r *Registry) Run(ctx context.Context) {
	ticker := r.clock.NewTicker(r.tickEvery)
	defer ticker.Stop()
	wd := r.clock.NewTimer(TaskWatchdogTimeout)
	defer wd.Stop()
	r.armWatchdog(wd)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.Chan():
			r.tick()
			if r.onTick != nil {
				r.onTick()
			}
		case <-wd.Chan():
			r.checkWatchdog()
			r.armWatchdog(wd)
		case <-r.wake:
			r.armWatchdog(wd)
		}
	}
}

// tick is one policy tick: expire the drill, evaluate the built-ins, count strikes.
func (r *Registry) tick() {
	now := r.clock.Now()
	var mem board.Memory
	if r.memory != nil {
		mem = r.memory()
	}
	r.mu.Lock()
	r.expireDrillLocked(now)
	if r.memory != nil {
		r.sampleLocked(mem)
		r.evalMemoryLocked(mem)
	}
	r.evalTasksLocked(now)
	rec := r.strikeLocked()
	r.mu.Unlock()
	r.drain()
	if rec != nil {
		r.log.Error("health watchdog restarting the device", "health_key", rec.HealthKey, "message", rec.Message)
		if r.restart != nil {
			r.restart(*rec)
		}
	}
}

func (r *Registry) sampleLocked(m board.Memory) {
	r.lastSample = m
	if !r.sampled {
		r.lowWater = m
		r.sampled = true
		return
	}
	r.lowWater.FreeHeap = min(r.lowWater.FreeHeap, m.FreeHeap)
	r.lowWater.FreeInternal = min(r.lowWater.FreeInternal, m.FreeInternal)
	r.lowWater.LargestBlock = min(r.lowWater.LargestBlock, m.LargestBlock)
}

// Messages of the built-in memory conditions.
const (
	msgInternalAlarm = "free internal RAM below 12 KiB"
	msgBlockAlarm    = "largest free internal block below 8 KiB"
	msgHeapWarn      = "free heap below 40 KiB"
	msgInternalWarn  = "free internal RAM below 20 KiB"
	msgTrough        = "internal RAM low-water mark fell below 10 KiB since boot"
)

// memoryRules are the lowMemory thresholds: each names a state, when it holds and its message.
var memoryRules = []struct {
	state State
	low   func(board.Memory) bool
	msg   string
}{
	{Alarm, func(m board.Memory) bool { return m.FreeInternal < InternalAlarmBytes }, msgInternalAlarm},
	{Alarm, func(m board.Memory) bool { return m.LargestBlock < LargestBlockAlarmBytes }, msgBlockAlarm},
	{Warn, func(m board.Memory) bool { return m.FreeHeap < HeapWarnBytes }, msgHeapWarn},
	{Warn, func(m board.Memory) bool { return m.FreeInternal < InternalWarnBytes }, msgInternalWarn},
}

// memoryVerdict is the lowMemory state for one sample, with its message and flag: the worse
// state any rule holds for, its message every rule of that state that holds, in table order.
func memoryVerdict(m board.Memory) (State, string, bool) {
	for _, state := range []State{Alarm, Warn} {
		var why []string
		for _, r := range memoryRules {
			if r.state == state && r.low(m) {
				why = append(why, r.msg)
			}
		}
		if len(why) > 0 {
			return state, strings.Join(why, "; "), state == Alarm
		}
	}
	return Normal, "", false
}

func (r *Registry) evalMemoryLocked(m board.Memory) {
	state, msg, flag := memoryVerdict(m)
	r.setBuiltinLocked(KeyLowMemory, state, msg, flag)
	// The low-water mark never rises, so the warning stays for the boot by itself.
	if r.lowWater.FreeInternal < InternalTroughBytes {
		r.setBuiltinLocked(KeyMemoryTrough, Warn, msgTrough, false)
	}
}

func (r *Registry) setBuiltinLocked(key string, state State, msg string, flag bool) {
	if err := r.setLocked(key, state, msg, flag); err != nil {
		r.log.Warn("health: built-in condition not recorded", "key", key, "state", string(state), "err", err)
	}
}

// strikeLocked counts one policy tick and returns the reset record when the device must
// restart now.
func (r *Registry) strikeLocked() *ResetRecord {
	if !r.policy || r.restarted {
		return nil
	}
	c := r.fatalLocked()
	if c == nil {
		if r.strikes > 0 {
			r.log.Info("health policy: no flagged alarm, strikes reset", "strikes", r.strikes)
		}
		r.strikes = 0
		return nil
	}
	r.strikes++
	r.log.Warn("health policy strike", "strike", r.strikes, "of", StrikesToRestart, "key", c.Key)
	if r.strikes < StrikesToRestart {
		return nil
	}
	r.restarted = true
	rec := &ResetRecord{
		Reason:             ReasonSoftware,
		HealthKey:          c.Key,
		Message:            c.Message,
		MinFreeHeapBefore:  r.lowWater.FreeHeap,
		MinInternalBefore:  r.lowWater.FreeInternal,
		LargestBlockBefore: r.lastSample.LargestBlock,
		UptimeBeforeS:      int64(r.uptime() / time.Second),
	}
	if r.wallClock != nil {
		if t, ok := r.wallClock(); ok {
			t = t.UTC()
			rec.At = &t
		}
	}
	return rec
}

// Task is a watched task; it must call Kick more often than its timeout.
type Task struct {
	r        *Registry
	name     string
	timeout  time.Duration
	lastKick time.Time
	fired    bool // the task watchdog acted on the current stall
	closed   bool
}

// Watch starts watching a task. It claims the taskStalled slot if nobody has yet.
func (r *Registry) Watch(name string, timeout time.Duration) (*Task, error) {
	if name == "" || len(name) > MaxTaskNameLen {
		return nil, fmt.Errorf("%w: name %q (1 to %d bytes)", ErrBadTask, name, MaxTaskNameLen)
	}
	if timeout <= 0 || timeout > TaskWatchdogTimeout {
		return nil, fmt.Errorf("%w: %q timeout %s (above 0, at most %s)", ErrBadTask, name, timeout, TaskWatchdogTimeout)
	}
	r.mu.Lock()
	defer r.drain()
	defer r.mu.Unlock()
	if len(r.tasks) >= MaxTasks {
		return nil, fmt.Errorf("%w: at most %d", ErrTooManyTasks, MaxTasks)
	}
	for _, t := range r.tasks {
		if t.name == name {
			return nil, fmt.Errorf("%w: %q is already watched", ErrBadTask, name)
		}
	}
	if _, ok := r.index[KeyTaskStalled]; !ok {
		if err := r.setLocked(KeyTaskStalled, Normal, "", false); err != nil {
			return nil, fmt.Errorf("watch %q: %w", name, err)
		}
	}
	t := &Task{r: r, name: name, timeout: timeout, lastKick: r.clock.Now()}
	r.tasks = append(r.tasks, t)
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return t, nil
}

// Name is the task's name.
func (t *Task) Name() string { return t.name }

// Kick tells the watchdogs the task is alive.
func (t *Task) Kick() {
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.closed {
		return
	}
	t.lastKick = r.clock.Now()
	t.fired = false
}

// Close stops watching the task; its slot is free again. Closing twice is harmless.
func (t *Task) Close() {
	r := t.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if t.closed {
		return
	}
	t.closed = true
	for i, o := range r.tasks {
		if o == t {
			r.tasks = append(r.tasks[:i], r.tasks[i+1:]...)
			break
		}
	}
}

func (r *Registry) evalTasksLocked(now time.Time) {
	var stalled []*Task
	for _, t := range r.tasks {
		if now.Sub(t.lastKick) > t.timeout {
			stalled = append(stalled, t)
		}
	}
	if len(stalled) == 0 {
		if _, ok := r.index[KeyTaskStalled]; ok {
			r.setBuiltinLocked(KeyTaskStalled, Normal, "", false)
		}
		return
	}
	t := stalled[0]
	msg := fmt.Sprintf("task %q did not kick within %s", t.name, t.timeout)
	if len(stalled) > 1 {
		msg += fmt.Sprintf(" (+%d more)", len(stalled)-1)
	}
	r.setBuiltinLocked(KeyTaskStalled, Alarm, msg, true)
}

// armWatchdog sets the timer to the earliest task watchdog deadline, or stops it.
func (r *Registry) armWatchdog(wd interface {
	Reset(time.Duration) bool
	Stop() bool
}) {
	r.mu.Lock()
	var next time.Time
	for _, t := range r.tasks {
		if t.fired {
			continue
		}
		if d := t.lastKick.Add(TaskWatchdogTimeout); next.IsZero() || d.Before(next) {
			next = d
		}
	}
	now := r.clock.Now()
	r.mu.Unlock()
	if next.IsZero() {
		wd.Stop()
		return
	}
	wd.Reset(max(next.Sub(now), 0))
}

// checkWatchdog calls Panic for every task not kicked for TaskWatchdogTimeout, once per stall.
func (r *Registry) checkWatchdog() {
	r.mu.Lock()
	now := r.clock.Now()
	var due []string
	for _, t := range r.tasks {
		if !t.fired && now.Sub(t.lastKick) >= TaskWatchdogTimeout {
			t.fired = true
			due = append(due, t.name)
		}
	}
	r.mu.Unlock()
	for _, name := range due {
		r.log.Error("task watchdog: task did not kick", "task", name, "timeout", TaskWatchdogTimeout)
		r.panicFn(name)
	}
}
