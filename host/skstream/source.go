package skstream

import (
	"fmt"
	"strconv"

	"devhost/host/sk"
)

// Values with a source of their own: a gateway relays what other devices measured (an NMEA
// 2000 sender's heading, with its bus address and PGN), and the server tells the senders apart
// by the update's source. Such values get their own group in the open batch, one per
// (context, source), and so their own update; the label stays the device's.

// groupKey names one group of the open batch: the zero key is the own vessel's values from
// the device's own source.
type groupKey struct {
	context string
	src     sk.Source
}

// overhead is the bytes of a message of the group besides its values and the label.
func (k groupKey) overhead() int {
	n := deltaOverhead
	if k.context != "" {
		n = contextOverhead(k.context)
	}
	if k.src != (sk.Source{}) {
		n += sourceTailLen(&k.src) - sourceTailLen(&sk.Source{})
	}
	return n
}

// sourceTailLen is len(appendSourceTail(nil, src)), counted without writing it: every
// publication of a group asks.
func sourceTailLen(src *sk.Source) int {
	if src.Src == "" {
		return len(`,"src":"` + SourceSrc + `"`)
	}
	n := len(`,"type":"`) + len(src.Type) + len(`","src":"`) + len(src.Src) + len(`"`)
	if src.PGN != 0 {
		var digits [10]byte
		n += len(`,"pgn":`) + len(strconv.AppendUint(digits[:0], uint64(src.PGN), 10))
	}
	if src.Instance != "" {
		n += len(`,"instance":"`) + len(src.Instance) + len(`"`)
	}
	return n
}

// PublishSource is PublishContext with the values' own source (context "" is vessels.self):
// the update carries `{"label": <the device's label>, "type", "src", "pgn", "instance"}`, pgn
// and instance only when set, and the server names it `<label>.<src>`. The source's members
// are checked as paths are (letters, digits and `_-`, src not SourceSrc); the caller checks
// the ABI's stricter rules. The budgets, batching, ring and drain are PublishContext's; in a
// batch, the last value of a path per (context, source) wins.
func (s *Stream) PublishSource(src sk.Source, context string, items ...sk.Value) error {
	if err := checkSource(src); err != nil {
		return err
	}
	return s.publishGroup(groupKey{context: context, src: src}, items)
}

func checkSource(src sk.Source) error {
	for _, m := range []struct{ name, v string }{{"type", src.Type}, {"src", src.Src}, {"instance", src.Instance}} {
		if m.v == "" && m.name == "instance" {
			continue
		}
		if len(m.v) == 0 || len(m.v) > 64 || !sourceWord(m.v) {
			return fmt.Errorf("%w: source %s %q", ErrInvalidArgument, m.name, m.v)
		}
	}
	if src.Src == SourceSrc {
		return fmt.Errorf("%w: source src %q is the device's own", ErrInvalidArgument, src.Src)
	}
	return nil
}

// sourceWord reports whether w is letters, digits, '_' and '-': copied into the message as
// is, and free of the dots the server splits a $source at.
func sourceWord(w string) bool {
	for i := 0; i < len(w); i++ {
		c := w[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// appendSourceTail appends a source's members after its label: the device's own src for the
// zero Source. Every member passed checkSource, so none needs escaping.
func appendSourceTail(b []byte, src *sk.Source) []byte {
	if src.Src == "" {
		return append(b, `,"src":"`+SourceSrc+`"`...)
	}
	b = append(b, `,"type":"`...)
	b = append(b, src.Type...)
	b = append(b, `","src":"`...)
	b = append(b, src.Src...)
	b = append(b, '"')
	if src.PGN != 0 {
		b = append(b, `,"pgn":`...)
		b = strconv.AppendUint(b, uint64(src.PGN), 10)
	}
	if src.Instance != "" {
		b = append(b, `,"instance":"`...)
		b = append(b, src.Instance...)
		b = append(b, '"')
	}
	return b
}
