package skmap

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"devhost/plugins/n2k/pgn"
)

// contexts names the Signal K context of a PGN's deltas where it is not the own vessel: the
// AIS reports are about other vessels, aids to navigation, base stations and SAR aircraft.
var contexts = map[uint32]func(*ctx) string{}

// The AIS reports, as n2k-signalk 4.6.0 maps them: each value under the target's context,
// the MMSI, name and call sign as members of the context's root (the empty path).
func init() {
	vessel := func(c *ctx) string {
		if _, ok := c.d.Lookup("userId"); ok {
			return "vessels.urn:mrn:imo:mmsi:" + fieldText(c, "userId")
		}
		return "vessels.unknown"
	}
	padded := func(kind string) func(*ctx) string {
		return func(c *ctx) string {
			if _, ok := c.d.Lookup("userId"); ok {
				return kind + ".urn:mrn:imo:mmsi:" + paddedMMSI(c)
			}
			return kind + ".unknown"
		}
	}
	for _, p := range []uint32{129038, 129039, 129040, 129794, 129809, 129810, 130842} {
		contexts[p] = vessel
	}
	contexts[129793] = padded("shore.basestations")
	contexts[129798] = padded("sar")
	contexts[129041] = func(c *ctx) string {
		if truthy("userId")(c) {
			return "atons.urn:mrn:imo:mmsi:" + fieldText(c, "userId")
		}
		return "atons.unknown"
	}

	sog := rule{path: "navigation.speedOverGround", field: "sog"}
	cog := rule{path: "navigation.courseOverGroundTrue", field: "cog"}
	pos := rule{path: "navigation.position", value: position, when: all(truthy("longitude"), truthy("latitude"))}
	mmsi := rule{root: true, when: truthy("userId"), value: func(c *ctx) (any, bool) {
		return map[string]any{"mmsi": fieldText(c, "userId")}, true
	}}
	paddedID := rule{root: true, when: truthy("userId"), value: func(c *ctx) (any, bool) {
		return map[string]any{"mmsi": paddedMMSI(c)}, true
	}}
	name := rootMember("name", "name")
	callsign := rule{root: true, when: truthy("callsign"), value: func(c *ctx) (any, bool) {
		return map[string]any{"communication": map[string]any{"callsignVhf": c.d.Field("callsign")}}, true
	}}
	class := func(k string) rule {
		return rule{path: "sensors.ais.class", value: func(*ctx) (any, bool) { return k, true }}
	}
	length := rule{path: "design.length", when: truthy("length"), value: func(c *ctx) (any, bool) {
		return map[string]any{"overall": num(c, "length")}, true
	}}
	shipType := rule{path: "design.aisShipType", when: truthy("typeOfShip"), value: func(c *ctx) (any, bool) {
		return namedType(c, "typeOfShip", "SHIP_TYPE", aisShipTypeName)
	}}
	beam := rule{path: "design.beam", field: "beam"}
	fromBow := rule{path: "sensors.ais.fromBow", field: "positionReferenceFromBow"}
	center := rule{path: "sensors.ais.fromCenter", value: fromCenter,
		when: all(truthy("positionReferenceFromStarboard"), truthy("beam"))}

	rules[129038] = []rule{sog, cog, pos, {path: "navigation.rateOfTurn", field: "rateOfTurn"},
		{path: "navigation.headingTrue", field: "heading"},
		{path: "navigation.state", when: truthy("navStatus"), value: only("navStatus", navStates)},
		{path: "navigation.specialManeuver", when: truthy("specialManeuverIndicator"), value: only("specialManeuverIndicator", maneuvers)},
		mmsi, class("A")}
	rules[129039] = []rule{sog, cog, pos, {path: "navigation.headingTrue", field: "heading"}, mmsi, class("B")}
	rules[129040] = []rule{name, {path: "navigation.destination.commonName", field: "destination"}, pos, sog, cog,
		{path: "navigation.headingTrue", field: "trueHeading"}, length, shipType, beam, fromBow, center, mmsi, class("B")}
	rules[129041] = []rule{rootMember("name", "atonName"), pos,
		{path: "design.length", when: truthy("lengthDiameter"), value: func(c *ctx) (any, bool) {
			return map[string]any{"overall": num(c, "lengthDiameter")}, true
		}},
		{path: "atonType", value: func(c *ctx) (any, bool) {
			if !truthy("atonType")(c) {
				return nil, true
			}
			return namedType(c, "atonType", "ATON_TYPE", atonTypeName)
		}},
		{path: "design.beam", field: "beamDiameter"},
		fromBow,
		// The reference reads the vessel report's field names here, absent in this PGN:
		// the offset comes out as NaN, written null.
		{path: "sensors.ais.fromCenter", value: fromCenter,
			when: all(truthy("positionReferenceFromStarboardEdge"), truthy("beamDiameter"))},
		yesFlag("virtual", "virtualAtonFlag"), yesFlag("offPosition", "offPositionIndicator"),
		mmsi, class("ATON")}
	rules[129793] = []rule{{path: "navigation.position", value: position, when: all(has("longitude"), has("latitude"))},
		paddedID, class("BASE")}
	rules[129794] = []rule{class("A"), name,
		{path: "navigation.destination.commonName", value: func(c *ctx) (any, bool) { v, ok := c.d.Lookup("destination"); return v, ok }},
		{path: "navigation.destination.eta", value: eta},
		{path: "design.draft", when: truthy("draft"), value: func(c *ctx) (any, bool) {
			return map[string]any{"maximum": c.d.Field("draft")}, true
		}},
		length, shipType, callsign, beam, fromBow, center, mmsi,
		{root: true, when: func(c *ctx) bool { return truthy("imoNumber")(c) && num(c, "imoNumber") != 0 },
			value: func(c *ctx) (any, bool) {
				return map[string]any{"registrations": map[string]any{"imo": "IMO " + fieldText(c, "imoNumber")}}, true
			}}}
	rules[129798] = []rule{sog, cog,
		{path: "navigation.position", when: all(truthy("longitude"), truthy("latitude")), value: func(c *ctx) (any, bool) {
			p := map[string]any{"longitude": num(c, "longitude"), "latitude": num(c, "latitude")}
			if _, ok := c.d.Lookup("altitude"); ok {
				p["altitude"] = num(c, "altitude")
			}
			return p, true
		}},
		paddedID, class("SAR")}
	rules[129809] = []rule{{path: "sensors.ais.class", when: truthy("userId"), value: func(*ctx) (any, bool) { return "B", true }},
		name, mmsi}
	rules[129810] = []rule{length, shipType, beam, callsign, fromBow, center, mmsi}
	rules[130842] = []rule{name, length, shipType, {path: "design.beam", field: "beam", when: truthy("beam")},
		fromBow, center, mmsi}
}

