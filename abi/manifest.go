package abi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Manifest describes a plugin: who it is, which ABI it speaks, what it asks for.
type Manifest struct {
	ID           string       `json:"id"`
	Name         string       `json:"name"`
	Version      string       `json:"version"`
	ABI          int          `json:"abi"`
	ABIMinor     int          `json:"abi_minor,omitempty"`
	Description  string       `json:"description,omitempty"`
	Capabilities []Capability `json:"capabilities"`
	Routes       []Route      `json:"routes,omitempty"`
	Events       []string     `json:"events,omitempty"`
}

// Route is an HTTP endpoint the plugin serves, relative to /api/v1.
type Route struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Public bool   `json:"public,omitempty"` // served without authentication
}

// Manifest limits.
const (
	MaxIDLen       = 12
	MaxName        = 64
	MaxVersion     = 32
	MaxDescription = 512
	MaxRoutePath   = 128
	MaxEventName   = 32
)

// The manifest's name rules are written out by hand rather than as regular expressions: the
// package is compiled into every plugin, and regexp would add to each module's size.

func lower(c byte) bool { return c >= 'a' && c <= 'z' }
func digit(c byte) bool { return c >= '0' && c <= '9' }
func alnum(c byte) bool { return lower(c) || digit(c) || c >= 'A' && c <= 'Z' }

// lowerName reports whether s matches ^[a-z][a-z0-9_]{0,max-1}$.
func lowerName(s string, max int) bool {
	if len(s) == 0 || len(s) > max || !lower(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !lower(c) && !digit(c) && c != '_' {
			return false
		}
	}
	return true
}

