package config

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"devhost/host/sktls/pemcert"
)

// fromJSON checks one JSON value (never null) against the key and returns it typed (bool,
// int64, float64, string or []byte), or a message saying why it is refused. It is the single
// check behind PUT, Set, descriptor defaults and the read semantics of stored values.
func (k *keyDef) fromJSON(raw []byte) (any, string) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, "empty value"
	}
	switch k.Type {
	case TypeBool:
		switch string(raw) {
		case "true":
			return true, ""
		case "false":
			return false, ""
		}
		return nil, "expected a boolean"
	case TypeInt:
		n, msg := parseInt(string(raw))
		if msg != "" {
			return nil, k.numberRefusal(raw, msg)
		}
		if float64(n) < k.min || float64(n) > k.max {
			return nil, fmt.Sprintf("%d out of range %s", n, k.rangeText())
		}
		return n, ""
	case TypeFloat:
		if !numberRE.Match(raw) {
			return nil, k.numberRefusal(raw, "expected a number")
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, k.numberRefusal(raw, "number out of range")
		}
		if (k.hasMin && f < k.min) || (k.hasMax && f > k.max) {
			return nil, fmt.Sprintf("%v out of range %s", f, k.rangeText())
		}
		if f == 0 {
			f = 0 // one zero: -0 and 0 are the same setting
		}
		return f, ""
	}
	if raw[0] != '"' {
		return nil, "expected a string"
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, "expected a string"
	}
	if k.Type == TypeBlob {
		b, ok := decodeBlob(s)
		if !ok {
			return nil, "expected padded base64"
		}
		if len(b) > k.maxLen {
			return nil, fmt.Sprintf("%d bytes, at most %d", len(b), k.maxLen)
		}
		return b, ""
	}
	if len(s) > k.maxLen {
		return nil, fmt.Sprintf("%d bytes, at most %d", len(s), k.maxLen)
	}
	if k.Enum != nil && !slices.Contains(k.Enum, s) {
		return nil, fmt.Sprintf("%q is not one of %s", s, strings.Join(k.Enum, ", "))
	}
	if msg := CheckText(k.Text, s); msg != "" {
		return nil, msg
	}
	if k.table {
		if msg := checkTable(s, k.columns); msg != "" {
			return nil, msg
		}
	}
	return s, ""
}

// checkWrite holds the checks made on writes only (PUT, Set, defaults), not on reads.
func (k *keyDef) checkWrite(v any) string {
	if s, ok := v.(string); ok && k.MinLength > 0 && s != "" && len(s) < k.MinLength {
		return fmt.Sprintf("%d bytes, empty or at least %d", len(s), k.MinLength)
	}
	if s, ok := v.(string); ok && k.CheckPattern && k.pattern != nil && !k.pattern.MatchString(s) {
		return fmt.Sprintf("%q does not match %s", s, k.pattern.String())
	}
	return checkWriteText(k.Text, v)
}

// checkWriteText holds the text kinds checked on writes only, so that a value stored
// earlier still reads back (CheckText holds those checked on reads too).
func checkWriteText(kind string, v any) string {
	switch kind {
	case TextCredential:
		if s, ok := v.(string); ok {
			return checkCredential(s)
		}
	case TextCertificates:
		if b, ok := v.([]byte); ok && len(b) > 0 {
			if _, err := pemcert.Parse(b); err != nil {
				return "not PEM certificates: " + err.Error()
			}
		}
	}
	return ""
}

func (k *keyDef) rangeText() string {
	lo, hi := "-inf", "+inf"
	if k.hasMin {
		lo = boundText(k.min)
	}
	if k.hasMax {
		hi = boundText(k.max)
	}
	return lo + ".." + hi
}

