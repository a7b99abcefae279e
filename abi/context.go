package abi

import (
	"errors"
	"fmt"
	"strings"
)

// Values for another Signal K context (minor 3). An AIS receiver, a radar's target tracker or
// a gateway hears about other vessels, aids to navigation, base stations, aircraft and
// search-and-rescue transponders; sk_publish_ctx carries their values under their own
// context, as `{"context": "vessels.urn:mrn:imo:mmsi:230123456", ...}` deltas. The own
// vessel stays sk_publish's.

// Limits of sk_publish_ctx.
const (
	// MaxContext bounds a context's bytes.
	MaxContext = 256
	// MaxContexts bounds the distinct contexts one plugin instance publishes to at a time: a
	// context not published for ContextIdleMs is forgotten, and a call naming a new context
	// while MaxContexts are live answers ErrLimit. A busy port's AIS traffic stays under it
	// (a VHF receiver hears a few hundred targets); a plugin inventing contexts cannot fill
	// the server with vessels faster than MaxContexts per ContextIdleMs.
	MaxContexts = 256
	// ContextIdleMs is how long a context stays live after its last publication: 10 minutes,
	// longer than a moored AIS class A (3 min) or class B (30 s to 3 min) position report and
	// than the 6-minute static data cycle.
	ContextIdleMs = 600000
)

// ContextRoots are the Signal K top-level groups a context may name, each followed by
// `.<id>`; vessels.self is not among the contexts: the own vessel publishes with sk_publish.
var ContextRoots = []string{"vessels", "atons", "shore.basestations", "aircraft", "sar"}

// ValidContext reports why c is not a context sk_publish_ctx accepts, nil when it is: one
// of ContextRoots, a dot, and an id of the form `urn:mrn:<segments>`: colon-separated
// non-empty segments of letters, digits, '_' and '-' (urn:mrn:imo:mmsi:230123456,
// urn:mrn:signalk:uuid:c0d79334-4e25-4245-8892-54e8ccc8021d), at most MaxContext bytes in
// all. The id has no dot, since the server's data model splits contexts at dots.
func ValidContext(c string) error {
	if len(c) == 0 || len(c) > MaxContext {
		return fmt.Errorf("abi: context of %d bytes, want 1 to %d", len(c), MaxContext)
	}
	id := ""
	for _, root := range ContextRoots {
		if rest, ok := strings.CutPrefix(c, root+"."); ok {
			id = rest
			break
		}
	}
	if id == "" {
		return fmt.Errorf("abi: context %q: want %s.<id>", c, strings.Join(ContextRoots, ".<id>, "))
	}
	if id == "self" {
		return fmt.Errorf("abi: context %q: the own vessel publishes with sk_publish", c)
	}
	rest, ok := strings.CutPrefix(id, "urn:mrn:")
	if !ok || !segments(rest, ':') {
		return fmt.Errorf("abi: context %q: the id must be urn:mrn: then colon-separated segments of letters, digits, _ and -", c)
	}
	return nil
}

// AppendContextValues appends the head of an sk_publish_ctx message, the context; the value
// records follow (AppendValue, AppendNumber...).
func AppendContextValues(b []byte, context string) []byte { return appendStr(b, context) }

// AppendDecodedContextValues is DecodeContextValues reading paths through t and appending
// to dst.
func (t *PathTable) AppendDecodedContextValues(dst []PathValue, b []byte, max int) (string, []PathValue, error) {
	return appendDecodedContextValues(dst, reader{b: b, paths: t, root: true}, max)
}

// DecodeContextValues decodes an sk_publish_ctx message: str context (ValidContext), then
// 1 to max value records (0: MaxValuesPerCall). Besides the paths of sk_publish, a record
// may have the empty path with a JSON object value: the members set at the context's root
// (name, mmsi, communication.callsignVhf of a vessel).
func DecodeContextValues(b []byte, max int) (string, []PathValue, error) {
	return appendDecodedContextValues(nil, reader{b: b, root: true}, max)
}

func appendDecodedContextValues(dst []PathValue, r reader, max int) (string, []PathValue, error) {
	c := r.str(MaxContext, "context")
	if r.err != nil {
		return "", dst, r.err
	}
	if err := ValidContext(c); err != nil {
		return "", dst, err
	}
	if len(r.b) == 0 {
		return "", dst, errors.New("abi: no values")
	}
	out, err := appendDecodedValues(dst, r, max)
	if err != nil {
		return "", dst, err
	}
	return c, out, nil
}
