// Package logs owns the device's in-RAM log ring: the console log lines of the app, kept in a
// bounded buffer and readable over REST (GET /logs), the run-time log levels per tag
// (PUT /logs/level), the `log/slog` handler every component logs through, and the `logs` SSE
// event that tells clients new lines are waiting.
//
// Lines look like the platform SDK's console lines: `I (12345) wifi: connected` — the level
// letter (E W I D V) at offset 0, the milliseconds since the app started in parentheses, the
// tag, the message, and slog attributes as ` key=value`. Once the wall clock is set, a line
// stored in the ring carries the UTC time inside the same parentheses
// (`I (12345 2026-11-21T23:50:00.123Z) wifi: connected`); the console copy and lines stored
// earlier are unchanged.
//
// Choices where the spec is silent:
//   - Sequence numbers start at 1 and grow by one per stored line, so `after=0` (and an absent
//     `after`) reads from the oldest kept line and `next - 1` is never negative. With an
//     empty ring `first` equals `next`.
//   - A page's `next` is the sequence after its last line (`from + len(lines)`), not the
//     ring's: when `limit` cut the page short, polling on with `after = next - 1` resumes
//     exactly after the last line received, with nothing skipped.
//   - An `after` at or beyond the ring's end (for example a client that polled the device
//     before it restarted) yields no lines and `next` set to the ring's next, so the same
//     poll-on rule resynchronises the client. `gap` is true only when lines between `after`
//     and `first` were lost.
//   - `limit` must be an integer from 1 to 1000 and `after` an integer from 0; anything else,
//     and a parameter given twice, is 400 `validation`. Other query parameters are ignored.
//   - Truncation at LOG_LINE_MAX (256) counts bytes of the stored line (prefix included) and
//     never splits a UTF-8 sequence. `size` and `used` count each line's bytes plus one for
//     its newline, as a console buffer would hold them.
//   - Stored lines drop ANSI escape sequences and other control characters; CR and LF inside
//     a message become spaces so that one sequence number is one line. Invalid UTF-8 becomes
//     U+FFFD. The console copy is written as logged, untruncated.
//   - Levels per tag work like esp_log_level_set: `*` is the default for all tags (info at
//     start), a tag's own level overrides it. Tags given to PUT /logs/level are 1–32
//     printable ASCII characters without spaces; at most 32 tags besides `*` may hold their
//     own level. Levels are not persisted.
//   - The `logs` event carries the ring's next sequence. Lines stored before Notify starts are
//     not announced (a client reads them with its first GET /logs).
package logs

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// Defaults of the spec's Limits table.
const (
	DefaultSize    = 16384 // LOG_RING_SIZE
	DefaultLineMax = 256   // LOG_LINE_MAX
	// FirstSeq is the sequence number of the first line ever stored.
	FirstSeq = 1
)

// LevelVerbose is the slog level of the platform's verbose level, below debug.
const LevelVerbose = slog.LevelDebug - 4

// levelNone is the threshold of the level `none`: no record is that severe.
const levelNone = slog.Level(math.MaxInt32)

// levelAll is the threshold of the level `verbose`: every record passes.
const levelAll = slog.Level(math.MinInt32)

const (
	maxTagLen       = 32
	maxTagOverrides = 32
)

// Errors of SetLevel.
var (
	ErrLevel       = errors.New("level must be one of none, error, warn, info, debug, verbose")
	ErrTag         = errors.New("tag must be 1 to 32 printable ASCII characters without spaces")
	ErrTooManyTags = errors.New("too many tags with their own level")
)

// Options configure a Ring. Zero values take the spec's defaults.
type Options struct {
	// Size is the ring capacity in bytes (LOG_RING_SIZE). It is raised to at least one
	// maximal line.
	Size int
	// LineMax is the longest stored line in bytes (LOG_LINE_MAX).
	LineMax int
	// Clock reads time; the real clock when nil.
	Clock clockwork.Clock
	// Console receives every line that passes the level filter (the app's stderr); nil
	// means no console.
	Console io.Writer
	// Start is the instant the monotonic milliseconds count from; the clock's now when zero.
	Start time.Time
}

// levels is an immutable table of thresholds; SetLevel replaces it whole so that the hot
// path (Enabled) reads it without a lock.
type levels struct {
	def  slog.Level
	tags map[string]slog.Level
}

// Ring is the log ring. It is safe for concurrent use.
type Ring struct {
	size    int
	lineMax int
	clock   clockwork.Clock
	start   time.Time
	console io.Writer

	consoleMu sync.Mutex
	levels    atomic.Pointer[levels]
	wall      atomic.Pointer[func() (time.Time, bool)]

	mu      sync.Mutex
	lines   []string // oldest first; lines[0] has sequence first
	first   int64
	used    int
	dropped int64
	waiters map[chan struct{}]struct{}
}

