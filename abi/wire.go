package abi

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// The wire format: integers little-endian; a "str" is a u32 byte count followed by the bytes.
// Every decoder checks every length against the bytes present, refuses trailing bytes, and
// never panics, whatever it is given.

// errShort is the decode error for a message that ends early.
var errShort = errors.New("abi: message truncated")

func appendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }

func appendStr(b []byte, s string) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, s []byte) []byte {
	b = appendU32(b, uint32(len(s)))
	return append(b, s...)
}

// reader walks a message; the first error sticks.
type reader struct {
	b     []byte
	err   error
	paths *PathTable // nil: every path is made and checked anew
	root  bool       // the empty path is allowed, with a JSON object (sk_publish_ctx)
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// take returns the next n bytes (capacity n, aliasing the message), or nil with errShort
// when fewer are left.
func (r *reader) take(n int) []byte {
	if r.err != nil || len(r.b) < n {
		r.fail(errShort)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) u8() uint8 {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	if v := r.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if v := r.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

// bytes returns the next str's bytes (aliasing the message), refusing more than max.
func (r *reader) bytes(max int, what string) []byte {
	n := r.u32()
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(max) {
		r.fail(fmt.Errorf("abi: %s of %d bytes, at most %d", what, n, max))
		return nil
	}
	return r.take(int(n))
}

func (r *reader) str(max int, what string) string {
	b := r.bytes(max, what)
	if r.err == nil && !utf8.Valid(b) {
		r.fail(fmt.Errorf("abi: %s is not UTF-8", what))
	}
	return string(b)
}

func (r *reader) end() error {
	if r.err == nil && len(r.b) > 0 {
		r.fail(fmt.Errorf("abi: %d trailing bytes", len(r.b)))
	}
	return r.err
}

// done answers a decoder's result: v when r read the whole record without error, else the
// error and T's zero value.
func done[T any](r *reader, v T) (T, error) {
	if err := r.end(); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// ValueKind is the type of a Signal K value.
type ValueKind uint8

// Value kinds.
const (
	KindNull   ValueKind = 0
	KindNumber ValueKind = 1
	KindString ValueKind = 2
	KindBool   ValueKind = 3
	KindJSON   ValueKind = 4 // any JSON value (an object for positions, attitudes...)
)

// Value is a Signal K value.
type Value struct {
	Kind ValueKind
	Num  float64 // KindNumber
	Str  string  // KindString; the JSON text for KindJSON
	Bool bool    // KindBool
}

// Number, String, Bool, JSON and Null build values.
func Number(f float64) Value   { return Value{Kind: KindNumber, Num: f} }
func String(s string) Value    { return Value{Kind: KindString, Str: s} }
func Bool(b bool) Value        { return Value{Kind: KindBool, Bool: b} }
func JSON(text []byte) Value   { return Value{Kind: KindJSON, Str: string(text)} }
func Null() Value              { return Value{Kind: KindNull} }
func (v Value) String() string { return string(v.AppendJSON(nil)) }

// AppendJSON appends the value's JSON text (as it goes into a Signal K delta).
func (v Value) AppendJSON(b []byte) []byte {
	switch v.Kind {
	case KindNumber:
		t, err := json.Marshal(v.Num)
		if err != nil {
			return append(b, "null"...)
		}
		return append(b, t...)
	case KindString:
		t, _ := json.Marshal(v.Str)
		return append(b, t...)
	case KindBool:
		if v.Bool {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case KindJSON:
		return append(b, v.Str...)
	}
	return append(b, "null"...)
}

// Validate checks the value against the ABI's rules: a known kind, a finite number, a string
// or JSON text of at most MaxValue UTF-8 bytes, well-formed JSON.
func (v Value) Validate() error {
	switch v.Kind {
	case KindNull, KindBool:
		return nil
	case KindNumber:
		if math.IsNaN(v.Num) || math.IsInf(v.Num, 0) {
			return errors.New("abi: a number must be finite")
		}
		return nil
	case KindString, KindJSON:
		if len(v.Str) > MaxValue {
			return fmt.Errorf("abi: value of %d bytes, at most %d", len(v.Str), MaxValue)
		}
		if !utf8.ValidString(v.Str) {
			return errors.New("abi: value is not UTF-8")
		}
		if v.Kind == KindJSON && !json.Valid([]byte(v.Str)) {
			return errors.New("abi: JSON value is not well-formed")
		}
		return nil
	}
	return fmt.Errorf("abi: unknown value kind %d", v.Kind)
}

// PathValue is one value at a Signal K path of vessels.self.
type PathValue struct {
	Path  string
	Value Value
}

// ValidPath reports whether p is a Signal K path: 1 to MaxPath bytes of dot-separated
// non-empty segments of letters, digits, '_' and '-'.
func ValidPath(p string) bool {
	return len(p) <= MaxPath && segments(p, '.')
}

// segments reports whether s is one or more non-empty segments of letters, digits, '_' and
// '-' separated by sep: a path's (dots) or a context id's (colons).
func segments(s string, sep byte) bool {
	seg := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == sep:
			if seg == 0 {
				return false
			}
			seg = 0
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			seg++
		default:
			return false
		}
	}
	return seg > 0
}

// ValidPattern reports whether p is a subscription or PUT handler pattern: an exact path, a
// family `prefix.*` or `prefix*` (the prefix itself a path or path prefix), or `*`.
func ValidPattern(p string) bool {
	switch {
	case p == "*":
		return true
	case len(p) > 2 && p[len(p)-2:] == ".*":
		return ValidPath(p[:len(p)-2])
	case len(p) > 1 && p[len(p)-1] == '*':
		q := p[:len(p)-1]
		if q[len(q)-1] == '.' {
			q = q[:len(q)-1]
		}
		return ValidPath(q) && len(p) <= MaxPath
	}
	return ValidPath(p)
}

// MatchPattern reports whether path is covered by pattern (ValidPattern syntax).
func MatchPattern(pattern, path string) bool {
	if pattern == "*" {
		return true
	}
	if n := len(pattern); n > 0 && pattern[n-1] == '*' {
		prefix := pattern[:n-1]
		return len(path) >= len(prefix) && path[:len(prefix)] == prefix
	}
	return pattern == path
}

// AppendValue appends one value record: str path, u8 kind, then per kind nothing (null), f64
// bits as u64 (number), str (string, JSON), u8 0 or 1 (bool).
func AppendValue(b []byte, path string, v Value) []byte {
	switch v.Kind {
	case KindNumber:
		return AppendNumber(b, path, v.Num)
	case KindString, KindJSON:
		b = appendStr(b, path)
		b = append(b, byte(v.Kind))
		return appendStr(b, v.Str)
	case KindBool:
		return AppendBool(b, path, v.Bool)
	}
	b = appendStr(b, path)
	return append(b, byte(v.Kind))
}

// AppendNumber appends the record of a number value, as AppendValue(b, path, Number(f)) but
// without building a Value: plugins publish numbers in tight loops.
func AppendNumber(b []byte, path string, f float64) []byte {
	n := len(path)
	u := math.Float64bits(f)
	b = append(b, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	b = append(b, path...)
	return append(b, byte(KindNumber), byte(u), byte(u>>8), byte(u>>16), byte(u>>24),
		byte(u>>32), byte(u>>40), byte(u>>48), byte(u>>56))
}

// AppendBool appends the record of a bool value, as AppendValue(b, path, Bool(v)).
func AppendBool(b []byte, path string, v bool) []byte {
	n := len(path)
	var x byte
	if v {
		x = 1
	}
	b = append(b, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	b = append(b, path...)
	return append(b, byte(KindBool), x)
}

// AppendString appends the record of a string value, as AppendValue(b, path, String(s)).
func AppendString(b []byte, path, s string) []byte {
	n, m := len(path), len(s)
	b = append(b, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
	b = append(b, path...)
	b = append(b, byte(KindString), byte(m), byte(m>>8), byte(m>>16), byte(m>>24))
	return append(b, s...)
}

// AppendValues appends value records (the sk_publish input and the delta event payload).
func AppendValues(b []byte, vs []PathValue) []byte {
	for _, pv := range vs {
		b = AppendValue(b, pv.Path, pv.Value)
	}
	return b
}

func (r *reader) value() PathValue {
	var pv PathValue
	pv.Path = r.path()
	kind := ValueKind(r.u8())
	if r.err != nil {
		return pv
	}
	pv.Value.Kind = kind
	switch kind {
	case KindNull:
	case KindNumber:
		pv.Value.Num = math.Float64frombits(r.u64())
	case KindString, KindJSON:
		pv.Value.Str = r.str(MaxValue, "value")
	case KindBool:
		switch r.u8() {
		case 0:
		case 1:
			pv.Value.Bool = true
		default:
			r.fail(errors.New("abi: a bool is 0 or 1"))
		}
	default:
		r.fail(fmt.Errorf("abi: unknown value kind %d", kind))
	}
	if r.err == nil {
		if err := pv.Value.Validate(); err != nil {
			r.fail(fmt.Errorf("abi: path %s: %w", pv.Path, err))
		} else if pv.Path == "" && (kind != KindJSON || !isJSONObject([]byte(pv.Value.Str))) {
			r.fail(errors.New("abi: the empty path (the context's root) takes a JSON object"))
		}
	}
	return pv
}

// path reads a value record's path and checks it (ValidPath), through the reader's table
// when it has one.
func (r *reader) path() string {
	if r.root && r.err == nil && len(r.b) >= 4 && r.b[0]|r.b[1]|r.b[2]|r.b[3] == 0 {
		r.b = r.b[4:]
		return ""
	}
	if r.paths == nil {
		p := r.str(MaxPath, "path")
		if r.err == nil && !ValidPath(p) {
			r.fail(fmt.Errorf("abi: invalid Signal K path %q", p))
		}
		return p
	}
	b := r.bytes(MaxPath, "path")
	if r.err != nil {
		return ""
	}
	if p, ok := r.paths.m[string(b)]; ok { // no conversion: the compiler looks up b's bytes
		return p
	}
	p := string(b)
	if !ValidPath(p) { // ASCII only, so UTF-8 too
		r.fail(fmt.Errorf("abi: invalid Signal K path %q", p))
		return p
	}
	if len(r.paths.m) >= MaxPathTable || r.paths.m == nil {
		r.paths.m = make(map[string]string, 64)
	}
	r.paths.m[p] = p
	return p
}

// MaxPathTable is how many paths a PathTable keeps before it starts over.
const MaxPathTable = 1024

// PathTable keeps the paths a decoder has made and checked, for a caller that decodes message
// after message from one sender: a plugin publishes the same few paths again and again, and
// a path seen before then costs one map lookup instead of an allocation and a validation. It
// keeps at most MaxPathTable paths and starts over when full, so a sender making up paths
// cannot grow it. The zero value is ready; it is not safe for concurrent use.
type PathTable struct{ m map[string]string }

// AppendDecodedValues is the package's AppendDecodedValues reading paths through t.
func (t *PathTable) AppendDecodedValues(dst []PathValue, b []byte, max int) ([]PathValue, error) {
	return appendDecodedValues(dst, reader{b: b, paths: t}, max)
}

// DecodeValues decodes value records; every record is checked (path, kind, finiteness, JSON),
// and one bad record fails the whole message. At most max records (0: MaxValuesPerCall).
func DecodeValues(b []byte, max int) ([]PathValue, error) {
	return AppendDecodedValues(nil, b, max)
}

// AppendDecodedValues is DecodeValues appending to dst, so that a caller decoding message
// after message can reuse one slice. On an error dst is returned as it was.
func AppendDecodedValues(dst []PathValue, b []byte, max int) ([]PathValue, error) {
	return appendDecodedValues(dst, reader{b: b}, max)
}

func appendDecodedValues(dst []PathValue, r reader, max int) ([]PathValue, error) {
	if max <= 0 {
		max = MaxValuesPerCall
	}
	out := dst
	for len(r.b) > 0 && r.err == nil {
		if len(out)-len(dst) == max {
			return dst, fmt.Errorf("abi: more than %d values", max)
		}
		out = append(out, r.value())
	}
	if err := r.end(); err != nil {
		return dst, err
	}
	return out, nil
}

// AppendStrings appends a list of str (subscription and PUT handler patterns).
func AppendStrings(b []byte, ss []string) []byte {
	for _, s := range ss {
		b = appendStr(b, s)
	}
	return b
}

// DecodePatterns decodes a list of patterns, each ValidPattern, at most max of them.
func DecodePatterns(b []byte, max int) ([]string, error) {
	r := reader{b: b}
	var out []string
	for len(r.b) > 0 && r.err == nil {
		if len(out) == max {
			return nil, fmt.Errorf("abi: more than %d patterns", max)
		}
		p := r.str(MaxPath, "pattern")
		if r.err == nil && !ValidPattern(p) {
			return nil, fmt.Errorf("abi: invalid pattern %q", p)
		}
		out = append(out, p)
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("abi: no patterns")
	}
	return out, nil
}

// Meta is a Signal K metadata object declared for a non-standard path.
type Meta struct {
	Path string
	JSON []byte // a JSON object: units, description, displayName, zones, ...
}

// AppendMeta appends sk_meta records: str path, str JSON object.
func AppendMeta(b []byte, ms []Meta) []byte {
	for _, m := range ms {
		b = appendStr(b, m.Path)
		b = appendBytes(b, m.JSON)
	}
	return b
}

// DecodeMeta decodes sk_meta records: 1 to MaxMetaPerCall valid paths, each with a JSON object.
func DecodeMeta(b []byte) ([]Meta, error) {
	r := reader{b: b}
	var out []Meta
	for len(r.b) > 0 && r.err == nil {
		if len(out) == MaxMetaPerCall {
			return nil, fmt.Errorf("abi: more than %d meta records", MaxMetaPerCall)
		}
		m := Meta{Path: r.str(MaxPath, "path")}
		m.JSON = r.bytes(MaxMetaBytes, "meta")
		if r.err != nil {
			break
		}
		if !ValidPath(m.Path) {
			return nil, fmt.Errorf("abi: invalid Signal K path %q", m.Path)
		}
		if !isJSONObject(m.JSON) {
			return nil, fmt.Errorf("abi: meta of %s is not a JSON object", m.Path)
		}
		out = append(out, m)
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("abi: no meta records")
	}
	return out, nil
}

func isJSONObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}
