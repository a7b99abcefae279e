// Package power is the spec's power duty cycle: it decides, by the spec's rule table (first
// match wins), whether the device stays awake or goes to deep sleep, and goes to sleep in the
// spec's order: flush the Signal K stream for `power.flush_ms`, a short pause, the wake
// counter and wake duration into RTC memory, then deep sleep through the boot supervisor,
// which wakes the app after `power.interval_s` with reset reason `deepsleep`. It owns GET
// /power, application holds and the sleep-now request.
//
// Document choices (the spec leaves them open):
//   - decision: `awake`, `sleep` (the rules say sleep; the device is on its way) or `off`
//     (power.mode is off).
//   - deadline_ms: the uptime in ms at which the wake deadline falls (`power.awake_max_s` after
//     a timer wake, `window_s + awake_max_s` after any other boot); null while mode is off.
//   - holds: {"total": n, "by": {"<owner>": n}}: counted application holds per owner; a
//     plugin's owner is "plugin:<id>" (PluginOwner).
//   - last_awake_ms: the previous wake's duration from RTC memory; null after any boot that is
//     not a timer wake.
package power

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/api"
)

// Why values (the spec's list).
const (
	WhyOff         = "off"
	WhyUnconfirmed = "unconfirmed"
	WhyOTA         = "ota"
	WhyWindow      = "window"
	WhyNetwork     = "network"
	WhyStream      = "stream"
	WhyPublishing  = "publishing"
	WhyHold        = "hold"
	WhyDone        = "done"
	WhyDeadline    = "deadline"
)

// Decisions.
const (
	DecisionOff   = "off"
	DecisionAwake = "awake"
	DecisionSleep = "sleep"
)

// tick is how often the rules are evaluated; pause is the short pause before sleeping.
const (
	tick  = 250 * time.Millisecond
	pause = 100 * time.Millisecond
)

// Config is the `power` namespace.
type Config interface {
	String(ns, key string) string
	Int(ns, key string) int
}

// Inputs are the facts the rules read, each from its owner.
type Inputs struct {
	// Unconfirmed: the running image waits for confirmation. UpdateBusy: an update is being
	// checked, downloaded or installed.
	Unconfirmed, UpdateBusy func() bool
	// NetUp reports the default route.
	NetUp func() bool
	// Stream is nil when the build has no Signal K client; Enabled is sk.ws_enabled.
	Stream *Stream
}

// Stream is the Signal K delta stream as the rules and the sleep sequence see it.
type Stream struct {
	Enabled   func() bool
	Connected func() bool
	// Flush waits until buffered deltas were sent or ctx ends.
	Flush func(ctx context.Context) error
}

// Options configures the duty cycle.
type Options struct {
	Clock  clockwork.Clock
	Logger *slog.Logger
	Config Config
	Inputs Inputs
	// ResetReason and RTC are this boot's handoff: RTC is this package's record (Encode).
	ResetReason string
	RTC         []byte
	// Sleep ends the app into deep sleep for d with rtc as RTC memory (this package's record).
	Sleep func(d time.Duration, rtc []byte)
}

// Status is the GET /power document.
type Status struct {
	Mode        string `json:"mode"`
	Decision    string `json:"decision"`
	Why         string `json:"why"`
	TimerWake   bool   `json:"timer_wake"`
	WakeCount   uint32 `json:"wake_count"`
	LastAwakeMS *int64 `json:"last_awake_ms"`
	IntervalS   int    `json:"interval_s"`
	UptimeMS    int64  `json:"uptime_ms"`
	DeadlineMS  *int64 `json:"deadline_ms"`
	Holds       Holds  `json:"holds"`
}

// Holds counts application holds.
type Holds struct {
	Total int            `json:"total"`
	By    map[string]int `json:"by"`
}

// Cycle is the duty cycle of one boot.
type Cycle struct {
	o         Options
	log       *slog.Logger
	start     time.Time
	timerWake bool
	wakeCount uint32
	lastAwake *int64

	mu        sync.Mutex
	holds     map[string]int
	netSince  time.Time // when the network came up (zero while down)
	connSince time.Time // when the stream connected (zero while not)
	sleeping  bool
	now       chan struct{} // sleep-now requests
}