// boundText writes a range bound as a person would type it: 2147483647 rather than
// 2.147483647e+09; only huge or tiny float bounds keep the exponent.
func boundText(v float64) string {
	if a := math.Abs(v); a == 0 || (a >= 1e-6 && a < 1e21) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// maxEcho bounds the refused number a message repeats: the body may hold 16 KiB of digits.
const maxEcho = 24

// numberRefusal words a refusal of an int or float key from parseInt's or the float check's
// reason: it repeats the value when that is a short JSON number and always gives the allowed
// range, so `1e20`, `1.5` and `"80"` each say what the key takes.
func (k *keyDef) numberRefusal(raw []byte, reason string) string {
	number := numberRE.Match(raw) && len(raw) <= maxEcho
	switch {
	case reason == "integer out of range" || reason == "number out of range":
		if number {
			return fmt.Sprintf("%s out of range %s", raw, k.rangeText())
		}
		return "out of range " + k.rangeText()
	case k.Type == TypeInt && number:
		return fmt.Sprintf("%s is not an integer; allowed %s", raw, k.rangeText())
	}
	return fmt.Sprintf("%s in %s", reason, k.rangeText())
}

var numberRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// parseInt reads a JSON number that must be an exact 32-bit integer. Fractions and exponents
// are allowed when the value is integral (80.0, 8e1), as JSON Schema's "integer" allows;
// the check is done on the decimal digits, so no float rounding can turn 1.0000000001 into 1.
func parseInt(s string) (int64, string) {
	if n, ok := plainInt(s); ok {
		if n < math.MinInt32 || n > math.MaxInt32 {
			return 0, "integer out of range"
		}
		return n, ""
	}
	m := numberRE.FindStringSubmatch(s)
	if m == nil {
		return 0, "expected an integer"
	}
	neg := s[0] == '-'
	frac := strings.TrimPrefix(m[2], ".")
	digits := strings.TrimLeft(m[1]+frac, "0")
	exp := -len(frac)
	if e := m[3]; e != "" {
		e = strings.TrimLeft(e[1:], "+")
		eneg := strings.HasPrefix(e, "-")
		e = strings.TrimLeft(strings.TrimPrefix(e, "-"), "0")
		if len(e) > 6 {
			// An exponent this large: zero stays zero, anything else is a fraction or huge.
			switch {
			case digits == "":
				return 0, ""
			case eneg:
				return 0, "expected an integer"
			default:
				return 0, "integer out of range"
			}
		}
		n, _ := strconv.Atoi("0" + e)
		if eneg {
			n = -n
		}
		exp += n
	}
	if digits == "" {
		return 0, ""
	}
	for exp < 0 && strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		exp++
	}
	if exp < 0 {
		return 0, "expected an integer"
	}
	if len(digits)+exp > 10 {
		return 0, "integer out of range"
	}
	n, _ := strconv.ParseInt(digits+strings.Repeat("0", exp), 10, 64)
	if neg {
		n = -n
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, "integer out of range"
	}
	return n, ""
}

