// Package skmap maps decoded NMEA 2000 messages to Signal K deltas the way signalk-server's
// @signalk/n2k-signalk does: the same paths, SI units and values, and the same $source
// ({label, type "NMEA2000", pgn, src}, with canName and deviceInstance once the sender's
// address claim was seen). The mapping is a table (table*.go, the rule type in rules.go):
// per PGN, rules naming a path template, the field it takes, a condition and, where a unit
// changes, a conversion; the composite values (position, attitude, satellites,
// notifications, AIS ship types) and what the reference computes are small functions. The
// AIS PGNs name another vessel's (or aid's, station's) context for their deltas.
package skmap

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"devhost/plugins/n2k/decode"
)

// Source is a delta's $source.
type Source struct {
	Label          string  `json:"label"`
	Type           string  `json:"type"`
	PGN            uint32  `json:"pgn"`
	Src            string  `json:"src"`
	CanName        string  `json:"canName,omitempty"`
	DeviceInstance *int    `json:"deviceInstance,omitempty"`
	Instance       *string `json:"instance,omitempty"`
}

// Value is one path and its value: float64, string, bool, nil (JSON null) or a struct
// below. A NaN number is written as null, as JSON has no NaN.
type Value struct {
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// MarshalJSON writes NaN as null.
func (v Value) MarshalJSON() ([]byte, error) {
	type plain Value
	if f, ok := v.Value.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		v.Value = nil
	}
	return json.Marshal(plain(v))
}

// Update is one update of a delta.
type Update struct {
	Source    Source  `json:"source"`
	Timestamp string  `json:"timestamp"`
	Values    []Value `json:"values"`
}

// Delta is what n2k-signalk emits for one message. Context is empty for the own vessel
// ("vessels.self") and names another vessel, aid to navigation, base station or SAR
// aircraft for the AIS PGNs (vessels.urn:mrn:imo:mmsi:<mmsi> and the like).
type Delta struct {
	Updates []Update   `json:"updates"`
	Context string     `json:"context,omitempty"`
	text    *textCache // the Mapper's, for AppendJSON; nil: none
}

// Position, Attitude, SatellitesInView and Notification are the composite values.
type Position struct {
	Longitude float64 `json:"longitude"`
	Latitude  float64 `json:"latitude"`
}

// Attitude has null members where the message had no value.
type Attitude struct {
	Yaw   *float64 `json:"yaw"`
	Pitch *float64 `json:"pitch"`
	Roll  *float64 `json:"roll"`
}

// Satellite is one satellite in view.
type Satellite struct {
	ID        any `json:"id,omitempty"`
	Elevation any `json:"elevation,omitempty"`
	Azimuth   any `json:"azimuth,omitempty"`
	SNR       any `json:"SNR,omitempty"`
}

// SatellitesInView is navigation.gnss.satellitesInView.
type SatellitesInView struct {
	Count      int         `json:"count"`
	Satellites []Satellite `json:"satellites"`
}

// Notification is a notifications.* value.
type Notification struct {
	State   string   `json:"state"`
	Method  []string `json:"method"`
	Message string   `json:"message"`
}

// srcState is what the mapper remembers of a source address.
type srcState struct {
	canName        string
	deviceInstance *int
	powerFactor    map[string]float64 // by path prefix, for the apparent power of 65xxx
	courseType     string             // Rhumbline or GreatCircle, from the last 129284
	alerts         map[string]any     // alert id to its text (126985), for 126983
	m              *Mapper            // the mapper's state shared by all sources
	paths          map[pathKey]string // expanded templates (ctx.expand)
	memo           map[memoKey]any    // what rules made for this source (ctx.remember)
	engines        []*engineMemo      // what the engine rules made, by engine (ctx.engine)
	engineNext     int                // the memo an engine past maxEngines replaces
}

// Mapper keeps per-source state (address claims) between messages. Not safe for
// concurrent use.
type Mapper struct {
	state [256]*srcState // by address: a map keyed by a byte cost a hash every message in the sandbox
	// fusionSource is the Fusion stereo's current source id (130820 Source), "" before one
	// was seen; the reference keeps it for all senders together.
	fusionSource string
	mem          deltaMem // the delta answered, reused message after message
	// tpl holds the paths of one-field templates by rule.tplN and instance (templated).
	tpl []*[256]string
}