// rootMember is a member of the context's root taken from a field, when the field is truthy.
func rootMember(member, field string) rule {
	return rule{root: true, when: truthy(field), value: func(c *ctx) (any, bool) {
		return map[string]any{member: c.d.Field(field)}, true
	}}
}

// yesFlag is true for "Yes", false otherwise, absent with the field.
func yesFlag(path, field string) rule {
	return rule{path: path, when: has(field), value: func(c *ctx) (any, bool) { return c.d.Field(field) == "Yes", true }}
}

// only maps a lookup name through table; a name the table lacks gives no value.
func only(field string, table map[string]string) func(*ctx) (any, bool) {
	return func(c *ctx) (any, bool) {
		s, _ := c.d.Field(field).(string)
		v, ok := table[s]
		return v, ok
	}
}

// paddedMMSI is the MMSI with leading zeros to 9 digits (0 stays 0).
func paddedMMSI(c *ctx) string {
	id := fieldText(c, "userId")
	if id != "0" && len(id) < 9 {
		id = strings.Repeat("0", 9-len(id)) + id
	}
	return id
}

// fromCenter is the antenna's offset from the centre line as the reference computes it:
// half the beam less the distance from starboard.
func fromCenter(c *ctx) (any, bool) {
	fs, width := num(c, "positionReferenceFromStarboard"), num(c, "beam")
	if fs > width/2 {
		return -(fs - width/2), true
	}
	return width/2 - fs, true
}

// TypeName is an AIS ship or aid-to-navigation type: its number and the Signal K name.
type TypeName struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// namedType answers the number of a lookup field's name and its Signal K name, or null
// when either is unknown.
func namedType(c *ctx, field, enum string, names func(int64) string) (any, bool) {
	v, ok := c.d.Lookup(field)
	if !ok {
		return nil, true
	}
	var n int64 = -1
	switch x := v.(type) {
	case string:
		if i, found := lookupValue(enum, x); found {
			n = i
		}
	case float64:
		n = int64(x)
	}
	if n < 0 {
		return nil, true
	}
	if name := names(n); name != "" {
		return TypeName{ID: n, Name: name}, true
	}
	return nil, true
}

var (
	reverseMu      sync.Mutex
	reverseLookups = map[string]map[string]int64{}
)

// lookupValue answers the number of name in canboat's enumeration enum (8 bits at most).
func lookupValue(enum, name string) (int64, bool) {
	reverseMu.Lock()
	defer reverseMu.Unlock()
	m, ok := reverseLookups[enum]
	if !ok {
		m = map[string]int64{}
		for i := int64(255); i >= 0; i-- {
			if s, ok := pgn.LookupName(enum, i); ok {
				m[s] = i
			}
		}
		reverseLookups[enum] = m
	}
	v, ok := m[name]
	return v, ok
}