// plainInt reads the form nearly every stored and written integer has, an optional minus and
// at most ten digits without a leading zero, without the regexp; ok is false for anything
// else, which parseInt then reads the long way.
func plainInt(s string) (int64, bool) {
	d := strings.TrimPrefix(s, "-")
	if d == "" || len(d) > 10 || (d[0] == '0' && len(d) > 1) {
		return 0, false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// decodeBlob accepts RFC 4648 standard base64 with padding, nothing else (Go's decoder
// would skip line breaks; the spec's blobs have none).
func decodeBlob(s string) ([]byte, bool) {
	if strings.ContainsAny(s, "\r\n") {
		return nil, false
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	return b, err == nil
}

func base64Len(n int) int { return (n + 2) / 3 * 4 }

// checkTable checks the value of a `format: table` key: a JSON array of row objects whose
// members are named columns holding scalars.
func checkTable(s string, columns map[string]bool) string {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "[") {
		return "a table value must be a JSON array of rows"
	}
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	var rows []any
	if err := dec.Decode(&rows); err != nil || dec.More() {
		return "a table value must be a JSON array of rows"
	}
	if _, err := dec.Token(); err == nil {
		return "a table value must be a JSON array of rows"
	}
	for i, r := range rows {
		row, ok := r.(map[string]any)
		if !ok {
			return fmt.Sprintf("table row %d is not an object", i)
		}
		for name, v := range row {
			if !columns[name] {
				return fmt.Sprintf("table row %d: unknown column %q", i, name)
			}
			switch v.(type) {
			case map[string]any, []any:
				return fmt.Sprintf("table row %d: column %q must hold a scalar", i, name)
			}
		}
	}
	return ""
}

// canonical is the stored and compared form of a typed value: its JSON text.
func canonical(v any) string {
	switch x := v.(type) {
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case []byte:
		return `"` + base64.StdEncoding.EncodeToString(x) + `"`
	}
	return string(marshal(v))
}

// marshal encodes v as JSON without HTML escaping (values and descriptions are shown as
// typed, "<id>" included).
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only finite numbers, strings, bools and ordered objects reach here.
		return []byte("null")
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// public converts an internal value to what Get returns: int for int keys.
func public(v any) any {
	if n, ok := v.(int64); ok {
		return int(n)
	}
	if b, ok := v.([]byte); ok {
		return bytes.Clone(b)
	}
	return v
}

// member is one member of a JSON object, in document order.
type member struct {
	name string
	raw  json.RawMessage
}

// objectMembers splits a JSON object into its members in order; ok is false when raw is not
// an object. raw is known to be well-formed JSON.
func objectMembers(raw []byte) ([]member, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name, ok := tok.(string)
		if !ok {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		ms = append(ms, member{name, v})
	}
	return ms, true
}

// obj is a JSON object that keeps its members in insertion order, so the document and the
// schema list namespaces and keys in descriptor order.
type obj struct {
	names []string
	vals  []any
}

func (o *obj) set(name string, v any) {
	o.names = append(o.names, name)
	o.vals = append(o.vals, v)
}

func (o *obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, n := range o.names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(marshal(n))
		b.WriteByte(':')
		if raw, ok := o.vals[i].(json.RawMessage); ok {
			b.Write(raw)
		} else {
			b.Write(marshal(o.vals[i]))
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Text kinds of string keys (Key.Text).
const (
	// TextToken is one or more printable ASCII characters without spaces: a POSIX TZ string.
	TextToken = "token"
	// TextBSSID is empty or a MAC address written as the spec writes it, aa:bb:cc:dd:ee:ff
	// (either case): a WiFi slot's access point pin.
	TextBSSID = "bssid"

	// TextCredential is empty or a secret a client can send in an Authorization header
	// (httpd.api_key): no space or tab at either end, where HTTP drops them, and no control
	// characters, which a header cannot carry. It is checked on writes only: a key stored by
	// an older version must keep protecting the API, never read back as "no key".
	TextCredential = "credential"

	// TextCertificates is a blob of PEM CERTIFICATE blocks and nothing else (pemcert.Parse),
	// or empty: sk.ca_pem, the same rule as PUT /sk/tls/ca. It is checked on writes only, so a
	// value stored by an older version still reads back and the TLS document can say why it
	// is not used.
	TextCertificates = "certificates"
)

// textType is the key type a text kind applies to, "" for an unknown kind.
func textType(kind string) string {
	switch kind {
	case TextToken, TextBSSID, TextCredential:
		return TypeString
	case TextCertificates:
		return TypeBlob
	}
	return ""
}

// bssidRE is the one BSSID form the spec gives: six colon-separated pairs of hex digits.
var bssidRE = regexp.MustCompile(`^[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}$`)

// CheckText says why s is not a value of the text kind, or "" when it is. It is the one rule
// for such values: PUT /config checks keys with it and PUT /time checks `tz` with it.
func CheckText(kind, s string) string {
	switch kind {
	case TextToken:
		if s == "" {
			return "must not be empty"
		}
		for i := 0; i < len(s); i++ {
			if s[i] <= ' ' || s[i] > '~' {
				return "must be printable ASCII without spaces or control characters"
			}
		}
	case TextBSSID:
		if s != "" && !bssidRE.MatchString(s) {
			return fmt.Sprintf("%q is not a BSSID: expected six hex pairs aa:bb:cc:dd:ee:ff, or empty for no pin", s)
		}
	}
	return ""
}

// checkCredential says why s cannot be a TextCredential, or "" when it can.
func checkCredential(s string) string {
	if s == "" {
		return ""
	}
	if s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return "must not begin or end with a space or tab: an Authorization header cannot carry them"
	}
	for _, r := range s {
		if r < ' ' && r != '\t' || r == 0x7f {
			return "must not contain control characters: an Authorization header cannot carry them"
		}
	}
	return ""
}