// New builds an empty ring.
func New(opts Options) *Ring {
	if opts.LineMax <= 0 {
		opts.LineMax = DefaultLineMax
	}
	if opts.Size <= 0 {
		opts.Size = DefaultSize
	}
	if opts.Size < opts.LineMax+1 {
		opts.Size = opts.LineMax + 1
	}
	opts.Clock = cmp.Or(opts.Clock, clockwork.NewRealClock())
	if opts.Start.IsZero() {
		opts.Start = opts.Clock.Now()
	}
	r := &Ring{
		size:    opts.Size,
		lineMax: opts.LineMax,
		clock:   opts.Clock,
		start:   opts.Start,
		console: opts.Console,
		first:   FirstSeq,
		waiters: make(map[chan struct{}]struct{}),
	}
	r.levels.Store(&levels{def: slog.LevelInfo, tags: map[string]slog.Level{}})
	return r
}

// SetWallClock installs the source of wall-clock time; it answers ok=false while the clock
// is not set. Lines stored from then on carry the UTC time when ok.
func (r *Ring) SetWallClock(now func() (time.Time, bool)) {
	if now == nil {
		r.wall.Store(nil)
		return
	}
	r.wall.Store(&now)
}

// levelNames maps the API's level words to slog thresholds, in the spec's order.
var levelNames = []struct {
	name string
	lvl  slog.Level
}{
	{"none", levelNone},
	{"error", slog.LevelError},
	{"warn", slog.LevelWarn},
	{"info", slog.LevelInfo},
	{"debug", slog.LevelDebug},
	{"verbose", levelAll},
}

func parseLevel(s string) (slog.Level, bool) {
	for _, l := range levelNames {
		if l.name == s {
			return l.lvl, true
		}
	}
	return 0, false
}

func levelName(l slog.Level) string {
	for _, n := range levelNames {
		if n.lvl == l {
			return n.name
		}
	}
	return strconv.Itoa(int(l))
}

func validTag(tag string) bool {
	if len(tag) == 0 || len(tag) > maxTagLen {
		return false
	}
	for i := 0; i < len(tag); i++ {
		if tag[i] <= ' ' || tag[i] > '~' {
			return false
		}
	}
	return true
}

// SetLevel sets the level of tag (`*` for the default of every tag without its own level).
// level is one of none, error, warn, info, debug, verbose.
func (r *Ring) SetLevel(tag, level string) error {
	lvl, ok := parseLevel(level)
	if !ok {
		return fmt.Errorf("set level %q: %w", level, ErrLevel)
	}
	if !validTag(tag) {
		return fmt.Errorf("set level of tag %q: %w", tag, ErrTag)
	}
	for {
		old := r.levels.Load()
		nl := &levels{def: old.def, tags: old.tags}
		if tag == "*" {
			nl.def = lvl
		} else {
			if _, exists := old.tags[tag]; !exists && len(old.tags) >= maxTagOverrides {
				return fmt.Errorf("set level of tag %q: %w", tag, ErrTooManyTags)
			}
			nl.tags = make(map[string]slog.Level, len(old.tags)+1)
			for k, v := range old.tags {
				nl.tags[k] = v
			}
			nl.tags[tag] = lvl
		}
		if r.levels.CompareAndSwap(old, nl) {
			return nil
		}
	}
}

// Level answers the effective level word of tag.
func (r *Ring) Level(tag string) string {
	return levelName(r.threshold(tag))
}

func (r *Ring) threshold(tag string) slog.Level {
	l := r.levels.Load()
	if v, ok := l.tags[tag]; ok {
		return v
	}
	return l.def
}

// Enabled reports whether a record of level for tag passes the filter.
func (r *Ring) Enabled(tag string, level slog.Level) bool {
	return level >= r.threshold(tag)
}

// store appends one finished line and drops the oldest lines to make room.
func (r *Ring) store(line string) {
	cost := len(line) + 1
	r.mu.Lock()
	for r.used+cost > r.size && len(r.lines) > 0 {
		r.used -= len(r.lines[0]) + 1
		r.lines[0] = ""
		r.lines = r.lines[1:]
		r.first++
		r.dropped++
	}
	r.lines = append(r.lines, line)
	r.used += cost
	for ch := range r.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	r.mu.Unlock()
}

// Next answers the sequence the next stored line will get.
func (r *Ring) Next() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first + int64(len(r.lines))
}

// Page is one read of the ring, the spec's Log page.
type Page struct {
	First   int64    `json:"first"`
	Next    int64    `json:"next"`
	Dropped int64    `json:"dropped"`
	Size    int      `json:"size"`
	Used    int      `json:"used"`
	Gap     bool     `json:"gap"`
	From    int64    `json:"from"`
	Lines   []string `json:"lines"`
}

// Read answers up to limit lines with a sequence above after; after < 0 reads from the oldest
// kept line. The snapshot is consistent and the lock is released before it is returned.
func (r *Ring) Read(after int64, limit int) Page {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := r.first + int64(len(r.lines))
	p := Page{First: r.first, Dropped: r.dropped, Size: r.size, Used: r.used}
	from := r.first
	if after >= 0 {
		// An after at or beyond the end reads nothing; comparing first also keeps after+1
		// from overflowing.
		start := end
		if after < end {
			start = after + 1
		}
		if start < r.first {
			p.Gap = true
		} else {
			from = start
		}
	}
	n := end - from
	if limit >= 0 && n > int64(limit) {
		n = int64(limit)
	}
	off := from - r.first
	p.From = from
	p.Next = from + n
	p.Lines = make([]string, n)
	copy(p.Lines, r.lines[off:off+n])
	return p
}
