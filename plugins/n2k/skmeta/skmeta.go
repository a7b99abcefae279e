// Package skmeta answers the Signal K units of a path, from the Signal K specification's
// own metadata (keyswithmetadata.json of the npm package @signalk/signalk-schema, the version
// signalk-server and n2k-signalk use; CC-BY-SA 2.0, notice kept in the generated file). The
// table is generated, never typed by hand: `make n2k-reference` installs the pinned package
// into the git-ignored .cache/ and `go generate ./plugins/n2k/skmeta` rewrites units_gen.go.
// The n2k plugin declares these units as meta for the paths it publishes.
package skmeta

//go:generate go run ./gen -in ../../../.cache/n2k/ref/node_modules/@signalk/signalk-schema -out units_gen.go

import "strings"

// Any is the pattern segment that matches any one segment (an instance id, a phase).
const Any = "*"

// rule is one path pattern of the specification (vessels.self relative, dot-separated,
// Any for a variable segment) and its units.
type rule struct {
	pattern string
	units   string
}

// Units answers the units the specification gives path (relative to the vessel, e.g.
// electrical.batteries.house.voltage → V), or "" when it gives none. The most specific
// pattern wins: the one with the fewest variable segments.
func Units(path string) string {
	if u, ok := exact[path]; ok {
		return u
	}
	segs := strings.Split(path, ".")
	best, bestAny := "", len(segs)+1
	for _, r := range wild {
		if n, ok := match(r.pattern, segs); ok && n < bestAny {
			best, bestAny = r.units, n
		}
	}
	return best
}

// match reports whether pattern matches the segments and how many Any segments it used.
func match(pattern string, segs []string) (int, bool) {
	n := 0
	for i := 0; ; i++ {
		seg, rest, more := strings.Cut(pattern, ".")
		if i >= len(segs) {
			return 0, false
		}
		switch {
		case seg == Any:
			n++
		case seg != segs[i]:
			return 0, false
		}
		if !more {
			return n, i == len(segs)-1
		}
		pattern = rest
	}
}

// exact and wild split the generated rules: patterns without Any by path, the others in order.
var exact, wild = split(rules)

func split(rs []rule) (map[string]string, []rule) {
	ex := map[string]string{}
	var w []rule
	for _, r := range rs {
		if strings.Contains("."+r.pattern+".", "."+Any+".") {
			w = append(w, r)
		} else {
			ex[r.pattern] = r.units
		}
	}
	return ex, w
}
