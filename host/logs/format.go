package logs

import (
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Letter answers the platform's level letter for a slog level.
func Letter(l slog.Level) byte {
	switch {
	case l >= slog.LevelError:
		return 'E'
	case l >= slog.LevelWarn:
		return 'W'
	case l >= slog.LevelInfo:
		return 'I'
	case l >= slog.LevelDebug:
		return 'D'
	default:
		return 'V'
	}
}

// letterLevel answers the slog level of a level letter; unknown letters are info.
func letterLevel(c byte) slog.Level {
	switch c {
	case 'E', 'e':
		return slog.LevelError
	case 'W', 'w':
		return slog.LevelWarn
	case 'D', 'd':
		return slog.LevelDebug
	case 'V', 'v':
		return LevelVerbose
	default:
		return slog.LevelInfo
	}
}

// wallFormat is ISO 8601 UTC with milliseconds.
const wallFormat = "2006-01-02T15:04:05.000Z"

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// emit turns one record that passed the filter into a console line and a stored line.
func (r *Ring) emit(level slog.Level, tag, body string) {
	ms := r.clock.Since(r.start).Milliseconds()
	if ms < 0 {
		ms = 0
	}
	letter := Letter(level)
	bp := bufPool.Get().(*[]byte)
	b := (*bp)[:0]

	if r.console != nil {
		b = appendPrefix(b, letter, ms)
		b = append(b, ") "...)
		b = append(b, tag...)
		b = append(b, ": "...)
		b = append(b, body...)
		b = append(b, '\n')
		r.consoleMu.Lock()
		_, _ = r.console.Write(b)
		r.consoleMu.Unlock()
		b = b[:0]
	}

	b = appendPrefix(b, letter, ms)
	if wf := r.wall.Load(); wf != nil {
		if t, ok := (*wf)(); ok {
			b = append(b, ' ')
			b = t.UTC().AppendFormat(b, wallFormat)
		}
	}
	b = append(b, ") "...)
	b = appendClean(b, tag)
	b = append(b, ": "...)
	b = appendClean(b, body)
	line := string(truncate(b, r.lineMax))
	*bp = b
	bufPool.Put(bp)
	r.store(line)
}

func appendPrefix(b []byte, letter byte, ms int64) []byte {
	b = append(b, letter, ' ', '(')
	return strconv.AppendInt(b, ms, 10)
}

// truncate cuts b to at most max bytes without splitting a UTF-8 sequence.
func truncate(b []byte, max int) []byte {
	if len(b) <= max {
		return b
	}
	i := max
	for i > 0 && !utf8.RuneStart(b[i]) {
		i--
	}
	return b[:i]
}

// Clean answers s as it is stored: without ANSI escape sequences and control characters,
// CR and LF turned into spaces, tabs kept, invalid UTF-8 replaced by U+FFFD.
func Clean(s string) string {
	return string(appendClean(nil, s))
}

func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < ' ' && c != '\t') || c >= 0x7f {
			return false
		}
	}
	return true
}

// appendClean appends the cleaned form of s. Escape sequences follow ECMA-48: CSI (ESC [ or
// U+009B) up to its final byte, OSC/DCS/SOS/PM/APC strings up to BEL or ST, and the short
// two-byte and nF forms. An unterminated sequence is dropped to the end of s.
func appendClean(b []byte, s string) []byte {
	if plainASCII(s) {
		return append(b, s...)
	}
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= ' ' && c < 0x7f || c == '\t' {
			b = append(b, c)
			i++
			continue
		}
		if c == 0x1b {
			i = skipEscape(s, i+1)
			continue
		}
		if c < 0x80 {
			if c == '\n' || c == '\r' {
				b = append(b, ' ')
			}
			i++ // other C0 controls and DEL are dropped
			continue
		}
		rn, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case rn == utf8.RuneError && size == 1:
			b = utf8.AppendRune(b, utf8.RuneError)
		case rn == 0x9b:
			i = skipCSI(s, i+size)
			continue
		case rn == 0x90 || rn == 0x98 || rn == 0x9d || rn == 0x9e || rn == 0x9f:
			i = skipString(s, i+size)
			continue
		case rn >= 0x80 && rn < 0xa0:
			// other C1 controls are dropped
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return b
}

// skipEscape skips the rest of an escape sequence whose ESC ended just before i.
func skipEscape(s string, i int) int {
	if i >= len(s) {
		return i
	}
	c := s[i]
	switch {
	case c == '[':
		return skipCSI(s, i+1)
	case c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_':
		return skipString(s, i+1)
	case c >= 0x20 && c <= 0x2f: // nF: intermediates then one final byte
		return skipOne(s, skipAll(s, i, 0x20, 0x2f), 0x30, 0x7e)
	case c >= 0x30 && c <= 0x7e: // Fp, Fe, Fs: one byte
		return i + 1
	default:
		// ESC followed by a control or non-ASCII byte: drop the ESC only.
		return i
	}
}

// skipCSI skips parameter and intermediate bytes and the final byte of a control sequence.
func skipCSI(s string, i int) int {
	i = skipAll(s, i, 0x30, 0x3f) // parameters
	i = skipAll(s, i, 0x20, 0x2f) // intermediates
	return skipOne(s, i, 0x40, 0x7e)
}

// skipAll skips the bytes of s from i on that are within lo..hi.
func skipAll(s string, i int, lo, hi byte) int {
	for i < len(s) && s[i] >= lo && s[i] <= hi {
		i++
	}
	return i
}

// skipOne skips the byte of s at i when it is within lo..hi (a sequence's final byte).
func skipOne(s string, i int, lo, hi byte) int {
	if i < len(s) && s[i] >= lo && s[i] <= hi {
		return i + 1
	}
	return i
}

// skipString skips a control string up to and including its terminator (BEL, ESC \ or
// U+009C), or to the end of s.
func skipString(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == 0x07:
			return i + 1
		case s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\':
			return i + 2
		case strings.HasPrefix(s[i:], "\u009c"):
			return i + len("\u009c")
		}
		i++
	}
	return i
}

// appendAttr renders slog attributes as ` key=value`, groups as dotted key prefixes,
// quoting like slog's text handler so that a line splits back into its fields.
func appendAttr(b []byte, prefix string, a slog.Attr) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return b
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p = prefix + a.Key + "."
		}
		for _, ga := range a.Value.Group() {
			b = appendAttr(b, p, ga)
		}
		return b
	}
	b = append(b, ' ')
	b = appendMaybeQuoted(b, prefix+a.Key)
	b = append(b, '=')
	var v string
	switch a.Value.Kind() {
	case slog.KindString:
		v = a.Value.String()
	case slog.KindTime:
		v = a.Value.Time().Format(time.RFC3339Nano)
	default:
		v = a.Value.String()
	}
	return appendMaybeQuoted(b, v)
}

func appendMaybeQuoted(b []byte, s string) []byte {
	if needsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

func needsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c <= ' ' || c == '=' || c == '"' || c == 0x7f {
				return true
			}
			i++
			continue
		}
		rn, size := utf8.DecodeRuneInString(s[i:])
		if rn == utf8.RuneError || !strconv.IsPrint(rn) {
			return true
		}
		i += size
	}
	return false
}