// New reads the RTC record: a timer wake with an intact record continues the count, anything
// else starts at 0.
func New(o Options) *Cycle {
	o.Clock = cmp.Or(o.Clock, clockwork.NewRealClock())
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	c := &Cycle{o: o, log: o.Logger, start: o.Clock.Now(), holds: map[string]int{}, now: make(chan struct{}, 1)}
	if o.ResetReason == "deepsleep" {
		if rec, ok := Decode(o.RTC); ok {
			c.timerWake = true
			c.wakeCount = rec.WakeCount + 1
			ms := rec.AwakeMS
			c.lastAwake = &ms
		}
	}
	return c
}

// Record is what the cycle keeps in RTC memory across a sleep.
type Record struct {
	WakeCount uint32
	AwakeMS   int64
}

// RecordLen is the encoded size: magic "DPWR", wake count, awake ms, CRC-32.
const RecordLen = 4 + 4 + 8 + 4

// Encode is the RTC memory form of r.
func (r Record) Encode() []byte {
	b := make([]byte, RecordLen)
	copy(b, "DPWR")
	binary.BigEndian.PutUint32(b[4:], r.WakeCount)
	binary.BigEndian.PutUint64(b[8:], uint64(r.AwakeMS))
	binary.BigEndian.PutUint32(b[16:], crc32.ChecksumIEEE(b[:16]))
	return b
}

// Decode reads a record; ok is false for anything damaged.
func Decode(b []byte) (Record, bool) {
	if len(b) != RecordLen || string(b[:4]) != "DPWR" || crc32.ChecksumIEEE(b[:16]) != binary.BigEndian.Uint32(b[16:]) {
		return Record{}, false
	}
	r := Record{WakeCount: binary.BigEndian.Uint32(b[4:]), AwakeMS: int64(binary.BigEndian.Uint64(b[8:]))}
	if r.AwakeMS < 0 {
		return Record{}, false
	}
	return r, true
}

// PluginOwner is the hold owner of the plugin with this id.
func PluginOwner(id string) string { return "plugin:" + id }

// Hold adds one application hold for owner; the returned function releases it (once).
func (c *Cycle) Hold(owner string) (release func()) {
	c.mu.Lock()
	c.holds[owner]++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.holds[owner]--; c.holds[owner] <= 0 {
				delete(c.holds, owner)
			}
		})
	}
}

// ErrUnconfirmed refuses a sleep-now request while an update is unconfirmed.
var ErrUnconfirmed = errors.New("power: the running image is not confirmed yet")

// ErrUpdating refuses a sleep-now request while an update is in progress.
var ErrUpdating = errors.New("power: an update is in progress")

// SleepNow asks for deep sleep now (the application's own schedule); refused while an update
// is unconfirmed or in progress.
func (c *Cycle) SleepNow() error {
	if c.o.Inputs.Unconfirmed != nil && c.o.Inputs.Unconfirmed() {
		return ErrUnconfirmed
	}
	if c.o.Inputs.UpdateBusy != nil && c.o.Inputs.UpdateBusy() {
		return ErrUpdating
	}
	select {
	case c.now <- struct{}{}:
	default:
	}
	return nil
}

