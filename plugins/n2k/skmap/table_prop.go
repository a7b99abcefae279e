package skmap

import (
	"encoding/json"
	"math"
	"strings"
	"unicode"
)

// Manufacturers' proprietary PGNs (Raymarine Seatalk, Simrad Simnet, Lowrance), as
// n2k-signalk 4.6.0 maps them. A PGN number with several definitions is told apart by the
// definition the decoder matched (its canboat id).
func init() {
	rules[65285] = []rule{{field: "actualTemperature", when: truthy("actualTemperature"), instance: true,
		instanceFn: func(c *ctx) string { return fieldText(c, "temperatureInstance") },
		pathFn: func(c *ctx) string {
			s, _ := c.d.Field("temperatureSource").(string)
			inst := "default"
			if _, ok := c.d.Lookup("temperatureInstance"); ok {
				inst = fieldText(c, "temperatureInstance")
			}
			return temperaturePath(s, inst)
		}}}
	rules[65288] = []rule{{when: all(isID("seatalkAlarm"), has("alarmGroup"), has("alarmStatus")),
		pathFn: seatalkAlarmPath, value: seatalkAlarm}}
	rules[65345] = []rule{{path: "steering.autopilot.target.windAngleApparent", value: func(c *ctx) (any, bool) {
		a := num(c, "windDatum")
		if a > math.Pi {
			a -= 2 * math.Pi
		}
		return a, true
	}}}
	pilotHeading := func(c *ctx) bool { return c.d.Description == "Seatalk: Pilot Heading" }
	rules[65359] = []rule{
		{path: "navigation.headingTrue", field: "headingTrue", when: all(pilotHeading, has("headingTrue"))},
		{path: "navigation.headingMagnetic", field: "headingMagnetic", when: all(pilotHeading, has("headingMagnetic"))},
	}
	rules[65360] = []rule{
		{path: "steering.autopilot.target.headingTrue", field: "targetHeadingTrue", when: truthy("targetHeadingTrue")},
		{path: "steering.autopilot.target.headingMagnetic", field: "targetHeadingMagnetic", when: truthy("targetHeadingMagnetic")},
	}
	rules[65379] = []rule{{path: "steering.autopilot.state", value: seatalkPilotState}}
	rules[126720] = []rule{
		{when: all(isID("seatalk1DisplayBrightness"), has("group")), allowNull: true,
			pathFn: func(c *ctx) string {
				return "electrical.displays.raymarine." + camelCase(fieldText(c, "group")) + ".brightness"
			},
			value: func(c *ctx) (any, bool) {
				if _, ok := c.d.Lookup("brightness"); !ok {
					return nil, true
				}
				return num(c, "brightness") / 100, true
			}},
		{when: all(isID("seatalk1DisplayColor"), has("group"), has("color")), allowNull: true,
			pathFn: func(c *ctx) string {
				return "electrical.displays.raymarine." + camelCase(fieldText(c, "group")) + ".color"
			},
			value: func(c *ctx) (any, bool) { return camelCase(fieldText(c, "color")), true }},
		{path: "steering.autopilot.state", when: isID("seatalk1PilotMode"), value: seatalk1PilotState},
	}
	rules[65305] = []rule{{path: "steering.autopilot.state", when: isID("simnetPilotMode"), value: simnetPilotState}}
	apMode := func(modes ...string) func(*ctx) bool {
		return func(c *ctx) bool {
			for _, m := range modes {
				if c.d.Field("mode") == m {
					return true
				}
			}
			return false
		}
	}
	rules[65341] = []rule{
		{path: "steering.autopilot.target.headingMagnetic", when: all(isID("simnetAutopilotAngle"), apMode("Heading", "Nav", "No Drift")),
			value: func(c *ctx) (any, bool) { v, ok := c.d.Lookup("angle"); return v, ok }},
		{path: "steering.autopilot.target.windAngleApparent", when: all(isID("simnetAutopilotAngle"), apMode("Wind")),
			value: func(c *ctx) (any, bool) { v, ok := c.d.Lookup("angle"); return v, ok }},
	}
	display := func(leaf string) func(*ctx) string {
		return func(c *ctx) string {
			return "electrical.displays.navico." + camelCase(fieldText(c, "displayGroup")) + leaf
		}
	}
	simrad := func(key string) func(*ctx) bool {
		return all(eq("manufacturerCode", "Simrad"), has("displayGroup"), eq("key", key))
	}
	rules[130845] = []rule{
		{when: simrad("Backlight level"), allowNull: true, pathFn: display(".brightness"), value: scaled("value", 0.01)},
		{when: simrad("Night mode"), allowNull: true, pathFn: display(".nightMode.state"), value: func(c *ctx) (any, bool) {
			if num(c, "value") == 4 {
				return 1.0, true
			}
			return 0.0, true
		}},
		{when: simrad("Night mode color"), allowNull: true, pathFn: display(".nightModeColor"), value: func(c *ctx) (any, bool) {
			if v, ok := c.d.Field("value").(float64); ok && v >= 0 && v < 5 && v == math.Trunc(v) {
				return [...]string{"red", "green", "blue", "white", "magenta"}[int(v)], true
			}
			return "unknown", true
		}},
	}
	rules[130850] = []rule{{when: isID("simnetAlarm"),
		pathFn: func(c *ctx) string {
			if s, ok := c.d.Field("alarm").(string); ok {
				return "notifications." + camelCase(s)
			}
			return "notifications." + camelCase("unknown"+fieldText(c, "alarm"))
		},
		value: func(c *ctx) (any, bool) {
			msg, ok := c.d.Field("alarm").(string)
			if !ok {
				msg = "Unknown Simnet Alarm " + fieldText(c, "alarm")
			}
			return TimedNotification{Message: msg, Method: []string{"visual"}, State: "warning", at: c.stamp}, true
		}}}
}

