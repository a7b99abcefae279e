// Package health owns the device's health-condition table and its restart watchdog policy:
// the level-triggered condition registry with its sinks, the 10 s policy tick with its three
// strikes, the built-in conditions (lowMemory, memoryTrough, taskStalled), watched tasks and
// the 30 s task watchdog, synthetic drills (POST /health/test), the GET /health document and
// the reset record the watchdog leaves for the next boot (`last_reset` of /system/info).
//
// Choices where the spec is silent:
//
//   - Sizes use KiB = 1024 bytes: lowMemory warns below 40 KiB free heap (40960 B) or 20 KiB
//     free internal RAM; it alarms below 12 KiB free internal RAM or an 8 KiB largest internal
//     block; memoryTrough warns when the internal low-water mark fell below 10 KiB. "Below"
//     is strict: exactly 40960 B free heap is normal.
//   - lowMemory messages name the thresholds crossed, never the live figures, so a slowly
//     drifting heap does not call every sink on every tick.
//   - The board keeps no low-water marks, so the registry keeps them: it samples Memory once at
//     New and at every policy tick. LowWater returns them. A watchdog reset record carries those
//     low-water figures for heap and internal RAM and the largest internal block of the sample
//     taken at the restarting tick.
//   - A key is 1 to 32 bytes of UTF-8 without spaces or control characters. Messages are at most
//     255 bytes; longer ones are refused, never truncated. Keys starting with "test." belong to
//     drills: Report and ReportFatal refuse them, so a drill can never touch a flagged condition.
//     They also refuse the tick's own keys (lowMemory, memoryTrough, taskStalled), so no other
//     component can raise or clear them.
//   - Any report creates its key's slot, normal ones included, so a component can claim its slot
//     at start-up. New claims lowMemory and memoryTrough (when a Memory source is given) and the
//     first Watch claims taskStalled, so the built-ins are never locked out by a full table. A
//     new key counts as a change and calls every sink.
//   - Level-triggering compares state and message only, as the spec's table says: a report of the
//     same state and message changes nothing, not even the reboot flag. The flag is taken from
//     the report that last changed the condition. Built-ins report their normal and warn states
//     through the plain path and their alarms through the flagged one.
//   - `fatal` is the oldest flagged condition in alarm; it is null while the policy is disabled,
//     because the policy would then restart for nothing. When strikes reach 3 the record names
//     the condition that is fatal at that tick (the strikes may have been earned by another).
//     Restart is called once; the policy stops counting afterwards.
//   - Sinks are called in report order on the goroutine that reported (or, when another report
//     is being delivered at that moment, on that goroutine), outside the table's lock; they may
//     read the registry but must return quickly. A sink that reports is not deadlocked: its
//     report is delivered after it returns.
//   - Watched tasks: a name of 1 to 32 bytes, unique among open tasks, a timeout above 0 and at
//     most 30 s. The per-task timeout is the soft limit: the next policy tick raises taskStalled
//     (alarm, flagged, naming the oldest stalled task and how many more), which the policy may
//     turn into a restart with a reset record. The 30 s task watchdog is the hard limit and
//     runs even with the policy disabled: it calls Panic once per stall (the reset reason is
//     then task_wdt and the crash names the task). Whichever comes first ends the stall; a
//     timeout over 30 s is refused because taskStalled could then never be seen.
//   - Drills: JSON null in an optional member (message, ttl_s) means absent; null in key or state
//     is a wrong type. Duplicate members are refused like unknown ones. A missing message reads
//     "health drill". A POST with state normal clears the active drill (whatever its key) and
//     sets the named key normal if it has a slot; it never claims a new slot. Re-posting the
//     active drill's key replaces it without an intermediate normal. A 507 leaves everything as
//     it was. A drill key must also be a valid key (see above); a bad one is 400 `validation`.
//     Validation errors carry `path` set to the offending member ("" for the document).
//   - The reset record's `at` is ISO 8601 UTC to the whole second ("2025-06-01T12:03:04Z") and
//     uptime_before_s is rounded down. BelievedReset applies the spec's rule that the record is
//     shown only on a boot whose reset reason is software; storing it and clearing it on the
//     first read belong to the device.
//   - Snapshot does not expire drills; GET /health, POST /health/test, ExpireDrills and the tick
//     do.
//   - GET /health returns the 32 oldest conditions when there are more; `worst` and `fatal` still
//     cover the whole table.
package health

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"devhost/host/board"

	"github.com/jonboulle/clockwork"
)

