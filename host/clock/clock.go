// Package clock owns the device's wall clock: the time learned from ranked sources (spec
// "Clock sources"), the value carried in RTC memory across a deep-sleep wake, the time document
// of GET /time and the PUT /time endpoint. SNTP itself lives elsewhere; this package only
// reports its configuration and accepts its answers through Set.
//
// Choices where the spec is silent:
//
//   - The clock keeps the wall time at the moment a source set it together with a monotonic
//     reading taken at the same moment, and computes the current time as that wall time plus
//     the monotonic time elapsed since. The host's own clock can jump; this clock does not.
//   - Times before 2020-01-01T00:00:00Z (Floor) or from 2100-01-01T00:00:00Z (Ceiling) on are
//     refused by Set with ErrOutOfRange and by PUT /time with 400 `validation`, so the clock
//     never reports a 1970 value or an absurd future one.
//   - `none` is not a source anyone can set. `rtc` may be set through Set (a value read back from
//     a clock that kept time, counted as synced at the moment it was set); the deep-sleep value
//     is normally adopted through Options.RTC.
//   - Staleness of the deep-sleep value: the carried value remembers the wall time at which a
//     real source (sntp, manual, sk) last set the clock (RTCValue.SyncedAt). Its age is the
//     current clock reading minus that instant, so it grows across consecutive sleeps and while
//     awake. With source `rtc` and an age strictly greater than StaleAfter, `synced` is false;
//     `now` stays the best guess and `source` stays `rtc`. StaleAfter 0 disables the rule.
//   - Subscribers are called synchronously in the goroutine that called Set, after the clock's
//     lock is released, in slot order. They must not block.
//   - PUT /time: `now` is an integer literal (no fraction or exponent, so 1.0 and 1e12 are
//     refused) in unix milliseconds within [Floor, Ceiling). `tz` is a string of 1..64 bytes
//     (the config key's maxLength) of printable ASCII without spaces; its POSIX syntax is not
//     checked further, since it is display only. An empty object, unknown or duplicated
//     members, null values and trailing data are 400 `validation`. `tz` alone is always
//     accepted. When `now` is outranked, nothing changes, `tz` included: a `tz` already written
//     in the same request is put back before the 409 is answered.
//   - GET /time reports `tz` from the TZ store; without a store the clock keeps `UTC0` in memory.
package clock

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Source is who set the clock. Its numeric value is its rank: higher wins.
type Source int

// The sources in rank order (spec "Clock sources").
const (
	SourceNone   Source = 0
	SourceRTC    Source = 1
	SourceSK     Source = 2
	SourceManual Source = 3
	SourceSNTP   Source = 4
)

var sourceNames = [...]string{"none", "rtc", "sk", "manual", "sntp"}

// String is the source's name in the time document.
func (s Source) String() string {
	if s.valid() {
		return sourceNames[s]
	}
	return fmt.Sprintf("source(%d)", int(s))
}

// Rank is the source's rank; a lower rank never overrides a higher one.
func (s Source) Rank() int { return int(s) }

func (s Source) valid() bool { return s >= SourceNone && s <= SourceSNTP }

// MarshalText writes the source's name, so the time document carries `sntp`, not 4.
func (s Source) MarshalText() ([]byte, error) {
	if !s.valid() {
		return nil, fmt.Errorf("clock: unknown source %d", int(s))
	}
	return []byte(sourceNames[s]), nil
}

// ParseSource reads a source name of the time document.
func ParseSource(name string) (Source, error) {
	for i, n := range sourceNames {
		if n == name {
			return Source(i), nil
		}
	}
	return SourceNone, fmt.Errorf("clock: unknown source %q", name)
}

