package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Key types of the descriptor table.
const (
	TypeBool   = "bool"
	TypeInt    = "int"
	TypeFloat  = "float"
	TypeString = "string"
	TypeBlob   = "blob"
)

// Limits of the descriptor table.
const (
	MaxNameLen         = 15     // namespace and key names
	MaxStringBytes     = 3999   // string maxLength cap (the terminator is not counted)
	MaxBlobBytes       = 508000 // blob maxLength cap (decoded bytes)
	DefaultStringBytes = 256
	DefaultBlobBytes   = 1024
	MaxGroupLen        = 24
	// VersionKey is reserved in every namespace: the stored descriptor version.
	VersionKey = "config_version"
	// Sentinel is what a set secret reads back as; writing it leaves the secret untouched.
	Sentinel = "********"
	// FormatTable is the `x.format` of a string key holding a JSON array of rows.
	FormatTable = "table"
	// maxKeys bounds a namespace so one descriptor cannot swell the schema without limit.
	maxKeys = 256
	// maxColumns bounds the columns of a table key.
	maxColumns = 16
	// maxDescriptorBytes bounds a JSON descriptor given to ParseNamespace.
	maxDescriptorBytes = 64 << 10
)

var (
	nsNameRE  = regexp.MustCompile(`^[a-z][a-z0-9_]{0,14}$`)
	keyNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,14}$`)
)

// ValidNamespaceName reports whether name matches the spec's namespace regex.
func ValidNamespaceName(name string) bool { return nsNameRE.MatchString(name) }

// Namespace describes one configuration namespace.
type Namespace struct {
	Name        string
	Version     int
	Title       string
	Description string
	Keys        []Key
	// Steps[v] migrates stored values from version v-1 to v. A missing or nil step is an
	// additive change (new keys only) and just stamps the version.
	Steps map[int]Step
}

// Key describes one key of a namespace.
type Key struct {
	Name string
	Type string // TypeBool, TypeInt, TypeFloat, TypeString, TypeBlob
	// Default is required except for blobs (always empty) and table keys (`[]`). Accepted Go
	// types: bool; any integer type (or an integral float64) for int; a number for float;
	// string; for blobs nil, "" or an empty []byte.
	Default   any
	Min, Max  *float64 // int and float, inclusive
	MaxLength int      // bytes; string or blob (decoded); 0 means the spec's default
	// MinLength (strings, bytes) refuses a non-empty value shorter than this on writes; the
	// empty string stays allowed and means "unset" (API key, WiFi passwords). Stored values
	// are not re-checked on read, so a short stored secret never silently reads as unset.
	MinLength int
	Enum      []string // string
	Pattern   string   // string; schema only (see the package doc) unless CheckPattern
	// Text names the character rule of a string key (TextToken, TextBSSID) or the content
	// rule of a blob key (TextCertificates); "" means any valid UTF-8, any bytes.
	// Unlike Pattern it is checked by the device, with the same function every other writer
	// of such a value uses (CheckText).
	Text            string
	Secret          bool // string or blob
	RestartRequired bool
	ReadOnly        bool
	Unit            string
	Group           string
	Title           string
	Description     string
	X               *X
	// MovesTo names a key ("ns.key") that takes over this deprecated key: at every boot a
	// non-empty stored value moves there, replacing the target's value (the later one wins:
	// a write of the target drops a pending value of this key); a value the target refuses
	// is dropped.
	MovesTo string
	// CheckPattern (Go descriptors) makes writes check Pattern too, for a key whose alphabet
	// is a device rule rather than a UI hint (net.hostname: a DNS label).
	CheckPattern bool
}

// X holds presentation hints (the descriptor's `x`).
type X struct {
	DisplayMultiplier *float64
	DisplayOffset     *float64
	Format            string
	Columns           []string
}

// Step is one migration step; it reads and rewrites stored values through m.
type Step func(m *Migration) error

// Float returns a pointer to v, for descriptor literals.
func Float(v float64) *float64 { return &v }

// nsDef is a validated namespace.
type nsDef struct {
	Namespace
	keys    map[string]*keyDef
	order   []*keyDef
	runtime bool
}

// keyDef is a validated key with its limits resolved.
type keyDef struct {
	Key
	ns       string
	def      any // bool, int64, float64, string or []byte
	defJSON  string
	min, max float64
	hasMin   bool
	hasMax   bool
	maxLen   int
	pattern  *regexp.Regexp
	columns  map[string]bool
	table    bool
	// cached is the effective value as last read from the store, valid while the config's
	// write generation is the one it was read under (Config.effective).
	cached atomic.Pointer[cachedValue]
}

// cachedValue is an effective value and the write generation it was read under.
type cachedValue struct {
	gen uint64
	v   any
}

func (k *keyDef) path() string { return k.ns + "." + k.Name }

// ValidateNamespace checks a descriptor against every rule of the spec's descriptor table.
func ValidateNamespace(ns Namespace) error {
	_, err := compile(ns)
	return err
}

func compile(ns Namespace) (*nsDef, error) {
	if !nsNameRE.MatchString(ns.Name) {
		return nil, fmt.Errorf("namespace %q: name must match %s", ns.Name, nsNameRE)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("namespace %s: %s", ns.Name, fmt.Sprintf(format, args...))
	}
	if ns.Version < 1 {
		return nil, bad("version %d: must be at least 1", ns.Version)
	}
	if strings.TrimSpace(ns.Title) == "" {
		return nil, bad("title is required")
	}
	if len(ns.Keys) > maxKeys {
		return nil, bad("%d keys: at most %d", len(ns.Keys), maxKeys)
	}
	for v := range ns.Steps {
		if v < 2 || v > ns.Version {
			return nil, bad("migration step to version %d outside 2..%d", v, ns.Version)
		}
	}
	d := &nsDef{Namespace: ns, keys: map[string]*keyDef{}}
	for i := range ns.Keys {
		k, err := compileKey(ns.Name, ns.Keys[i])
		if err != nil {
			return nil, bad("%v", err)
		}
		if d.keys[k.Name] != nil {
			return nil, bad("key %s: duplicate name", k.Name)
		}
		d.keys[k.Name] = k
		d.order = append(d.order, k)
	}
	return d, nil
}

func compileKey(ns string, key Key) (*keyDef, error) {
	k := &keyDef{Key: key, ns: ns}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("key %s: %s", key.Name, fmt.Sprintf(format, args...))
	}
	if !keyNameRE.MatchString(key.Name) {
		return nil, fmt.Errorf("key %q: name must match %s", key.Name, keyNameRE)
	}
	if key.Name == VersionKey {
		return nil, bad("name is reserved")
	}
	numeric := key.Type == TypeInt || key.Type == TypeFloat
	textual := key.Type == TypeString || key.Type == TypeBlob
	switch key.Type {
	case TypeBool, TypeInt, TypeFloat, TypeString, TypeBlob:
	default:
		return nil, bad("type %q: want bool, int, float, string or blob", key.Type)
	}
	if (key.Min != nil || key.Max != nil) && !numeric {
		return nil, bad("min and max apply to int and float keys only")
	}
	if key.MaxLength != 0 && !textual {
		return nil, bad("maxLength applies to string and blob keys only")
	}
	if key.MaxLength < 0 {
		return nil, bad("maxLength %d is negative", key.MaxLength)
	}
	if key.Enum != nil && key.Type != TypeString {
		return nil, bad("enum applies to string keys only")
	}
	if key.MinLength != 0 && key.Type != TypeString {
		return nil, bad("minLength applies to string keys only")
	}
	if key.Pattern != "" && key.Type != TypeString {
		return nil, bad("pattern applies to string keys only")
	}
	if key.Text != "" && textType(key.Text) != key.Type {
		return nil, bad("text %q: not a text kind of a %s key", key.Text, key.Type)
	}
	if key.Secret && !textual {
		return nil, bad("secret applies to string and blob keys only")
	}
	if utf8.RuneCountInString(key.Group) > MaxGroupLen {
		return nil, bad("group %q: at most %d characters", key.Group, MaxGroupLen)
	}
	if key.MovesTo != "" && key.Type != TypeString {
		return nil, bad("movesTo applies to string keys only")
	}

	// Numeric bounds; an int is 32-bit whatever its descriptor says.
	if key.Type == TypeInt {
		k.min, k.max, k.hasMin, k.hasMax = math.MinInt32, math.MaxInt32, true, true
	}
	for _, b := range []struct {
		p    *float64
		dst  *float64
		has  *bool
		name string
	}{{key.Min, &k.min, &k.hasMin, "min"}, {key.Max, &k.max, &k.hasMax, "max"}} {
		if b.p == nil {
			continue
		}
		v := *b.p
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, bad("%s is not finite", b.name)
		}
		if key.Type == TypeInt && (v != math.Trunc(v) || v < math.MinInt32 || v > math.MaxInt32) {
			return nil, bad("%s %v is not a 32-bit integer", b.name, v)
		}
		*b.dst, *b.has = v, true
	}
	if k.hasMin && k.hasMax && k.min > k.max {
		return nil, bad("min %v above max %v", k.min, k.max)
	}

	// Presentation.
	if x := key.X; x != nil {
		if key.Type != TypeInt && key.Type != TypeFloat && key.Type != TypeString {
			return nil, bad("x applies to int, float and string keys only")
		}
		if (x.DisplayMultiplier != nil || x.DisplayOffset != nil) && !numeric {
			return nil, bad("displayMultiplier and displayOffset apply to int and float keys only")
		}
		if m := x.DisplayMultiplier; m != nil && (*m == 0 || math.IsNaN(*m) || math.IsInf(*m, 0)) {
			return nil, bad("displayMultiplier must be a non-zero finite number")
		}
		if o := x.DisplayOffset; o != nil && (math.IsNaN(*o) || math.IsInf(*o, 0)) {
			return nil, bad("displayOffset must be finite")
		}
		if len(x.Format) > 32 {
			return nil, bad("x.format longer than 32 bytes")
		}
		if x.Format == FormatTable {
			if key.Type != TypeString {
				return nil, bad("format table applies to string keys only")
			}
			if key.Enum != nil {
				return nil, bad("a table key cannot have an enum")
			}
			if len(x.Columns) == 0 || len(x.Columns) > maxColumns {
				return nil, bad("a table key needs 1 to %d columns", maxColumns)
			}
			k.table = true
			k.columns = map[string]bool{}
			for _, c := range x.Columns {
				if c == "" || len(c) > 32 || k.columns[c] {
					return nil, bad("column %q: empty, longer than 32 bytes or repeated", c)
				}
				k.columns[c] = true
			}
		} else if x.Columns != nil {
			return nil, bad("columns apply to format table only")
		}
	}

	// Lengths.
	switch key.Type {
	case TypeString:
		longest := 0
		seen := map[string]bool{}
		for _, e := range key.Enum {
			if seen[e] {
				return nil, bad("enum value %q repeated", e)
			}
			seen[e] = true
			longest = max(longest, len(e))
		}
		if key.Enum != nil && len(key.Enum) == 0 {
			return nil, bad("enum is empty")
		}
		switch {
		case key.MaxLength > MaxStringBytes:
			return nil, bad("maxLength %d above %d", key.MaxLength, MaxStringBytes)
		case key.MaxLength > 0:
			k.maxLen = key.MaxLength
		case k.table:
			k.maxLen = MaxStringBytes
		case key.Enum != nil:
			k.maxLen = longest
		default:
			k.maxLen = DefaultStringBytes
		}
		if longest > k.maxLen {
			return nil, bad("enum value longer than maxLength %d", k.maxLen)
		}
		if key.MinLength < 0 || key.MinLength > k.maxLen {
			return nil, bad("minLength %d outside 0..maxLength", key.MinLength)
		}
		if key.Secret && key.MinLength > len(Sentinel) {
			return nil, bad("a secret's minLength is at most %d (the sentinel must fit)", len(Sentinel))
		}
		if key.Secret && k.maxLen < len(Sentinel) {
			return nil, bad("a secret string needs maxLength of at least %d", len(Sentinel))
		}
		if key.Pattern != "" {
			re, err := compilePattern(key.Pattern)
			if err != nil {
				return nil, bad("pattern: %v", err)
			}
			k.pattern = re
		}
	case TypeBlob:
		switch {
		case key.MaxLength > MaxBlobBytes:
			return nil, bad("maxLength %d above %d", key.MaxLength, MaxBlobBytes)
		case key.MaxLength > 0:
			k.maxLen = key.MaxLength
		default:
			k.maxLen = DefaultBlobBytes
		}
		if key.Secret && base64Len(k.maxLen) < len(Sentinel) {
			return nil, bad("a secret blob needs maxLength of at least 4 (room for the sentinel in base64)")
		}
	}

	// The default: required, and it must satisfy every constraint, the pattern included.
	def := key.Default
	switch {
	case key.Type == TypeBlob:
		if !emptyBlob(def) {
			return nil, bad("a blob default must be empty")
		}
		def = []byte{}
	case k.table && def == nil:
		def = "[]"
	case def == nil:
		return nil, bad("default is required")
	}
	if key.Secret && key.Type == TypeString && def != "" {
		return nil, bad("a secret default must be empty")
	}
	raw, err := goToJSON(def)
	if err != nil {
		return nil, bad("default: %v", err)
	}
	v, msg := k.fromJSON(raw)
	if msg != "" {
		return nil, bad("default: %s", msg)
	}
	if s, ok := v.(string); ok && k.pattern != nil && !k.pattern.MatchString(s) {
		return nil, bad("default %q does not match the pattern", s)
	}
	if msg := k.checkWrite(v); msg != "" {
		return nil, bad("default: %s", msg)
	}
	k.def, k.defJSON = v, canonical(v)
	return k, nil
}

func emptyBlob(v any) bool {
	switch b := v.(type) {
	case nil:
		return true
	case string:
		return b == ""
	case []byte:
		return len(b) == 0
	}
	return false
}

// goToJSON encodes a Go value as the JSON a document would carry for it. Integers of every
// width, floats, strings, bools and []byte (as base64) are accepted.
func goToJSON(v any) ([]byte, error) {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, errors.New("not a finite number")
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, errors.New("not a finite number")
		}
	case json.Number:
		return []byte(x), nil
	case json.RawMessage:
		return x, nil
	case bool, string, []byte, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
	default:
		return nil, fmt.Errorf("unsupported Go type %T", v)
	}
	return json.Marshal(v)
}

// patterns holds the compiled key patterns by source. The built-in namespaces repeat a few
// patterns over many keys (every WiFi network's PSK and BSSID, every address), and compiling
// each copy was a good part of the configuration's start at every boot. A *regexp.Regexp is
// safe for concurrent use, so keys share one.
var patterns sync.Map // string -> *regexp.Regexp

func compilePattern(src string) (*regexp.Regexp, error) {
	if re, ok := patterns.Load(src); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, err
	}
	patterns.Store(src, re)
	return re, nil
}