// State is the level of a condition.
type State string

// The three states of the spec, in increasing severity.
const (
	Normal State = "normal"
	Warn   State = "warn"
	Alarm  State = "alarm"
)

func (s State) valid() bool { return s == Normal || s == Warn || s == Alarm }

func (s State) rank() int {
	switch s {
	case Warn:
		return 1
	case Alarm:
		return 2
	}
	return 0
}

// Limits of the spec's Limits table and build options.
const (
	// MaxConditions is HEALTH_MAX_CONDITIONS, the default size of the table.
	MaxConditions = 12
	// MaxSinks is the number of sinks a registry accepts.
	MaxSinks = 4
	// MaxTasks is the number of watched tasks.
	MaxTasks = 8
	// MaxPerResponse caps the conditions carried by one GET /health answer.
	MaxPerResponse = 32
	// TickInterval is the policy tick.
	TickInterval = 10 * time.Second
	// StrikesToRestart is the number of consecutive ticks with a flagged alarm that restarts.
	StrikesToRestart = 3
	// TaskWatchdogTimeout is ESP_TASK_WDT_TIMEOUT_S.
	TaskWatchdogTimeout = 30 * time.Second
	// MaxKeyLen is the longest condition key in bytes.
	MaxKeyLen = 32
	// MaxMessageLen is the longest condition message in bytes.
	MaxMessageLen = 255
	// MaxTaskNameLen is the longest watched task name in bytes.
	MaxTaskNameLen = 32
)

// KiB is the unit of the HEALTH_*_KB build options.
const KiB = 1024

// Thresholds of the built-in memory conditions (bytes).
const (
	HeapWarnBytes          = 40 * KiB // HEALTH_HEAP_WARN_KB
	InternalWarnBytes      = 20 * KiB // HEALTH_INTERNAL_WARN_KB
	InternalAlarmBytes     = 12 * KiB // HEALTH_INTERNAL_ALARM_KB
	LargestBlockAlarmBytes = 8 * KiB  // HEALTH_LARGEST_BLOCK_ALARM_KB
	InternalTroughBytes    = 10 * KiB // HEALTH_INTERNAL_TROUGH_WARN_KB
)

// Keys of the built-in conditions and of the conditions other components raise.
const (
	KeyLowMemory     = "lowMemory"
	KeyMemoryTrough  = "memoryTrough"
	KeyTaskStalled   = "taskStalled"
	KeyNetDown       = "netDown"
	KeySKLinkStalled = "skLinkStalled"
	KeySKCertificate = "skCertificate"
	KeyTLSMemory     = "tlsMemory"
	KeyFlowConfig    = "flowConfig"
)

// DrillPrefix starts every drill key.
const DrillPrefix = "test."

// Errors of the registry.
var (
	ErrFull         = errors.New("health: condition table full")
	ErrBadKey       = errors.New("health: bad condition key")
	ErrBadState     = errors.New("health: bad condition state")
	ErrBadMessage   = errors.New("health: condition message too long")
	ErrSinksFull    = errors.New("health: sink table full")
	ErrTooManyTasks = errors.New("health: watched task table full")
	ErrBadTask      = errors.New("health: bad watched task")
)

// Condition is one row of the table.
type Condition struct {
	Key           string `json:"key"`
	State         State  `json:"state"`
	Message       string `json:"message"`
	RebootOnAlarm bool   `json:"reboot_on_alarm"`
}

// Memory reads the board's live heap figures.
type Memory func() board.Memory

// Options configures a Registry. Every field is optional.
type Options struct {
	Clock  clockwork.Clock
	Logger *slog.Logger
	// Memory feeds the built-in memory conditions; nil leaves them out.
	Memory Memory
	// Policy enables the restart watchdog policy (CORE_HEALTH_WATCHDOG, start option). When
	// false conditions are still reported but strikes are never counted.
	Policy bool
	// Restart is called once when the policy restarts the device: the device writes the
	// record, then restarts.
	Restart func(ResetRecord)
	// Panic is the task watchdog's action; the default panics with a message starting
	// "task_wdt:".
	Panic func(task string)
	// WallClock gives the wall time for the reset record; ok is false when the clock was never
	// set.
	WallClock func() (time.Time, bool)
	// Uptime gives the time since boot; the default measures from New.
	Uptime func() time.Duration
	// MaxConditions sizes the table; 0 means MaxConditions (HEALTH_MAX_CONDITIONS).
	MaxConditions int
	// Tick overrides the policy tick; 0 means TickInterval. Only black-box tests of the whole
	// device shorten it, so a watchdog restart can be watched without waiting 30 s.
	Tick time.Duration
}

