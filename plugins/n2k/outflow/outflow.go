// Package outflow shapes the values the n2k plugin sends to Signal K after the mapping:
// owner-set path overrides move an instance's values to a path of the owner's choice
// (electrical.batteries.1 → electrical.batteries.house), and a rate limit lets at most one
// value per path and source through per interval, the latest value of an interval being
// sent when the interval ends. Pure Go, no I/O: the caller publishes and tells it the time.
package outflow

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// MaxOverrides bounds the override table.
const MaxOverrides = 64

// Override moves the values under one path prefix (a whole path or its leading segments)
// to another prefix.
type Override struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Overrides renames paths by the longest matching From. The zero value renames nothing.
type Overrides struct {
	rules []Override        // longest From first
	cache map[string]string // path → renamed path
}

// ParseOverrides reads the override table (the JSON text of a table key: an array of
// {from, to} rows). Rows that break the rules (a from or to that is not a Signal K path of
// dot-separated segments of letters, digits, _ and -; a from given twice; rows past
// MaxOverrides) are left out and reported briefly; the others work.
func ParseOverrides(text string) (Overrides, []error) {
	var rows []Override
	if strings.TrimSpace(text) == "" {
		return Overrides{}, nil
	}
	if err := json.Unmarshal([]byte(text), &rows); err != nil {
		return Overrides{}, []error{fmt.Errorf("not a table of {from, to} rows: %w", err)}
	}
	var bad []error
	var o Overrides
	seen := map[string]bool{}
	for i, r := range rows {
		r.From, r.To = strings.TrimSpace(r.From), strings.TrimSpace(r.To)
		switch {
		case len(o.rules) >= MaxOverrides:
			bad = append(bad, fmt.Errorf("row %d: over %d rows", i+1, MaxOverrides))
			continue
		case !validPath(r.From) || !validPath(r.To):
			bad = append(bad, fmt.Errorf("row %d: not Signal K paths", i+1))
			continue
		case seen[r.From]:
			bad = append(bad, fmt.Errorf("row %d: from repeated", i+1))
			continue
		}
		seen[r.From] = true
		o.rules = append(o.rules, r)
	}
	sort.SliceStable(o.rules, func(i, j int) bool { return len(o.rules[i].From) > len(o.rules[j].From) })
	return o, bad
}

func validPath(p string) bool {
	if p == "" || len(p) > 200 {
		return false
	}
	for _, seg := range strings.Split(p, ".") {
		if seg == "" {
			return false
		}
		for _, c := range seg {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Len answers the number of rules.
func (o *Overrides) Len() int { return len(o.rules) }

// Path answers path renamed by the longest rule whose From is path or a leading part of it
// (whole segments only: electrical.batteries.1 does not match electrical.batteries.10).
func (o *Overrides) Path(path string) string {
	if len(o.rules) == 0 {
		return path
	}
	if p, ok := o.cache[path]; ok {
		return p
	}
	out := path
	for _, r := range o.rules {
		if path == r.From {
			out = r.To
			break
		}
		if rest, ok := strings.CutPrefix(path, r.From); ok && rest[0] == '.' {
			out = r.To + rest
			break
		}
	}
	if o.cache == nil {
		o.cache = map[string]string{}
	}
	if len(o.cache) < 4096 { // the mapping's paths are bounded; the cache is too, regardless
		o.cache[path] = out
	}
	return out
}

// MaxStreams bounds the streams a Limiter tracks at once. A stream is a path from one source
// (the same path from two senders is two streams in Signal K); the device keeps at most 256
// live sources per plugin instance, and a sender rarely sends more than a few dozen paths.
// A stream whose last value went out an interval ago or more is forgotten when room is
// needed: its next value would pass anyway. A new stream while all MaxStreams are active
// within one interval is not limited (its values pass, counted by Untracked).
const MaxStreams = 4096

// Stream is what the limit is kept per: a path and the source of its values. S is the
// caller's source identity, without what does not tell two Signal K sources apart.
type Stream[S comparable] struct {
	Path   string
	Source S
}

// Limiter lets at most one value per stream (path and source) through per Interval. A value
// arriving sooner is held, replacing any held before it for that stream (the latest wins),
// until Due sends it. The zero value with Interval 0 lets everything through.
type Limiter[S comparable] struct {
	Interval  time.Duration
	last      map[Stream[S]]time.Duration // when each stream last let a value out
	held      map[Stream[S]]heldValue
	seq       uint64        // counts holds, for Due's order
	swept     time.Duration // when forgotten streams were last removed
	didSweep  bool
	untracked uint64
}

type heldValue struct {
	v   any
	seq uint64
}

// Offer reports whether the value of stream s may go out now; when it may not, it is held.
func (l *Limiter[S]) Offer(s Stream[S], v any, now time.Duration) bool {
	if l.Interval <= 0 {
		return true
	}
	if l.last == nil {
		l.last, l.held = map[Stream[S]]time.Duration{}, map[Stream[S]]heldValue{}
	}
	t, ok := l.last[s]
	switch {
	case ok && now-t < l.Interval:
		l.seq++
		l.held[s] = heldValue{v, l.seq}
		return false
	case !ok && len(l.last) >= MaxStreams && !l.sweep(now):
		l.untracked++
		return true
	}
	l.last[s] = now
	delete(l.held, s) // a held value is superseded by this newer one
	return true
}

// sweep forgets the streams with nothing held whose interval has passed, at most once an
// interval, and reports whether there is room for another stream.
func (l *Limiter[S]) sweep(now time.Duration) bool {
	if !l.didSweep || now-l.swept >= l.Interval {
		l.swept, l.didSweep = now, true
		for s, t := range l.last {
			if _, held := l.held[s]; !held && now-t >= l.Interval {
				delete(l.last, s)
			}
		}
	}
	return len(l.last) < MaxStreams
}

// Held is a value the limiter let out late, with its stream.
type Held[S comparable] struct {
	Stream[S]
	Value any
}

// Due answers the held values whose interval has passed at now, by path (the streams of
// one path in the order their values were held), and counts them as sent.
func (l *Limiter[S]) Due(now time.Duration) []Held[S] {
	if len(l.held) == 0 {
		return nil
	}
	type due struct {
		Held[S]
		seq uint64
	}
	var ds []due
	for s, h := range l.held {
		if now-l.last[s] >= l.Interval {
			ds = append(ds, due{Held[S]{Stream: s, Value: h.v}, h.seq})
		}
	}
	sort.Slice(ds, func(i, j int) bool {
		if ds[i].Path != ds[j].Path {
			return ds[i].Path < ds[j].Path
		}
		return ds[i].seq < ds[j].seq
	})
	var out []Held[S]
	for _, d := range ds {
		out = append(out, d.Held)
		l.last[d.Stream] = now
		delete(l.held, d.Stream)
	}
	return out
}

// Pending answers how many values are held.
func (l *Limiter[S]) Pending() int { return len(l.held) }

// Tracked answers how many streams the limiter remembers.
func (l *Limiter[S]) Tracked() int { return len(l.last) }

// Untracked answers how many values passed unlimited because MaxStreams streams were active.
func (l *Limiter[S]) Untracked() uint64 { return l.untracked }
