package skstream

import (
	"fmt"
	"slices"
	"strings"
)

func pathByte(c byte) bool { return pathBytes[c] }

// pathBytes marks the bytes a path may hold; checkPath runs on every published value, and a
// table lookup per byte costs less than the chain of comparisons it replaces.
var pathBytes = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == '-' || c == ':'
	}
	return t
}()

// checkPath accepts a dotted Signal K path: 1..MaxPathLen bytes of letters, digits and
// `._-:`, without empty segments.
func checkPath(p string) error {
	if len(p) == 0 || len(p) > MaxPathLen {
		return fmt.Errorf("%w: path length %d", ErrInvalidArgument, len(p))
	}
	// One pass over the bytes (this runs for every published value): a dot at the start,
	// after another dot or at the end is an empty segment, reported only when every byte is
	// a path byte.
	empty, prevDot := false, true
	for i := 0; i < len(p); i++ {
		c := p[i]
		if !pathBytes[c] {
			return fmt.Errorf("%w: path %q: byte %q", ErrInvalidArgument, p, c)
		}
		dot := c == '.'
		empty = empty || dot && prevDot
		prevDot = dot
	}
	if empty || prevDot {
		return fmt.Errorf("%w: path %q has an empty segment", ErrInvalidArgument, p)
	}
	return nil
}

// checkPattern accepts an exact path or a family: `prefix.*`, `prefix*` or `*`.
func checkPattern(p string) error {
	if p == "*" {
		return nil
	}
	prefix, family := strings.CutSuffix(p, "*")
	if !family {
		return checkPath(p)
	}
	if strings.Contains(prefix, "*") {
		return fmt.Errorf("%w: pattern %q: `*` only at the end", ErrInvalidArgument, p)
	}
	return checkPath(strings.TrimSuffix(prefix, "."))
}

// matchPattern reports whether the pattern selects the path.
func matchPattern(pattern, path string) bool {
	if prefix, family := strings.CutSuffix(pattern, "*"); family {
		return strings.HasPrefix(path, prefix)
	}
	return pattern == path
}

// Route answers the entry of byPattern whose pattern owns path, the way the stream routes an
// inbound PUT: the exact path first, else the family with the longest prefix; ok is false when
// no pattern selects the path. Code that routes beside the stream uses it to agree with it.
func Route[T any](byPattern map[string]T, path string) (owner T, ok bool) {
	if v, found := byPattern[path]; found {
		return v, true
	}
	bestLen := -1
	for pat, v := range byPattern {
		prefix, family := strings.CutSuffix(pat, "*")
		if family && strings.HasPrefix(path, prefix) && len(prefix) > bestLen {
			owner, ok, bestLen = v, true, len(prefix)
		}
	}
	return owner, ok
}

// covers reports whether pattern a selects every path pattern b selects.
func covers(a, b string) bool {
	pa, fa := strings.CutSuffix(a, "*")
	if !fa {
		return a == b
	}
	pb, _ := strings.CutSuffix(b, "*")
	return strings.HasPrefix(pb, pa)
}

// coverSet is the sorted set of distinct patterns that no other distinct pattern covers: what
// the server must be subscribed to so every pattern is served exactly once.
func coverSet(patterns []string) []string {
	uniq := slices.Clone(patterns)
	slices.Sort(uniq)
	uniq = slices.Compact(uniq)
	out := uniq[:0:0]
	for _, p := range uniq {
		covered := false
		for _, q := range uniq {
			if q != p && covers(q, p) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	return out
}

// metaURL is the REST address of a path's metadata.
func metaURL(path string) string {
	return "/signalk/v1/api/vessels/self/" + strings.ReplaceAll(path, ".", "/") + "/meta"
}