// evaluate runs the rule table at uptime.
func (c *Cycle) evaluate() Status {
	in := c.o.Inputs
	up := c.o.Clock.Since(c.start)
	window := time.Duration(c.o.Config.Int("power", "window_s")) * time.Second
	awakeMax := time.Duration(c.o.Config.Int("power", "awake_max_s")) * time.Second
	publish := time.Duration(c.o.Config.Int("power", "publish_ms")) * time.Millisecond
	deadline := window + awakeMax
	if c.timerWake {
		deadline = awakeMax
	}
	c.mu.Lock()
	holds := Holds{By: map[string]int{}}
	for k, n := range c.holds {
		holds.By[k] = n
		holds.Total += n
	}
	netSince, connSince := c.netSince, c.connSince
	c.mu.Unlock()
	st := Status{Mode: c.o.Config.String("power", "mode"), TimerWake: c.timerWake, WakeCount: c.wakeCount,
		LastAwakeMS: c.lastAwake, IntervalS: c.o.Config.Int("power", "interval_s"), UptimeMS: up.Milliseconds(), Holds: holds}
	if st.Mode != "cycle" {
		st.Decision, st.Why = DecisionOff, WhyOff
		return st
	}
	dl := deadline.Milliseconds()
	st.DeadlineMS = &dl
	awake := func(why string) Status { st.Decision, st.Why = DecisionAwake, why; return st }
	sleep := func(why string) Status { st.Decision, st.Why = DecisionSleep, why; return st }
	now := c.o.Clock.Now()
	stream := in.Stream != nil && in.Stream.Enabled != nil && in.Stream.Enabled()
	since := netSince
	if stream {
		since = connSince
	}
	switch {
	case in.Unconfirmed != nil && in.Unconfirmed():
		return awake(WhyUnconfirmed)
	case in.UpdateBusy != nil && in.UpdateBusy():
		return awake(WhyOTA)
	case !c.timerWake && up < window:
		return awake(WhyWindow)
	case up >= deadline:
		return sleep(WhyDeadline)
	case in.NetUp == nil || !in.NetUp():
		return awake(WhyNetwork)
	case stream && connSince.IsZero():
		return awake(WhyStream)
	case since.IsZero() || now.Sub(since) < publish:
		return awake(WhyPublishing)
	case holds.Total > 0:
		return awake(WhyHold)
	}
	return sleep(WhyDone)
}

// observe follows the network and stream edges the publishing rule counts from.
func (c *Cycle) observe() {
	in := c.o.Inputs
	now := c.o.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch up := in.NetUp != nil && in.NetUp(); {
	case up && c.netSince.IsZero():
		c.netSince = now
	case !up:
		c.netSince = time.Time{}
	}
	switch conn := in.Stream != nil && in.Stream.Connected != nil && in.Stream.Connected(); {
	case conn && c.connSince.IsZero():
		c.connSince = now
	case !conn:
		c.connSince = time.Time{}
	}
}

// Status is the GET /power document now.
func (c *Cycle) Status() Status {
	c.observe()
	st := c.evaluate()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sleeping {
		st.Decision = DecisionSleep
	}
	return st
}

// Run evaluates the rules every tick until ctx ends or the device goes to sleep.
func (c *Cycle) Run(ctx context.Context) {
	t := c.o.Clock.NewTicker(tick)
	for {
		c.observe()
		why := ""
		if st := c.evaluate(); st.Decision == DecisionSleep {
			why = st.Why
		}
		if why == "" {
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-c.now:
				why = "sleep-now"
			case <-t.Chan():
				continue
			}
		}
		t.Stop()
		c.goToSleep(ctx, why)
		return
	}
}

// goToSleep is the spec's order: flush, pause, RTC record, deep sleep.
func (c *Cycle) goToSleep(ctx context.Context, why string) {
	c.mu.Lock()
	c.sleeping = true
	c.mu.Unlock()
	interval := time.Duration(c.o.Config.Int("power", "interval_s")) * time.Second
	c.log.Info("going to sleep", "why", why, "interval", interval, "wake_count", c.wakeCount)
	if s := c.o.Inputs.Stream; s != nil && s.Flush != nil && s.Connected != nil && s.Connected() {
		fctx, cancel := clockwork.WithTimeout(ctx, c.o.Clock, time.Duration(c.o.Config.Int("power", "flush_ms"))*time.Millisecond)
		if err := s.Flush(fctx); err != nil {
			c.log.Warn("flush before sleep", "err", err)
		}
		cancel()
	}
	select {
	case <-ctx.Done():
		return
	case <-c.o.Clock.After(pause):
	}
	rec := Record{WakeCount: c.wakeCount, AwakeMS: c.o.Clock.Since(c.start).Milliseconds()}
	c.o.Sleep(interval, rec.Encode())
}

// Routes is GET /power.
func (c *Cycle) Routes() []api.Route {
	return []api.Route{{Method: http.MethodGet, Path: "/power", Handler: api.Document(c.Status), Doc: &api.Doc{Summary: "Power duty cycle",
		Description: "The duty cycle's mode, whether the device is awake and why, the rule that decided, the deadline, the application holds and the wake counters (README \"Power duty cycle\").",
		Response:    "The power document."}}}
}