// srcNames are the numbers 0..255 in decimal (source addresses, instances), made once.
var srcNames = func() (out [256]string) {
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}()

// New answers an empty Mapper.
func New() *Mapper { return &Mapper{} }

// Maps reports whether the mapper has rules for pgn (or learns from it).
func Maps(pgn uint32) bool {
	prepareRules()
	return pgn == 60928 || pgn < 1<<18 && mappedPGNs[pgn/64]&(1<<(pgn%64)) != 0
}

// PGNs lists the PGNs with a mapping.
func PGNs() []uint32 {
	out := make([]uint32, 0, len(rules))
	for p := range rules {
		out = append(out, p)
	}
	return out
}

// Map answers the delta for d, or nil when it maps to nothing. raw is the message's data,
// needed for the NAME of an address claim (60928). The delta is the Mapper's own until the
// next Map: a caller keeping it copies it.
func (m *Mapper) Map(d *decode.Decoded, raw []byte, now string) *Delta {
	st := m.state[d.Src]
	if st == nil {
		st = &srcState{}
		m.state[d.Src] = st
	}
	st.m = m
	if d.PGN == 60928 {
		m.claim(st, d, raw)
		return nil
	}
	prepareRules()
	rs, cf, ok := rulesFor(d)
	if !ok {
		return nil
	}
	ts := d.Time
	if ts == "" {
		ts = now
	}
	if len(ts) > 10 && ts[10] != 'T' {
		ts = ts[:10] + "T" + ts[11:]
	}
	mem := &m.mem
	u := &mem.upd[0]
	*u = Update{Source: Source{Label: "", Type: "NMEA2000", PGN: d.PGN, Src: srcNames[d.Src]}, Timestamp: ts,
		Values: mem.vals[:0]}
	if st.canName != "" {
		u.Source.CanName = st.canName
		u.Source.DeviceInstance = st.deviceInstance
	}
	c := &mem.c
	*c = ctx{d: d, st: st, stamp: &u.Timestamp}
	for i := range rs {
		rs[i].apply(c, &u.Values)
	}
	if len(rs) == 1 && rs[0].instance {
		s := "null"
		if rs[0].instanceFn != nil {
			s = rs[0].instanceFn(c)
		} else if n, ok := d.Lookup("instance"); ok {
			s = jsString(n)
		}
		u.Source.Instance = &s
	}
	mem.vals = u.Values[:0] // the room grown, for the next message
	if len(u.Values) == 0 {
		return nil
	}
	mem.delta.Context = "" // the delta is reused: an AIS target's context must not stay
	if cf != nil {
		mem.delta.Context = cf(c)
		// The reference drops a message whose MMSI has fewer than 9 digits.
		if i := strings.LastIndexByte(mem.delta.Context, ':'); i >= 0 && len(mem.delta.Context)-i-1 < 9 {
			return nil
		}
	}
	mem.delta.Updates = mem.upd[:]
	mem.delta.text = &mem.text
	return &mem.delta
}

// deltaMem holds the delta with its one update, the room for its values and the mapping's
// context, kept by the Mapper: inside the sandbox every allocation costs the plugin about a
// microsecond, its collector running in the same calls.
type deltaMem struct {
	delta Delta
	upd   [1]Update
	vals  []Value
	c     ctx
	text  textCache
}

// claim records a source's NAME and device instance from its address claim: the NAME is the
// 64-bit little-endian data in hex, the instance the upper and lower fields together.
func (m *Mapper) claim(st *srcState, d *decode.Decoded, raw []byte) {
	if len(raw) < 8 {
		return
	}
	var name uint64
	for i := 7; i >= 0; i-- {
		name = name<<8 | uint64(raw[i])
	}
	upper, _ := d.Number("deviceInstanceUpper")
	lower, _ := d.Number("deviceInstanceLower")
	inst := int(upper)<<3 | int(lower)
	canName := strconv.FormatUint(name, 16)
	if st.canName != "" && st.canName != canName {
		*st = srcState{}
	}
	st.canName, st.deviceInstance = canName, &inst
}

// jsString renders a field value as JavaScript's String() would.
func jsString(v any) string {
	switch x := v.(type) {
	case float64:
		if x >= 0 && x < float64(len(srcNames)) && x == math.Trunc(x) {
			return srcNames[int(x)] // an instance: made once
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	case string:
		return x
	}
	return ""
}
