package skmap

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// AppendJSON appends the delta as JSON, as json.Marshal would write it, without reflection:
// the plugin encodes one delta per message inside the sandbox, where reflection is slow.
func (d *Delta) AppendJSON(b []byte) []byte { return d.appendJSON(b, nil) }

// AppendJSONSpans is AppendJSON that also appends to spans, for each value of the first
// update in turn, where its JSON text starts and ends in b: a composite value the plugin
// publishes too is then encoded once.
func (d *Delta) AppendJSONSpans(b []byte, spans []int) ([]byte, []int) {
	b = d.appendJSON(b, &spans)
	return b, spans
}

func (d *Delta) appendJSON(b []byte, spans *[]int) []byte {
	b = append(b, `{"updates":[`...)
	for i, u := range d.Updates {
		if i > 0 {
			b = append(b, ',')
		}
		if u.Source.Label == "" && u.Source.Type == "NMEA2000" {
			// What every delta of the mapper starts with, in one copy: inside the sandbox
			// every append is a call.
			b = append(b, `{"source":{"label":"","type":"NMEA2000","pgn":`...)
		} else {
			b = append(b, `{"source":{"label":`...)
			b = appendString(b, u.Source.Label)
			b = append(b, `,"type":`...)
			b = appendString(b, u.Source.Type)
			b = append(b, `,"pgn":`...)
		}
		b = strconv.AppendUint(b, uint64(u.Source.PGN), 10)
		b = append(b, `,"src":`...)
		b = d.text.appendString(b, u.Source.Src)
		if u.Source.CanName != "" {
			b = append(b, `,"canName":`...)
			b = appendString(b, u.Source.CanName)
		}
		if u.Source.DeviceInstance != nil {
			b = append(b, `,"deviceInstance":`...)
			b = strconv.AppendInt(b, int64(*u.Source.DeviceInstance), 10)
		}
		if u.Source.Instance != nil {
			b = append(b, `,"instance":`...)
			b = appendString(b, *u.Source.Instance)
		}
		b = append(b, `},"timestamp":`...)
		b = d.text.appendString(b, u.Timestamp)
		b = append(b, `,"values":[`...)
		for j := range u.Values {
			v := &u.Values[j]
			if j > 0 {
				b = append(b, `},{"path":`...)
			} else {
				b = append(b, `{"path":`...)
			}
			b = d.text.appendString(b, v.Path)
			b = append(b, `,"value":`...)
			start := len(b)
			b = d.text.appendValue(b, v.Value)
			if spans != nil && i == 0 {
				*spans = append(*spans, start, len(b))
			}
		}
		if len(u.Values) > 0 {
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	b = append(b, ']')
	if d.Context != "" {
		b = append(b, `,"context":`...)
		b = appendString(b, d.Context)
	}
	return append(b, '}')
}

// AppendValue appends a delta value (a Value's Value) as JSON, as AppendJSON writes it.
func AppendValue(b []byte, v any) []byte { return (*textCache)(nil).appendValue(b, v) }

// textCache keeps the text of the numbers written last, by their bits: a delta's numbers
// repeat (about two in three of the Dirona log's are one of the last few hundred written),
// and a number's shortest text costs more inside the sandbox than the rest of its delta's
// JSON. It also knows the strings written lately that need no escape (paths, sources, the
// timestamp), by the address of their bytes. A nil cache writes everything anew.
type textCache struct {
	slots [512]numText
	plain [256]string
}

// appendString is appendString, skipping the look at each byte for a string seen lately
// (the same string: its bytes at the same address). The slot holds the string, so its
// bytes are never freed and reused for another while it is there.
func (c *textCache) appendString(b []byte, s string) []byte {
	if c == nil || s == "" {
		return appendString(b, s)
	}
	p := unsafe.StringData(s)
	slot := &c.plain[(uintptr(unsafe.Pointer(p))>>3^uintptr(len(s)))%uintptr(len(c.plain))]
	if len(*slot) != len(s) || unsafe.StringData(*slot) != p {
		i := 0
		for i < len(s) && plain[s[i]] {
			i++
		}
		if i < len(s) {
			return appendString(b, s)
		}
		*slot = s
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

type numText struct {
	bits uint64
	n    uint8 // 0: empty
	text [31]byte
}

func (c *textCache) appendFloat(b []byte, f float64) []byte {
	if c == nil {
		return appendFloat(b, f)
	}
	bits := math.Float64bits(f)
	slot := &c.slots[(bits*0x9e3779b97f4a7c15)>>55]
	if slot.n > 0 && slot.bits == bits {
		return append(b, slot.text[:slot.n]...)
	}
	start := len(b)
	b = appendFloat(b, f)
	if n := len(b) - start; n <= len(slot.text) {
		slot.bits, slot.n = bits, uint8(n)
		copy(slot.text[:], b[start:])
	}
	return b
}

func (c *textCache) appendValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...)
	case float64:
		return c.appendFloat(b, x)
	case string:
		return appendString(b, x)
	case bool:
		return strconv.AppendBool(b, x)
	case Position:
		b = append(b, `{"longitude":`...)
		b = c.appendFloat(b, x.Longitude)
		b = append(b, `,"latitude":`...)
		b = c.appendFloat(b, x.Latitude)
		return append(b, '}')
	case Attitude:
		b = append(b, `{"yaw":`...)
		b = c.appendPtr(b, x.Yaw)
		b = append(b, `,"pitch":`...)
		b = c.appendPtr(b, x.Pitch)
		b = append(b, `,"roll":`...)
		b = c.appendPtr(b, x.Roll)
		return append(b, '}')
	case Notification:
		b = append(b, `{"state":`...)
		b = appendString(b, x.State)
		b = append(b, `,"method":`...)
		b = appendStrings(b, x.Method)
		b = append(b, `,"message":`...)
		b = appendString(b, x.Message)
		return append(b, '}')
	case TimeToGo:
		s, ok := x.Seconds()
		if !ok {
			return append(b, "null"...)
		}
		return c.appendFloat(b, s)
	case SatellitesInView:
		b = append(b, `{"count":`...)
		b = strconv.AppendInt(b, int64(x.Count), 10)
		b = append(b, `,"satellites":`...)
		if x.Satellites == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for i, sat := range x.Satellites {
				if i > 0 {
					b = append(b, ',')
				}
				b = c.appendSatellite(b, sat)
			}
			b = append(b, ']')
		}
		return append(b, '}')
	}
	out, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...)
	}
	return append(b, out...)
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendSatellite writes a satellite's members, leaving out those without a value
// (omitempty).
func (c *textCache) appendSatellite(b []byte, sat Satellite) []byte {
	sep := byte('{')
	for _, m := range [...]struct {
		key string
		v   any
	}{{`"id":`, sat.ID}, {`"elevation":`, sat.Elevation}, {`"azimuth":`, sat.Azimuth}, {`"SNR":`, sat.SNR}} {
		if m.v == nil {
			continue
		}
		b = append(b, sep)
		sep = ','
		b = append(b, m.key...)
		b = c.appendValue(b, m.v)
	}
	if sep == '{' {
		b = append(b, '{')
	}
	return append(b, '}')
}

func (c *textCache) appendPtr(b []byte, f *float64) []byte {
	if f == nil {
		return append(b, "null"...)
	}
	return c.appendFloat(b, *f)
}

// appendFloat writes a number as encoding/json does; NaN and infinities as null.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hexDigits = "0123456789abcdef"

// plain marks the bytes a JSON string holds as they are: ASCII but the control characters,
// the quote, the backslash and the HTML characters encoding/json escapes.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString writes a JSON string, escaping as encoding/json does (HTML characters too).
func appendString(b []byte, s string) []byte {
	// Paths, sources and timestamps need no escape: one look per byte (a table, not six
	// comparisons: each is an instruction of its own inside the sandbox) and one copy.
	i := 0
	for i < len(s) && plain[s[i]] {
		i++
	}
	if i == len(s) {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	b = append(b, '"')
	start := 0
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			if r == utf8.RuneError {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			}
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
