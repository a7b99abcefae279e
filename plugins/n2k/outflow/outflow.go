// Package outflow shapes the values the n2k plugin sends to Signal K after the mapping:
// owner-set path overrides move an instance's values to a path of the owner's choice
// (electrical.batteries.1 → electrical.batteries.house), and a per-path rate limit lets at
// most one value per path through per interval, the latest value of an interval being sent
// when the interval ends. Pure Go, no I/O: the caller publishes and tells it the time.
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

// Limiter lets at most one value per path through per Interval. A value arriving sooner is
// held, replacing any held before it (the latest wins), until Due sends it. The zero value
// with Interval 0 lets everything through.
type Limiter struct {
	Interval time.Duration
	last     map[string]time.Duration
	held     map[string]any
}

// Offer reports whether the value of path may go out now; when it may not, it is held.
func (l *Limiter) Offer(path string, v any, now time.Duration) bool {
	if l.Interval <= 0 {
		return true
	}
	if l.last == nil {
		l.last, l.held = map[string]time.Duration{}, map[string]any{}
	}
	if t, ok := l.last[path]; !ok || now-t >= l.Interval {
		l.last[path] = now
		delete(l.held, path) // a held value is superseded by this newer one
		return true
	}
	l.held[path] = v
	return false
}

// Held is a value the limiter let out late.
type Held struct {
	Path  string
	Value any
}

// Due answers the held values whose interval has passed at now, by path, and counts them
// as sent.
func (l *Limiter) Due(now time.Duration) []Held {
	if len(l.held) == 0 {
		return nil
	}
	var out []Held
	for p, v := range l.held {
		if now-l.last[p] >= l.Interval {
			out = append(out, Held{Path: p, Value: v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	for _, h := range out {
		l.last[h.Path] = now
		delete(l.held, h.Path)
	}
	return out
}

// Pending answers how many values are held.
func (l *Limiter) Pending() int { return len(l.held) }