// Registry is the health-condition table with its policy.
type Registry struct {
	tickEvery time.Duration
	clock     clockwork.Clock
	log       *slog.Logger
	memory    Memory
	policy    bool
	restart   func(ResetRecord)
	panicFn   func(string)
	wallClock func() (time.Time, bool)
	uptime    func() time.Duration
	max       int

	// wake tells the task watchdog loop that a task was added.
	wake chan struct{}
	// onTick, when set, runs after every policy tick (tests).
	onTick func()

	mu         sync.Mutex
	conds      []Condition // slot order: oldest first
	index      map[string]int
	sinks      []func(Condition)
	queue      []delivery
	strikes    int
	restarted  bool
	lowWater   board.Memory
	lastSample board.Memory
	sampled    bool
	drill      *activeDrill
	tasks      []*Task

	// deliverMu makes one goroutine at a time call sinks, so they see changes in order.
	deliverMu sync.Mutex
}

type delivery struct {
	cond  Condition
	sinks []func(Condition)
}

type activeDrill struct {
	key      string
	deadline time.Time
}

// New builds a registry. It samples Memory once and claims the memory conditions' slots.
func New(opts Options) *Registry {
	if opts.Tick <= 0 {
		opts.Tick = TickInterval
	}
	r := &Registry{
		clock:     opts.Clock,
		log:       opts.Logger,
		memory:    opts.Memory,
		policy:    opts.Policy,
		restart:   opts.Restart,
		panicFn:   opts.Panic,
		wallClock: opts.WallClock,
		uptime:    opts.Uptime,
		max:       opts.MaxConditions,
		tickEvery: opts.Tick,
		wake:      make(chan struct{}, 1),
		index:     make(map[string]int),
	}
	r.clock = cmp.Or(r.clock, clockwork.NewRealClock())
	r.log = cmp.Or(r.log, slog.New(slog.DiscardHandler))
	if r.max <= 0 {
		r.max = MaxConditions
	}
	if r.panicFn == nil {
		r.panicFn = func(task string) {
			panic(fmt.Sprintf("task_wdt: task %q did not kick the watchdog for %s", task, TaskWatchdogTimeout))
		}
	}
	if r.uptime == nil {
		start := r.clock.Now()
		r.uptime = func() time.Duration { return r.clock.Since(start) }
	}
	if r.memory != nil {
		r.sampleLocked(r.memory())
		for _, k := range []string{KeyLowMemory, KeyMemoryTrough} {
			if err := r.setLocked(k, Normal, "", false); err != nil {
				r.log.Warn("health: cannot claim a built-in slot", "key", k, "err", err)
			}
		}
	}
	return r
}

// CheckKey reports whether key is acceptable to the table.
func CheckKey(key string) error {
	if key == "" || len(key) > MaxKeyLen || !utf8.ValidString(key) {
		return fmt.Errorf("%w: %q (1 to %d bytes of UTF-8)", ErrBadKey, key, MaxKeyLen)
	}
	for _, c := range key {
		if unicode.IsControl(c) || unicode.IsSpace(c) {
			return fmt.Errorf("%w: %q contains a space or control character", ErrBadKey, key)
		}
	}
	return nil
}

func checkReport(key string, state State, message string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if strings.HasPrefix(key, DrillPrefix) {
		return fmt.Errorf("%w: %q: keys starting with %q are reserved for drills", ErrBadKey, key, DrillPrefix)
	}
	switch key {
	case KeyLowMemory, KeyMemoryTrough, KeyTaskStalled:
		return fmt.Errorf("%w: %q is raised by the policy tick only", ErrBadKey, key)
	}
	if !state.valid() {
		return fmt.Errorf("%w: %q", ErrBadState, state)
	}
	if len(message) > MaxMessageLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrBadMessage, len(message), MaxMessageLen)
	}
	return nil
}

// Report records a condition through the plain path: it never carries the reboot flag.
func (r *Registry) Report(key string, state State, message string) error {
	return r.report(key, state, message, false)
}

// ReportFatal records a condition through the flagged path: in alarm it counts toward the
// restart policy. Only built-ins and callers granted the flag use it.
func (r *Registry) ReportFatal(key string, state State, message string) error {
	return r.report(key, state, message, true)
}

