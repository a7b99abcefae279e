package abi

import (
	"errors"
	"fmt"
)

// Values with their own source (minor 5). A gateway plugin relays what other devices
// measured: an NMEA 2000 bus with two GPS receivers carries two positions, and Signal K tells
// them apart by the update's source. sk_publish_src carries a Source record before the
// values; the device sends them in an update whose source is
// `{label: <the device's label>, type, src, pgn, instance}`, which the server names
// `<label>.<src>` ($source, `<label>.<src>.<instance>` with an instance) and lists under
// /signalk/v1/api/sources, as it does for its own NMEA 2000 connections. sk_publish and
// sk_publish_ctx keep the device's own source.

// Limits of a source record.
const (
	// MaxSourceType bounds a source's type ("NMEA2000", "NMEA0183", "Plugin"...).
	MaxSourceType = 32
	// MaxSourceSrc bounds a source's src and instance.
	MaxSourceSrc = 32
	// MaxPGN is the largest NMEA 2000 parameter group number (18 bits: data page and PDU
	// format and specific).
	MaxPGN = 0x3FFFF
)

// SourceTypeN2K is the type of an NMEA 2000 source: its src is the sender's bus address and
// its pgn the message's parameter group number, as @signalk/n2k-signalk sets them.
const SourceTypeN2K = "NMEA2000"

// DeviceSrc is the src of the device's own updates (sk_publish, sk_publish_ctx); a plugin's
// source may not take it.
const DeviceSrc = "devhost"

// Source is where published values come from.
type Source struct {
	// Type is 1..32 letters and digits, the first a letter: "NMEA2000" (SourceTypeN2K),
	// "NMEA0183", "Plugin"...
	Type string
	// Src is the sender within the device: 1..32 letters, digits, '_' and '-', not
	// DeviceSrc. An NMEA2000 source's src is the sender's address in decimal, 0..253.
	Src string
	// PGN is the NMEA 2000 parameter group number, 0 for none; an NMEA2000 source needs one.
	PGN uint32
	// Instance is empty, or 1..32 letters, digits, '_' and '-': the server then names the
	// source <label>.<src>.<instance>.
	Instance string
}

// Validate reports why s is not a source sk_publish_src accepts, nil when it is.
func (s Source) Validate() error {
	if !sourceWord(s.Type, MaxSourceType, false) || (s.Type[0] >= '0' && s.Type[0] <= '9') {
		return fmt.Errorf("abi: source type %q: want 1 to %d letters and digits, the first a letter", s.Type, MaxSourceType)
	}
	if !sourceWord(s.Src, MaxSourceSrc, true) {
		return fmt.Errorf("abi: source src %q: want 1 to %d letters, digits, _ and -", s.Src, MaxSourceSrc)
	}
	if s.Src == DeviceSrc {
		return fmt.Errorf("abi: source src %q is the device's own", s.Src)
	}
	if s.Instance != "" && !sourceWord(s.Instance, MaxSourceSrc, true) {
		return fmt.Errorf("abi: source instance %q: want 1 to %d letters, digits, _ and -", s.Instance, MaxSourceSrc)
	}
	if s.PGN > MaxPGN {
		return fmt.Errorf("abi: source pgn %d: at most %d", s.PGN, MaxPGN)
	}
	if s.Type == SourceTypeN2K {
		if !busAddress(s.Src) {
			return fmt.Errorf("abi: NMEA2000 source src %q: want a bus address 0 to 253 in decimal", s.Src)
		}
		if s.PGN == 0 {
			return errors.New("abi: NMEA2000 source without a pgn")
		}
	}
	return nil
}

// busAddress reports whether w is an NMEA 2000 bus address in decimal: 0 to 253, no leading
// zero. Written out rather than parsed and formatted again: a gateway checks a source per
// message it relays.
func busAddress(w string) bool {
	if len(w) == 0 || len(w) > 3 || (len(w) > 1 && w[0] == '0') {
		return false
	}
	a := 0
	for i := 0; i < len(w); i++ {
		if w[i] < '0' || w[i] > '9' {
			return false
		}
		a = a*10 + int(w[i]-'0')
	}
	return a <= 253
}