var (
	// Floor is the earliest time the clock accepts.
	Floor = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	// Ceiling is the first time the clock no longer accepts.
	Ceiling = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// DefaultStaleAfter is TIME_RTC_STALE_H.
const DefaultStaleAfter = 24 * time.Hour

// MaxSubscribers is the Clock limits row's subscriber slot count.
const MaxSubscribers = 4

// DefaultTZ is what GET /time reports when no TZ store is given (the time.tz default).
const DefaultTZ = "UTC0"

var (
	// ErrOutranked: a higher-ranked source holds the clock.
	ErrOutranked = errors.New("clock: a higher-ranked source holds the clock")
	// ErrOutOfRange: the time is before Floor or not before Ceiling.
	ErrOutOfRange = errors.New("clock: time outside the accepted range")
	// ErrInvalidSource: the source is `none` or unknown.
	ErrInvalidSource = errors.New("clock: invalid source")
	// ErrNoSlot: every subscriber slot is taken.
	ErrNoSlot = errors.New("clock: all subscriber slots are taken")
)

// TZStore holds the POSIX timezone string (config key `time.tz`, display only).
type TZStore interface {
	TZ() string
	SetTZ(string) error
}

// SNTPConfig is the SNTP part of the time document.
type SNTPConfig struct {
	Enabled  bool `json:"enabled"`
	Running  bool `json:"running"` // true after the first network-up
	FromDHCP bool `json:"from_dhcp"`
	// Servers are the configured non-empty servers only.
	Servers []string `json:"servers"`
}

// Options configure a Clock.
type Options struct {
	Clock  clockwork.Clock // nil means the real clock
	Logger *slog.Logger    // nil discards
	// RTC is the value carried in RTC memory across a deep-sleep wake. The caller passes it
	// only after a real deep-sleep wake (not after power-on, panic or an OTA reboot); nil
	// otherwise. A value outside the accepted range is ignored with a warning.
	RTC *RTCValue
	// StaleAfter is TIME_RTC_STALE_H (DefaultStaleAfter); 0 disables the stale rule.
	StaleAfter time.Duration
	TZ         TZStore           // nil keeps DefaultTZ in memory
	SNTP       func() SNTPConfig // nil reports SNTP disabled
}

// Clock is the device's wall clock.
type Clock struct {
	clk        clockwork.Clock
	log        *slog.Logger
	staleAfter time.Duration
	tz         TZStore
	sntp       func() SNTPConfig

	mu       sync.Mutex
	src      Source
	wall     time.Time // wall time when src set the clock (UTC, no monotonic reading)
	mono     time.Time // clk.Now() at that moment; only differences to it are used
	syncedAt time.Time // wall time a source other than the deep-sleep carry last set it

	subMu sync.Mutex
	subs  [MaxSubscribers]*subscription
}

type subscription struct{ fn func(Source) }

// New builds the clock and, when opts.RTC is given, adopts the deep-sleep value as source `rtc`.
func New(opts Options) *Clock {
	c := &Clock{
		clk:        opts.Clock,
		log:        opts.Logger,
		staleAfter: opts.StaleAfter,
		tz:         opts.TZ,
		sntp:       opts.SNTP,
	}
	c.clk = cmp.Or(c.clk, clockwork.NewRealClock())
	c.log = cmp.Or(c.log, slog.New(slog.DiscardHandler))
	if c.tz == nil {
		c.tz = &memTZ{tz: DefaultTZ}
	}
	if opts.RTC != nil {
		c.adoptRTC(*opts.RTC)
	}
	return c
}

func (c *Clock) adoptRTC(v RTCValue) {
	if err := v.check(); err != nil {
		c.log.Warn("deep-sleep clock value ignored", "err", err)
		return
	}
	wake := v.Wall.Add(v.SleptFor)
	c.mu.Lock()
	c.src = SourceRTC
	c.wall = wake.Round(0).UTC()
	c.mono = c.clk.Now()
	c.syncedAt = v.SyncedAt.Round(0).UTC()
	c.mu.Unlock()
	c.log.Info("clock set from the deep-sleep value", "source", SourceRTC.String(),
		"time", wake.UTC().Format(isoLayout), "carried_from", v.Source.String(),
		"slept", v.SleptFor.String())
}

// Set sets the clock to t as src. It returns ErrOutranked when a higher-ranked source holds
// the clock, ErrOutOfRange for a time outside [Floor, Ceiling), ErrInvalidSource for `none`.
// A source of the same rank replaces the current value. Subscribers are called after every
// successful Set.
func (c *Clock) Set(src Source, t time.Time) error {
	if !src.valid() || src == SourceNone {
		return fmt.Errorf("%w: %s", ErrInvalidSource, src)
	}
	if err := checkRange(t); err != nil {
		return err
	}
	c.mu.Lock()
	if c.src > src {
		holder := c.src
		c.mu.Unlock()
		c.log.Debug("clock set refused", "source", src.String(), "holder", holder.String())
		return fmt.Errorf("%w: %s outranks %s", ErrOutranked, holder, src)
	}
	var step time.Duration
	had := c.src != SourceNone
	if had {
		step = t.Sub(c.nowLocked())
	}
	c.src = src
	c.wall = t.Round(0).UTC()
	c.mono = c.clk.Now()
	c.syncedAt = c.wall
	c.mu.Unlock()

	if had {
		c.log.Info("clock set", "source", src.String(), "time", t.UTC().Format(isoLayout), "step", step.String())
	} else {
		c.log.Info("clock set", "source", src.String(), "time", t.UTC().Format(isoLayout))
	}
	c.notify(src)
	return nil
}

// checkRank reports ErrOutranked when src could not set the clock now.
func (c *Clock) checkRank(src Source) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src > src {
		return fmt.Errorf("%w: %s outranks %s", ErrOutranked, c.src, src)
	}
	return nil
}