// aisShipTypeName is the Signal K name of an AIS ship type (ITU-R M.1371), "" when it has none.
func aisShipTypeName(n int64) string {
	if n < 20 || n > 99 {
		return ""
	}
	if s, ok := shipTypeNames[n]; ok {
		return s
	}
	group, digit := n/10, n%10
	base := shipTypeGroups[group]
	switch {
	case base == "":
		return ""
	case digit == 9 && group == 2:
		return base + " (no other information)"
	case digit == 9:
		return base + " (no additional information)"
	case digit >= 1 && digit <= 4:
		if digit == 1 {
			return base + " " + shipTypeFirst[group]
		}
		return base + " hazard cat " + string(rune('A'+digit-1))
	}
	return base
}

var (
	shipTypeGroups = map[int64]string{2: "Wing In Ground", 4: "High speed craft", 6: "Passenger ship", 7: "Cargo ship",
		8: "Tanker", 9: "Other"}
	shipTypeFirst = map[int64]string{2: "hazard cat A", 4: "carrying dangerous goods", 6: "hazard cat A",
		7: "carrying dangerous goods", 8: "carrying dangerous goods", 9: "carrying dangerous goods"}
	shipTypeNames = map[int64]string{30: "Fishing", 31: "Towing", 32: "Towing exceeds 200m or wider than 25m",
		33: "Engaged in dredging or underwater operations", 34: "Engaged in diving operations",
		35: "Engaged in military operations", 36: "Sailing", 37: "Pleasure", 50: "Pilot vessel", 51: "SAR", 52: "Tug",
		53: "Port tender", 54: "Anti-pollution", 55: "Law enforcement", 56: "Spare", 57: "Spare #2", 58: "Medical",
		59: "RR Resolution No.18"}
)

// atonTypeName is the Signal K name of an aid-to-navigation type, "" when it has none.
func atonTypeName(n int64) string {
	if n < 0 || n >= int64(len(atonTypeNames)) {
		return ""
	}
	return atonTypeNames[n]
}

var atonTypeNames = [...]string{"", "Reference Point", "", "Fixed Structure Off Shore", "Emergency Wreck Marking Buoy",
	"Light, Without Sectors", "Light, With Sectors", "Leading Light Front", "Leading Light Rear",
	"Beacon, Cardinal N", "Beacon, Cardinal E", "Beacon, Cardinal S", "Beacon, Cardinal W", "Beacon, Port Hand",
	"Beacon, Starboard Hand", "Beacon, Preferred Channel Port Hand", "Beacon, Preferred Channel Starboard Hand",
	"Beacon, Isolated Danger", "Beacon, Safe Water", "Beacon, Special Mark", "Cardinal Mark N", "Cardinal Mark E",
	"Cardinal Mark S", "Cardinal Mark W", "Port Hand Mark", "Starboard Hand Mark", "Preferred Channel Port Hand",
	"Preferred Channel Starboard Hand", "Isolated danger", "Safe Water", "Special Mark", "Light Vessel/LANBY/Rigs"}

// Navigation status and special manoeuvre names in Signal K.
var (
	navStates = map[string]string{"Under way using engine": "motoring", "At anchor": "anchored",
		"Not under command": "not under command", "Restricted manoeuverability": "restricted manouverability",
		"Constrained by her draught": "constrained by draft", "Moored": "moored", "Aground": "aground",
		"Engaged in Fishing": "fishing", "Under way sailing": "sailing",
		"Hazardous material, High Speed":     "hazardous material high speed",
		"Hazardous material, Wing in Ground": "hazardous material wing in ground", "AIS-SART": "ais-sart"}
	maneuvers = map[string]string{"Not available": "not available", "Not engaged in special maneuver": "not engaged",
		"Engaged in special maneuver": "engaged", "Reserverd": "reserved"}
)

var etaTime = regexp.MustCompile(`^(\d+):(\d{2}):(\d{2})(\.\d+)?$`)

// eta is the AIS destination's ETA as an ISO time: the date at midnight plus the time of
// day (parts out of range taken as 0).
func eta(c *ctx) (any, bool) {
	date, ok := c.d.Field("etaDate").(string)
	if !ok {
		return nil, false
	}
	day, err := time.Parse("2006-01-02", strings.ReplaceAll(date, ".", "-"))
	if err != nil {
		return nil, false
	}
	m := etaTime.FindStringSubmatch(fieldText(c, "etaTime"))
	if m == nil {
		return day.UTC().Format("2006-01-02T15:04:05.000Z"), true
	}
	part := func(s string, limit float64) float64 {
		v, _ := strconv.ParseFloat(s, 64)
		if v > limit {
			return 0
		}
		return v
	}
	total := part(m[1], 23)*3600 + part(m[2], 59)*60 + part(m[3], 59)
	if m[4] != "" {
		f, _ := strconv.ParseFloat(m[4], 64)
		total += f
	}
	ms := math.Round(total * 1000)
	return day.Add(time.Duration(ms) * time.Millisecond).UTC().Format("2006-01-02T15:04:05.000Z"), true
}
