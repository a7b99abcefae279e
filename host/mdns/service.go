package mdns

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of the spec's "mDNS application services" row and of DNS itself.
const (
	DefaultSlots   = 6  // application service slots
	MaxSlots       = 16 // the slot count is configurable 1..16
	MaxTypeLen     = 31 // a service type is under 32 characters, the leading '_' included
	MaxTXTItems    = 8
	MaxTXTBytes    = 256 // sum of the items' "key=value" lengths
	maxTXTItemLen  = 255 // one character-string on the wire
	MaxInstanceLen = 63  // one DNS label
	MaxHostnameLen = 63
)

// Errors of the advertiser API; the returned errors wrap them with details.
var (
	ErrInvalid     = errors.New("mdns: invalid")
	ErrNoSlot      = errors.New("mdns: no free application service slot")
	ErrExists      = errors.New("mdns: service already registered")
	ErrNotFound    = errors.New("mdns: service not registered")
	ErrClosed      = errors.New("mdns: responder closed")
	ErrNoInterface = errors.New("mdns: no usable multicast interface")
)

// Service is one DNS-SD service the responder advertises on `<hostname>.local`.
type Service struct {
	// Instance is the instance label; empty means the hostname given to the responder. It may
	// be renamed "Instance (2)", "(3)"… when another host already uses it.
	Instance string `json:"instance"`
	Type     string `json:"type"`  // "_http": starts with '_', under 32 characters
	Proto    string `json:"proto"` // "_tcp" or "_udp"
	Port     int    `json:"port"`
	// TXT holds the items in order, each "key=value" or a bare "key".
	TXT []string `json:"txt"`
}

// serviceKey identifies a registration as the caller named it (case-insensitive).
type serviceKey struct{ instance, typ, proto string }

func keyOf(instance, typ, proto string) serviceKey {
	return serviceKey{strings.ToLower(instance), strings.ToLower(typ), strings.ToLower(proto)}
}

// validate checks the service against the spec's limits; a service over a limit is refused,
// never truncated.
func (s Service) validate() error {
	if s.Instance != "" {
		if err := validInstance(s.Instance); err != nil {
			return err
		}
	}
	if err := validType(s.Type); err != nil {
		return err
	}
	if s.Proto != "_tcp" && s.Proto != "_udp" {
		return fmt.Errorf("%w: proto %q: must be _tcp or _udp", ErrInvalid, s.Proto)
	}
	if s.Port < 1 || s.Port > 65535 {
		return fmt.Errorf("%w: port %d: must be 1..65535", ErrInvalid, s.Port)
	}
	return validTXT(s.TXT)
}

func validInstance(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty instance name", ErrInvalid)
	case len(name) > MaxInstanceLen:
		return fmt.Errorf("%w: instance name is %d bytes, at most %d", ErrInvalid, len(name), MaxInstanceLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: instance name is not UTF-8", ErrInvalid)
	}
	for _, c := range []byte(name) {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: instance name has a control character", ErrInvalid)
		}
		if c == '.' {
			// The wire library this package builds on cannot carry a dot inside a label.
			return fmt.Errorf("%w: instance name contains a dot", ErrInvalid)
		}
	}
	return nil
}

func validType(t string) error {
	if len(t) < 2 || t[0] != '_' {
		return fmt.Errorf("%w: service type %q: must start with '_' and name something", ErrInvalid, t)
	}
	if len(t) > MaxTypeLen {
		return fmt.Errorf("%w: service type %q is %d characters, at most %d", ErrInvalid, t, len(t), MaxTypeLen)
	}
	for _, c := range []byte(t[1:]) {
		if !isAlnum(c) && c != '-' && c != '_' {
			return fmt.Errorf("%w: service type %q: only letters, digits, '-' and '_'", ErrInvalid, t)
		}
	}
	return nil
}

func validTXT(items []string) error {
	if len(items) > MaxTXTItems {
		return fmt.Errorf("%w: %d TXT items, at most %d", ErrInvalid, len(items), MaxTXTItems)
	}
	total := 0
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		key, _, _ := strings.Cut(it, "=")
		if key == "" {
			return fmt.Errorf("%w: TXT item %q has an empty key", ErrInvalid, it)
		}
		for _, c := range []byte(key) {
			if c < 0x20 || c > 0x7e {
				return fmt.Errorf("%w: TXT key %q is not printable ASCII", ErrInvalid, key)
			}
		}
		lk := strings.ToLower(key)
		if seen[lk] {
			return fmt.Errorf("%w: TXT key %q appears twice", ErrInvalid, key)
		}
		seen[lk] = true
		if len(it) > maxTXTItemLen {
			return fmt.Errorf("%w: TXT item %q… is %d bytes, at most %d", ErrInvalid, key, len(it), maxTXTItemLen)
		}
		total += len(it)
	}
	if total > MaxTXTBytes {
		return fmt.Errorf("%w: TXT items total %d bytes, at most %d", ErrInvalid, total, MaxTXTBytes)
	}
	return nil
}

// ValidHostname checks a host label: 1..63 letters, digits and hyphens, not starting or ending
// with a hyphen.
func ValidHostname(h string) error {
	if h == "" || len(h) > MaxHostnameLen {
		return fmt.Errorf("%w: hostname %q must be 1..%d characters", ErrInvalid, h, MaxHostnameLen)
	}
	if h[0] == '-' || h[len(h)-1] == '-' {
		return fmt.Errorf("%w: hostname %q starts or ends with '-'", ErrInvalid, h)
	}
	for _, c := range []byte(h) {
		if !isAlnum(c) && c != '-' {
			return fmt.Errorf("%w: hostname %q: only letters, digits and '-'", ErrInvalid, h)
		}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// ParseTXT turns TXT strings into a map: keys lower-cased, the first of a repeated key kept
// (RFC 6763 §6.4), a bare key mapping to "", empty strings and empty keys skipped.
func ParseTXT(items []string) map[string]string {
	out := make(map[string]string, len(items))
	for _, it := range items {
		k, v, _ := strings.Cut(it, "=")
		if k == "" {
			continue
		}
		k = strings.ToLower(k)
		if _, dup := out[k]; dup {
			continue
		}
		out[k] = v
	}
	return out
}

// renamed is a name after n-1 conflicts: instances become "Name (n)", hosts "name-n", each
// shortened so the result stays one label.
func renamed(base string, n int, host bool) string {
	if n <= 1 {
		return base
	}
	suffix := " (" + strconv.Itoa(n) + ")"
	if host {
		suffix = "-" + strconv.Itoa(n)
	}
	limit := MaxInstanceLen - len(suffix)
	for len(base) > limit {
		_, size := utf8.DecodeLastRuneInString(base)
		base = base[:len(base)-size]
	}
	if host {
		base = strings.TrimRight(base, "-")
	}
	return base + suffix
}
