//go:build !wasip1

package sdk

import (
	"devhost/abi"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// The fake host checks a namespace descriptor by the rules of the spec's descriptor table, as
// the device does, so that an author's native test refuses what an install would refuse. The
// check lives here, standard library only, so that a plugin's tests pull in nothing of the
// device; the device's own check is host/config, and a test there keeps the two in agreement.

// Limits of the descriptor table.
const (
	maxDescriptorBytes = 64 << 10
	maxDescriptorKeys  = 256
	maxTableColumns    = 16
	maxGroupRunes      = 24
	maxStringBytes     = 3999
	maxBlobBytes       = 508000
	defaultStringBytes = 256
	defaultBlobBytes   = 1024
	versionKey         = "config_version"
	secretSentinel     = "********"
)

var (
	nsNameRE  = regexp.MustCompile(`^[a-z][a-z0-9_]{0,14}$`)
	keyNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,14}$`)
)

// descriptor is the wire form of a namespace descriptor: a Namespace and its name.
type descriptor struct {
	Name string `json:"namespace"`
	Namespace
}

// table reports whether k holds a table (a JSON array of rows as a string).
func table(k Key) bool { return k.X != nil && k.X.Format == FormatTable }

// effectiveDefault is k's default as the device reads it: blobs are "", a table without one "[]".
func effectiveDefault(k Key) any {
	switch {
	case k.Type == TypeBlob:
		return ""
	case table(k) && k.Default == nil:
		return "[]"
	}
	return k.Default
}

// parseDescriptor decodes and checks a descriptor registered as namespace name.
func parseDescriptor(b []byte, name string) (descriptor, error) {
	if len(b) > maxDescriptorBytes {
		return descriptor{}, fmt.Errorf("descriptor of %d bytes, at most %d", len(b), maxDescriptorBytes)
	}
	var d descriptor
	if err := abi.DecodeStrict(b, &d); err != nil {
		return descriptor{}, fmt.Errorf("descriptor: %w", err)
	}
	if d.Name != "" && d.Name != name {
		return descriptor{}, errForeignNamespace
	}
	d.Name = name
	if !nsNameRE.MatchString(d.Name) {
		return descriptor{}, fmt.Errorf("namespace %q: name must match %s", d.Name, nsNameRE)
	}
	if d.Version < 1 {
		return descriptor{}, fmt.Errorf("version %d: must be at least 1", d.Version)
	}
	if strings.TrimSpace(d.Title) == "" {
		return descriptor{}, errors.New("title is required")
	}
	if len(d.Keys) > maxDescriptorKeys {
		return descriptor{}, fmt.Errorf("%d keys: at most %d", len(d.Keys), maxDescriptorKeys)
	}
	seen := map[string]bool{}
	for _, k := range d.Keys {
		if err := checkKey(k); err != nil {
			return descriptor{}, fmt.Errorf("key %q: %w", k.Name, err)
		}
		if seen[k.Name] {
			return descriptor{}, fmt.Errorf("key %q: duplicate name", k.Name)
		}
		seen[k.Name] = true
	}
	return d, nil
}

// errForeignNamespace is a descriptor naming a namespace other than the plugin's own.
var errForeignNamespace = errors.New("descriptor names another namespace")

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// checkKey applies the descriptor table's rules to one key.
func checkKey(k Key) error {
	if !keyNameRE.MatchString(k.Name) || k.Name == versionKey {
		return fmt.Errorf("name must match %s and is not %s", keyNameRE, versionKey)
	}
	numeric := k.Type == TypeInt || k.Type == TypeFloat
	textual := k.Type == TypeString || k.Type == TypeBlob
	switch {
	case !numeric && !textual && k.Type != TypeBool:
		return fmt.Errorf("type %q: want bool, int, float, string or blob", k.Type)
	case (k.Min != nil || k.Max != nil) && !numeric:
		return errors.New("min and max apply to int and float keys only")
	case k.MaxLength != 0 && !textual, k.MaxLength < 0:
		return errors.New("maxLength applies to string and blob keys only, and is not negative")
	case (k.Enum != nil || k.Pattern != "") && k.Type != TypeString:
		return errors.New("enum and pattern apply to string keys only")
	case k.Secret && !textual:
		return errors.New("secret applies to string and blob keys only")
	case utf8.RuneCountInString(k.Group) > maxGroupRunes:
		return fmt.Errorf("group: at most %d characters", maxGroupRunes)
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	if k.Type == TypeInt {
		lo, hi = math.MinInt32, math.MaxInt32
	}
	for _, b := range []struct {
		p   *float64
		dst *float64
	}{{k.Min, &lo}, {k.Max, &hi}} {
		if b.p == nil {
			continue
		}
		v := *b.p
		if !finite(v) || (k.Type == TypeInt && (v != math.Trunc(v) || v < math.MinInt32 || v > math.MaxInt32)) {
			return fmt.Errorf("bound %v is not a finite number of the key's type", v)
		}
		*b.dst = v
	}
	if lo > hi {
		return fmt.Errorf("min %v above max %v", lo, hi)
	}
	if err := checkDisplay(k); err != nil {
		return err
	}
	maxLen, err := keyMaxLength(k)
	if err != nil {
		return err
	}
	var re *regexp.Regexp
	if k.Pattern != "" {
		if re, err = regexp.Compile(k.Pattern); err != nil {
			return fmt.Errorf("pattern: %w", err)
		}
	}
	return checkDefault(k, lo, hi, maxLen, re)
}

func checkDisplay(k Key) error {
	x := k.X
	if x == nil {
		return nil
	}
	numeric := k.Type == TypeInt || k.Type == TypeFloat
	switch {
	case !numeric && k.Type != TypeString:
		return errors.New("x applies to int, float and string keys only")
	case (x.DisplayMultiplier != nil || x.DisplayOffset != nil) && !numeric:
		return errors.New("displayMultiplier and displayOffset apply to int and float keys only")
	case x.DisplayMultiplier != nil && (*x.DisplayMultiplier == 0 || !finite(*x.DisplayMultiplier)):
		return errors.New("displayMultiplier must be a non-zero finite number")
	case x.DisplayOffset != nil && !finite(*x.DisplayOffset):
		return errors.New("displayOffset must be finite")
	case len(x.Format) > 32:
		return errors.New("x.format longer than 32 bytes")
	case x.Format != FormatTable && x.Columns != nil:
		return errors.New("columns apply to format table only")
	case x.Format != FormatTable:
		return nil
	case k.Type != TypeString || k.Enum != nil:
		return errors.New("format table applies to string keys without an enum")
	case len(x.Columns) == 0 || len(x.Columns) > maxTableColumns:
		return fmt.Errorf("a table key needs 1 to %d columns", maxTableColumns)
	}
	cols := map[string]bool{}
	for _, c := range x.Columns {
		if c == "" || len(c) > 32 || cols[c] {
			return fmt.Errorf("column %q: empty, longer than 32 bytes or repeated", c)
		}
		cols[c] = true
	}
	return nil
}

// keyMaxLength resolves a string's or blob's maxLength (0 for other types).
func keyMaxLength(k Key) (int, error) {
	switch k.Type {
	case TypeString:
		longest, seen := 0, map[string]bool{}
		for _, e := range k.Enum {
			if seen[e] {
				return 0, fmt.Errorf("enum value %q repeated", e)
			}
			seen[e] = true
			longest = max(longest, len(e))
		}
		if k.Enum != nil && len(k.Enum) == 0 {
			return 0, errors.New("enum is empty")
		}
		n := defaultStringBytes
		switch {
		case k.MaxLength > maxStringBytes:
			return 0, fmt.Errorf("maxLength %d above %d", k.MaxLength, maxStringBytes)
		case k.MaxLength > 0:
			n = k.MaxLength
		case table(k):
			n = maxStringBytes
		case k.Enum != nil:
			n = longest
		}
		if longest > n {
			return 0, fmt.Errorf("enum value longer than maxLength %d", n)
		}
		if k.Secret && n < len(secretSentinel) {
			return 0, fmt.Errorf("a secret string needs maxLength of at least %d", len(secretSentinel))
		}
		return n, nil
	case TypeBlob:
		n := defaultBlobBytes
		switch {
		case k.MaxLength > maxBlobBytes:
			return 0, fmt.Errorf("maxLength %d above %d", k.MaxLength, maxBlobBytes)
		case k.MaxLength > 0:
			n = k.MaxLength
		}
		if k.Secret && (n+2)/3*4 < len(secretSentinel) {
			return 0, errors.New("a secret blob needs maxLength of at least 4")
		}
		return n, nil
	}
	return 0, nil
}

// checkDefault checks that the default is there (blobs and tables excepted) and satisfies
// every constraint of the key.
func checkDefault(k Key, lo, hi float64, maxLen int, re *regexp.Regexp) error {
	switch {
	case k.Type == TypeBlob:
		if k.Default != nil && k.Default != "" {
			return errors.New("a blob default must be empty")
		}
		return nil
	case k.Default == nil && table(k):
		return nil
	case k.Default == nil:
		return errors.New("default is required")
	}
	switch k.Type {
	case TypeBool:
		if _, ok := k.Default.(bool); !ok {
			return errors.New("default: expected a boolean")
		}
	case TypeInt, TypeFloat:
		f, ok := k.Default.(float64)
		if !ok {
			return errors.New("default: expected a number")
		}
		if k.Type == TypeInt && f != math.Trunc(f) {
			return errors.New("default: expected an integer")
		}
		if f < lo || f > hi {
			return fmt.Errorf("default %v outside %v..%v", f, lo, hi)
		}
	case TypeString:
		s, ok := k.Default.(string)
		if !ok {
			return errors.New("default: expected a string")
		}
		if k.Secret && s != "" {
			return errors.New("a secret default must be empty")
		}
		if len(s) > maxLen {
			return fmt.Errorf("default longer than maxLength %d", maxLen)
		}
		if k.Enum != nil && !slices.Contains(k.Enum, s) {
			return fmt.Errorf("default %q is not in the enum", s)
		}
		if re != nil && !re.MatchString(s) {
			return fmt.Errorf("default %q does not match the pattern", s)
		}
		if table(k) {
			var rows []map[string]json.RawMessage
			if json.Unmarshal([]byte(s), &rows) != nil {
				return errors.New("default: a table is a JSON array of objects")
			}
		}
	}
	return nil
}