func checkRange(t time.Time) error {
	if t.Before(Floor) || !t.Before(Ceiling) {
		return fmt.Errorf("%w: %s is not within [%s, %s)", ErrOutOfRange,
			t.UTC().Format(isoLayout), Floor.Format(isoLayout), Ceiling.Format(isoLayout))
	}
	return nil
}

// nowLocked is the current wall time; c.mu is held and the clock is set.
func (c *Clock) nowLocked() time.Time {
	return c.wall.Add(c.clk.Since(c.mono))
}

// Now is the current time, the source that set it and whether it counts as synced. While
// nothing set the clock it is the zero time, SourceNone and false.
func (c *Clock) Now() (t time.Time, src Source, synced bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src == SourceNone {
		return time.Time{}, SourceNone, false
	}
	now := c.nowLocked()
	synced = true
	if c.src == SourceRTC && c.staleAfter > 0 && now.Sub(c.syncedAt) > c.staleAfter {
		synced = false
	}
	return now, c.src, synced
}

// WallClock is the current time; ok is false while nothing set the clock.
func (c *Clock) WallClock() (time.Time, bool) {
	t, src, _ := c.Now()
	return t, src != SourceNone
}

// Subscribe registers fn to be called with the source after every successful Set. There are
// MaxSubscribers slots; when all are taken it returns ErrNoSlot. cancel frees the slot and may
// be called more than once.
func (c *Clock) Subscribe(fn func(Source)) (cancel func(), err error) {
	if fn == nil {
		return nil, errors.New("clock: nil subscriber")
	}
	s := &subscription{fn: fn}
	c.subMu.Lock()
	defer c.subMu.Unlock()
	for i := range c.subs {
		if c.subs[i] == nil {
			c.subs[i] = s
			return func() {
				c.subMu.Lock()
				defer c.subMu.Unlock()
				if c.subs[i] == s {
					c.subs[i] = nil
				}
			}, nil
		}
	}
	return nil, ErrNoSlot
}

func (c *Clock) notify(src Source) {
	c.subMu.Lock()
	subs := c.subs
	c.subMu.Unlock()
	for _, s := range subs {
		if s != nil {
			s.fn(src)
		}
	}
}

// memTZ keeps the timezone in memory when no store is given.
type memTZ struct {
	mu sync.Mutex
	tz string
}

func (m *memTZ) TZ() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tz
}

func (m *memTZ) SetTZ(tz string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tz = tz
	return nil
}