func (r *Registry) report(key string, state State, message string, flag bool) error {
	if err := checkReport(key, state, message); err != nil {
		return err
	}
	r.mu.Lock()
	err := r.setLocked(key, state, message, flag)
	r.mu.Unlock()
	r.drain()
	return err
}

// setLocked applies one report and queues the change for the sinks. The caller holds mu and
// calls drain after releasing it.
func (r *Registry) setLocked(key string, state State, message string, flag bool) error {
	i, ok := r.index[key]
	if !ok {
		if len(r.conds) >= r.max {
			return fmt.Errorf("%w: %d slots, %q has none", ErrFull, r.max, key)
		}
		r.conds = append(r.conds, Condition{Key: key})
		i = len(r.conds) - 1
		r.index[key] = i
	} else if c := r.conds[i]; c.State == state && c.Message == message {
		return nil
	}
	c := Condition{Key: key, State: state, Message: message, RebootOnAlarm: flag}
	r.conds[i] = c
	r.log.Log(context.Background(), levelOf(state), "health condition", "key", key, "state", string(state), "message", message, "reboot_on_alarm", flag)
	if len(r.sinks) > 0 {
		r.queue = append(r.queue, delivery{cond: c, sinks: r.sinks})
	}
	return nil
}

func levelOf(s State) slog.Level {
	switch s {
	case Warn, Alarm:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// AddSink registers a sink called with every change; it first receives every recorded
// condition, oldest first.
func (r *Registry) AddSink(sink func(Condition)) error {
	if sink == nil {
		return errors.New("health: nil sink")
	}
	r.mu.Lock()
	if len(r.sinks) >= MaxSinks {
		r.mu.Unlock()
		return fmt.Errorf("%w: at most %d", ErrSinksFull, MaxSinks)
	}
	// A fresh slice each time: queued deliveries keep the sink list of their moment.
	r.sinks = append(r.sinks[:len(r.sinks):len(r.sinks)], sink)
	only := []func(Condition){sink}
	for _, c := range r.conds {
		r.queue = append(r.queue, delivery{cond: c, sinks: only})
	}
	r.mu.Unlock()
	r.drain()
	return nil
}

// drain delivers queued changes. Only one goroutine delivers at a time; a report made while
// another goroutine delivers is left to that goroutine, which checks the queue again before it
// lets go.
func (r *Registry) drain() {
	for {
		if !r.deliverMu.TryLock() {
			return
		}
		r.deliverQueued()
		r.mu.Lock()
		pending := len(r.queue) > 0
		r.mu.Unlock()
		if !pending {
			return
		}
	}
}

func (r *Registry) deliverQueued() {
	defer r.deliverMu.Unlock()
	for {
		r.mu.Lock()
		batch := r.queue
		r.queue = nil
		r.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		for _, d := range batch {
			for _, s := range d.sinks {
				s(d.cond)
			}
		}
	}
}

// Conditions returns the table, oldest first.
func (r *Registry) Conditions() []Condition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Condition(nil), r.conds...)
}

// LowWater returns the lowest free heap, free internal RAM and largest internal block seen
// since boot (zero before the first sample or without a Memory source).
func (r *Registry) LowWater() board.Memory {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lowWater
}

// Document is the GET /health document.
type Document struct {
	Worst      State       `json:"worst"`
	Fatal      *string     `json:"fatal"`
	Conditions []Condition `json:"conditions"`
	Truncated  int         `json:"truncated,omitempty"`
}

// Snapshot returns the GET /health document without expiring drills.
func (r *Registry) Snapshot() Document {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.documentLocked()
}

func (r *Registry) documentLocked() Document {
	d := Document{Worst: Normal, Conditions: []Condition{}}
	for _, c := range r.conds {
		if c.State.rank() > d.Worst.rank() {
			d.Worst = c.State
		}
	}
	if c := r.fatalLocked(); c != nil {
		k := c.Key
		d.Fatal = &k
	}
	n := len(r.conds)
	if n > MaxPerResponse {
		d.Truncated = n - MaxPerResponse
		n = MaxPerResponse
	}
	d.Conditions = append(d.Conditions, r.conds[:n]...)
	return d
}

// fatalLocked returns the oldest flagged condition in alarm, nil when none or when the policy
// is disabled.
func (r *Registry) fatalLocked() *Condition {
	if !r.policy {
		return nil
	}
	for i := range r.conds {
		if c := &r.conds[i]; c.RebootOnAlarm && c.State == Alarm {
			return c
		}
	}
	return nil
}