// isID matches the definition the decoder chose among a PGN's proprietary variants.
func isID(id string) func(*ctx) bool { return func(c *ctx) bool { return c.d.ID == id } }

// TimedNotification is a notification that carries the message's time, as the
// manufacturers' alarms do: the update's time, read when the value is written (see TimeToGo).
type TimedNotification struct {
	Message string
	Method  []string
	State   string
	at      *string
}

// MarshalJSON writes the notification with its time (rare messages: by reflection).
func (n TimedNotification) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Message   string   `json:"message"`
		Method    []string `json:"method"`
		State     string   `json:"state"`
		Timestamp string   `json:"timestamp"`
	}{n.Message, n.Method, n.State, *n.at})
}

func seatalkAlarmPath(c *ctx) string {
	name := "unknown" + fieldText(c, "alarmId")
	if s, ok := c.d.Field("alarmId").(string); ok {
		name = strings.ReplaceAll(s, " ", "")
	}
	group := strings.ReplaceAll(strings.ToLower(fieldText(c, "alarmGroup")), " ", "")
	return "notifications." + group + "." + name
}

// seatalkAlarm: silenced alarms are visual only; waypoint arrival and route alarms are alerts.
func seatalkAlarm(c *ctx) (any, bool) {
	status := c.d.Field("alarmStatus")
	n := TimedNotification{Method: []string{"visual"}, State: "alarm", at: c.stamp}
	if status == "Alarm condition met and not silenced" {
		n.Method = append(n.Method, "sound")
	}
	if status == "Alarm condition not met" {
		n.State = "normal"
	}
	id, ok := c.d.Field("alarmId").(string)
	if !ok {
		n.Message = "Unknown Seatalk Alarm " + fieldText(c, "alarmId")
		return n, true
	}
	n.Message = id
	if n.State == "alarm" && (id == "WP Arrival" || id == "Pilot Way Point Advance" || id == "Pilot Route Complete") {
		n.State = "alert"
	}
	return n, true
}

// seatalkPilotState is 65379's mode: by name, or by the mode and sub-mode numbers.
func seatalkPilotState(c *ctx) (any, bool) {
	if s, ok := c.d.Field("pilotMode").(string); ok {
		st, found := map[string]string{"Standby": "standby", "Auto, compass commanded": "auto", "Vane, Wind Mode": "wind",
			"Track Mode": "route", "No Drift, COG referenced (In track, course changes)": "route"}[s]
		return st, found
	}
	mode, sub := num(c, "pilotMode"), num(c, "subMode")
	switch {
	case mode == 0 && sub == 0:
		return "standby", true
	case mode == 0 && sub == 1:
		return "wind", true
	case (mode == 128 || mode == 129) && sub == 1:
		return "route", true
	case mode == 64 && sub == 0:
		return "auto", true
	}
	return "standby", true
}