// sourceWord reports whether w is 1..max letters and digits, and '_' and '-' when punct.
func sourceWord(w string, max int, punct bool) bool {
	if len(w) == 0 || len(w) > max {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case punct && (c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// AppendSourceGroup appends the head of one group of an sk_publish_src message: the source
// record, the context ("" for vessels.self) and n, the count of the value records that follow
// it (AppendValue, AppendNumber...). A message is one group or more, so that a gateway sends
// the values of all its senders in one call.
func AppendSourceGroup(b []byte, src Source, context string, n int) []byte {
	b = appendStr(b, src.Type)
	b = appendStr(b, src.Src)
	b = appendU32(b, src.PGN)
	b = appendStr(b, src.Instance)
	b = appendStr(b, context)
	return appendU32(b, uint32(n))
}

// SourceGroup is one group of an sk_publish_src message: values with their source, for a
// context ("" for vessels.self).
type SourceGroup struct {
	Source  Source
	Context string
	Values  []PathValue
}

// DecodeSourceGroups decodes an sk_publish_src message: one group or more, each the source
// record (str type, str src, u32 pgn, str instance; Source.Validate), str context ("" for
// vessels.self, else ValidContext), u32 n (at least 1), then n value records; at most max
// value records in all (0: MaxValuesPerCall). With a context, a record may have the empty
// path with a JSON object, as in sk_publish_ctx.
func DecodeSourceGroups(b []byte, max int) ([]SourceGroup, error) {
	_, groups, err := appendDecodedSourceGroups(nil, nil, reader{b: b}, max)
	return groups, err
}

// AppendDecodedSourceGroups is DecodeSourceGroups reading paths through t, appending the
// values to vals and the groups (whose Values are within vals) to groups.
func (t *PathTable) AppendDecodedSourceGroups(vals []PathValue, groups []SourceGroup, b []byte, max int) ([]PathValue, []SourceGroup, error) {
	return appendDecodedSourceGroups(vals, groups, reader{b: b, paths: t}, max)
}

func appendDecodedSourceGroups(vals []PathValue, groups []SourceGroup, r reader, max int) ([]PathValue, []SourceGroup, error) {
	if max <= 0 {
		max = MaxValuesPerCall
	}
	v0, g0 := len(vals), len(groups)
	fail := func(err error) ([]PathValue, []SourceGroup, error) { return vals[:v0], groups[:g0], err }
	if len(r.b) == 0 {
		return fail(errors.New("abi: no values"))
	}
	var ends []int // where each group's values end in vals: vals may move as it grows
	for len(r.b) > 0 {
		var g SourceGroup
		g.Source.Type = r.str(MaxSourceType, "source type")
		g.Source.Src = r.str(MaxSourceSrc, "source src")
		g.Source.PGN = r.u32()
		g.Source.Instance = r.str(MaxSourceSrc, "source instance")
		g.Context = r.str(MaxContext, "context")
		n := int(r.u32())
		if r.err != nil {
			return fail(r.err)
		}
		if err := g.Source.Validate(); err != nil {
			return fail(err)
		}
		if g.Context != "" {
			if err := ValidContext(g.Context); err != nil {
				return fail(err)
			}
		}
		switch {
		case n == 0:
			return fail(errors.New("abi: a source group without values"))
		case n > max-(len(vals)-v0):
			return fail(fmt.Errorf("abi: more than %d values", max))
		}
		r.root = g.Context != ""
		for range n {
			vals = append(vals, r.value())
			if r.err != nil {
				return fail(r.err)
			}
		}
		groups = append(groups, g)
		ends = append(ends, len(vals))
	}
	start := v0
	for i, end := range ends {
		groups[g0+i].Values = vals[start:end:end]
		start = end
	}
	return vals, groups, nil
}