// validVersion reports whether v is 1 to 4 dotted numbers with an optional -prerelease of
// [0-9A-Za-z.-].
func validVersion(v string) bool {
	core, pre, hasPre := strings.Cut(v, "-")
	parts := strings.Split(core, ".")
	if len(parts) > 4 || (hasPre && pre == "") {
		return false
	}
	for _, p := range parts {
		if p == "" {
			return false
		}
		for i := 0; i < len(p); i++ {
			if !digit(p[i]) {
				return false
			}
		}
	}
	for i := 0; i < len(pre); i++ {
		if c := pre[i]; !alnum(c) && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

// staticSegment reports whether s is a literal path segment of [A-Za-z0-9_.-].
func staticSegment(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

// paramSegment reports whether s is a :param segment (^:[a-z][a-z0-9_]{0,31}$).
func paramSegment(s string) bool { return len(s) > 1 && s[0] == ':' && lowerName(s[1:], 32) }

// ReservedIDs are ids no plugin may take: the core API's top-level path segments (a plugin's
// routes live under /<id>) and the host's own REST paths and health key prefixes.
var ReservedIDs = []string{
	"api", "auth", "config", "events", "health", "logs", "net", "ota", "plugins", "power",
	"sk", "system", "time", "ui", "wifi", "keys", "uploads", "test",
}

// SpecialRoutes are the spec's optional-component endpoints a plugin may serve outside its
// own prefix (with the http capability; one plugin per route).
var SpecialRoutes = []Route{{Method: "GET", Path: "/prov"}, {Method: "GET", Path: "/ble/status"}}

// SpecialEvents are the spec's optional-component SSE events a plugin may publish besides
// its own (<id> and <id>_*).
var SpecialEvents = []string{"ble"}

// Methods a route may use.
var Methods = []string{"GET", "POST", "PUT", "DELETE"}

// ValidID reports whether id is a well-formed plugin id (reserved ids included).
func ValidID(id string) bool { return lowerName(id, MaxIDLen) }

// Namespace is the run-time configuration namespace of plugin id.
func Namespace(id string) string { return "f_" + id }

// ParseManifest decodes a manifest strictly (unknown members, duplicate members and trailing
// data are errors) and validates it.
func ParseManifest(b []byte) (Manifest, error) {
	if len(b) > MaxManifest {
		return Manifest{}, fmt.Errorf("abi: manifest of %d bytes, at most %d", len(b), MaxManifest)
	}
	if err := checkDuplicateMembers(b); err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if err := DecodeStrict(b, &m); err != nil {
		return Manifest{}, fmt.Errorf("abi: manifest: %w", err)
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, err
	}
	if len(m.Routes) == 0 {
		m.Routes = nil
	}
	if len(m.Events) == 0 {
		m.Events = nil
	}
	return m, nil
}

// checkDuplicateMembers refuses a JSON document with a repeated member name in any object, so
// what the operator reads is what the host applies.
func checkDuplicateMembers(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		obj  bool
		key  bool // next token in an object is a key
		seen map[string]bool
	}
	var stack []frame
	for {
		t, err := dec.Token()
		if err != nil {
			return nil // syntax errors are reported by the strict decode
		}
		top := len(stack) - 1
		if top >= 0 && stack[top].obj && stack[top].key {
			if s, ok := t.(string); ok {
				if stack[top].seen[s] {
					return fmt.Errorf("abi: manifest: duplicate member %q", s)
				}
				stack[top].seen[s] = true
				stack[top].key = false
				continue
			}
		}
		switch t {
		case json.Delim('{'):
			stack = append(stack, frame{obj: true, key: true, seen: map[string]bool{}})
			continue
		case json.Delim('['):
			stack = append(stack, frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:top]
		}
		if n := len(stack) - 1; n >= 0 && stack[n].obj {
			stack[n].key = true
		}
		if len(stack) == 0 {
			return nil
		}
	}
}

// Validate checks every rule of the manifest (not the ABI version's compatibility with this
// host: see CheckVersion).
func (m Manifest) Validate() error {
	if err := m.validate(); err != nil {
		return fmt.Errorf("abi: manifest: %w", err)
	}
	return nil
}

func (m Manifest) validate() error {
	if !ValidID(m.ID) {
		return fmt.Errorf("id %q must match ^[a-z][a-z0-9_]{0,11}$", m.ID)
	}
	for _, r := range ReservedIDs {
		if m.ID == r {
			return fmt.Errorf("id %q is reserved", m.ID)
		}
	}
	if err := text("name", m.Name, MaxName, true); err != nil {
		return err
	}
	if len(m.Version) > MaxVersion || !validVersion(m.Version) {
		return fmt.Errorf("version %q must be dotted numbers with an optional -prerelease, at most %d bytes", m.Version, MaxVersion)
	}
	if m.ABI < 1 {
		return fmt.Errorf("abi %d: must be 1 or more", m.ABI)
	}
	if m.ABIMinor < 0 {
		return fmt.Errorf("abi_minor %d: must not be negative", m.ABIMinor)
	}
	if err := text("description", m.Description, MaxDescription, false); err != nil {
		return err
	}
	caps := map[Capability]bool{}
	for _, c := range m.Capabilities {
		if !c.Known() {
			return fmt.Errorf("unknown capability %q", c)
		}
		if caps[c] {
			return fmt.Errorf("capability %q listed twice", c)
		}
		caps[c] = true
	}
	if caps[CapHealthReboot] && !caps[CapHealth] {
		return errors.New("capability health.reboot needs health")
	}
	if len(m.Routes) > 0 && !caps[CapHTTP] {
		return errors.New("routes need the http capability")
	}
	if len(m.Events) > 0 && !caps[CapEvents] {
		return errors.New("events need the events capability")
	}
	if err := m.validateRoutes(); err != nil {
		return err
	}
	return m.validateEvents()
}

func text(what, s string, max int, required bool) error {
	switch {
	case required && strings.TrimSpace(s) == "":
		return fmt.Errorf("%s is required", what)
	case len(s) > max:
		return fmt.Errorf("%s of %d bytes, at most %d", what, len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not UTF-8", what)
	}
	for _, r := range s {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
			return fmt.Errorf("%s holds a control character", what)
		}
	}
	return nil
}

func (m Manifest) validateRoutes() error {
	if len(m.Routes) > MaxRoutes {
		return fmt.Errorf("%d routes, at most %d", len(m.Routes), MaxRoutes)
	}
	seen := map[string]bool{}
	for i, r := range m.Routes {
		if err := m.validateRoute(r); err != nil {
			return fmt.Errorf("route %d (%s %s): %w", i, r.Method, r.Path, err)
		}
		k := r.Method + " " + r.Path
		if seen[k] {
			return fmt.Errorf("route %s listed twice", k)
		}
		seen[k] = true
		for _, o := range m.Routes[:i] {
			if o.Method == r.Method && routesConflict(o.Path, r.Path) {
				return fmt.Errorf("routes %s and %s overlap: a :param segment cannot sit beside another segment at the same place", o.Path, r.Path)
			}
		}
	}
	return nil
}

func (m Manifest) validateRoute(r Route) error {
	okMethod := false
	for _, x := range Methods {
		okMethod = okMethod || r.Method == x
	}
	if !okMethod {
		return fmt.Errorf("method must be one of %s", strings.Join(Methods, ", "))
	}
	for _, s := range SpecialRoutes {
		if r.Method == s.Method && r.Path == s.Path {
			return nil
		}
	}
	if len(r.Path) > MaxRoutePath {
		return fmt.Errorf("path longer than %d bytes", MaxRoutePath)
	}
	prefix := "/" + m.ID
	if r.Path != prefix && !strings.HasPrefix(r.Path, prefix+"/") {
		return fmt.Errorf("path must be %s or under %s/ (or one of the spec's optional-component endpoints)", prefix, prefix)
	}
	if r.Path == prefix {
		return nil
	}
	names := map[string]bool{}
	for _, seg := range strings.Split(r.Path[len(prefix)+1:], "/") {
		switch {
		case paramSegment(seg):
			if names[seg] {
				return fmt.Errorf("parameter %s used twice", seg)
			}
			names[seg] = true
		case staticSegment(seg) && seg != "." && seg != "..":
		default:
			return fmt.Errorf("segment %q must be letters, digits, _ . - or a :param", seg)
		}
	}
	return nil
}

// routesConflict reports whether two paths of one method would collide in a path router: at
// the first segment where they differ, one of them is a :param.
func routesConflict(a, b string) bool {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if as[i] == bs[i] {
			continue
		}
		return strings.HasPrefix(as[i], ":") || strings.HasPrefix(bs[i], ":")
	}
	return false
}

func (m Manifest) validateEvents() error {
	if len(m.Events) > MaxEvents {
		return fmt.Errorf("%d events, at most %d", len(m.Events), MaxEvents)
	}
	seen := map[string]bool{}
	for _, e := range m.Events {
		if !lowerName(e, MaxEventName) {
			return fmt.Errorf("event %q must match ^[a-z][a-z0-9_]{0,31}$", e)
		}
		if seen[e] {
			return fmt.Errorf("event %q listed twice", e)
		}
		seen[e] = true
		if e == m.ID || strings.HasPrefix(e, m.ID+"_") {
			continue
		}
		special := false
		for _, s := range SpecialEvents {
			special = special || e == s
		}
		if !special {
			return fmt.Errorf("event %q must be %s or start with %s_", e, m.ID, m.ID)
		}
	}
	return nil
}

// HasCapability reports whether c is in caps.
func HasCapability(caps []Capability, c Capability) bool {
	return slices.Contains(caps, c)
}