// seatalk1PilotState is 126720's pilot mode (SmartPilot behind a Seatalk converter).
func seatalk1PilotState(c *ctx) (any, bool) {
	mode := c.d.Field("pilotMode")
	sub := num(c, "subMode")
	modeIs := func(name string, n float64) bool {
		if s, ok := mode.(string); ok {
			return s == name
		}
		f, ok := mode.(float64)
		return ok && f == n
	}
	switch {
	case (modeIs("", 0) || modeIs("Standby", -1) || modeIs("", 68) || modeIs("", 72)) && sub == 0:
		return "standby", true
	case modeIs("Wind", -1) && (sub == 0 || sub == 4 || sub == 8 || sub == 12):
		return "wind", true
	case modeIs("Track", -1) && sub == 0:
		return "route", true
	case modeIs("Auto", -1) && (sub == 0 || sub == 4):
		return "auto", true
	}
	return nil, false
}

// simnetPilotState is the last of standby, auto, heading, wind and route whose mode bit
// is set; with no mode field every one matches (the reference's optional chaining), so route.
func simnetPilotState(c *ctx) (any, bool) {
	v, ok := c.d.Lookup("mode")
	if !ok {
		return "route", true
	}
	var set []string
	single := false
	switch x := v.(type) {
	case []string:
		set = x
	case string:
		set, single = []string{x}, true
	default:
		return nil, false
	}
	res := ""
	for _, m := range [][2]string{{"standby", "Standby"}, {"auto", "No Drift"}, {"heading", "Heading"}, {"wind", "Wind"}, {"route", "Nav"}} {
		for _, s := range set {
			// a list is searched for the name, a single name for the substring
			if s == m[1] || single && strings.Contains(s, m[1]) {
				res = m[0]
			}
		}
	}
	if res == "" {
		return nil, false
	}
	return res, true
}

// camelCase turns a name into a path element as the npm camelcase package (6.x) does: words
// split at separators (space, _, -, .) and at lower-to-upper case changes, the first word
// lower case and the others capitalised, a letter after digits capitalised.
func camelCase(s string) string {
	s = strings.TrimSpace(s)
	r := []rune(s)
	switch len(r) {
	case 0:
		return ""
	case 1:
		return strings.ToLower(s)
	}
	if s != strings.ToLower(s) {
		r = splitCase(r)
	}
	// leading separators go; the rest is lower case
	for len(r) > 0 && isSep(r[0]) {
		r = r[1:]
	}
	low := []rune(strings.ToLower(string(r)))
	// separators before a letter, digit or _ (or the end) go, that character capitalised
	var first []rune
	for i := 0; i < len(low); i++ {
		if !isSep(low[i]) {
			first = append(first, low[i])
			continue
		}
		j := i
		for j < len(low) && isSep(low[j]) {
			j++
		}
		switch {
		case j == len(low):
		case isIdent(low[j]):
			first = append(first, unicode.ToUpper(low[j]))
		default:
			first = append(first, low[i:j+1]...)
		}
		i = j
	}
	// a letter after digits is capitalised
	out := make([]rune, 0, len(first))
	for i := 0; i < len(first); i++ {
		out = append(out, first[i])
		if unicode.IsDigit(first[i]) && (i == 0 || !unicode.IsDigit(first[i-1])) {
			j := i + 1
			for j < len(first) && unicode.IsDigit(first[j]) {
				out = append(out, first[j])
				j++
			}
			if j < len(first) && isIdent(first[j]) {
				out = append(out, unicode.ToUpper(first[j]))
				j++
			}
			i = j - 1
		}
	}
	return string(out)
}

func isSep(r rune) bool   { return r == '_' || r == '.' || r == '-' || r == ' ' }
func isIdent(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

// splitCase puts a '-' where a lower-case letter meets an upper-case one, and before the
// last of a run of capitals followed by a lower-case letter.
func splitCase(r []rune) []rune {
	lastLower, lastUpper, lastLastUpper := false, false, false
	for i := 0; i < len(r); i++ {
		ch := r[i]
		switch {
		case lastLower && unicode.IsUpper(ch):
			r = append(r[:i], append([]rune{'-'}, r[i:]...)...)
			lastLower, lastLastUpper, lastUpper = false, lastUpper, true
			i++
		case lastUpper && lastLastUpper && unicode.IsLower(ch):
			r = append(r[:i-1], append([]rune{'-'}, r[i-1:]...)...)
			lastLastUpper, lastUpper, lastLower = lastUpper, false, true
		default:
			lastLower = unicode.ToLower(ch) == ch && unicode.ToUpper(ch) != ch
			lastLastUpper = lastUpper
			lastUpper = unicode.ToUpper(ch) == ch && unicode.ToLower(ch) != ch
		}
	}
	return r
}
