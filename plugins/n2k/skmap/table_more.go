package skmap

import (
	"fmt"
	"strconv"
)

// Steering, engine rapid data, transmission, DC and AC power, and set and drift, as
// n2k-signalk 4.6.0 maps them.
func init() {
	rules[127245] = []rule{{path: "steering.rudderAngle", field: "position", when: has("position")}}
	rules[127488] = []rule{
		{pathFn: enginePath("revolutions"), value: scaled("speed", 1/60.0)},
		{pathFn: enginePath("drive.trimState"), when: has("tiltTrim"), value: func(c *ctx) (any, bool) {
			v := num(c, "tiltTrim")
			if v > 0 {
				v /= 100
			}
			return v, true
		}},
		{pathFn: enginePath("boostPressure"), field: "boostPressure"},
	}
	rules[127493] = transmission()
	rules[127751] = []rule{
		{pathFn: dcPrefix(".voltage"), field: "dcVoltage"},
		{pathFn: dcPrefix(".current"), field: "dcCurrent"},
	}
	for i, phase := range []string{"phase.A", "phase.B", "phase.C"} {
		rules[uint32(127744+i)] = acPhase(phase)
	}
	rules[129291] = []rule{{path: "environment.current", value: func(c *ctx) (any, bool) {
		switch c.d.Field("setReference") {
		case "True", "Magnetic":
			return Current{SetTrue: num(c, "set"), Drift: num(c, "drift")}, true
		}
		return nil, false
	}}}
}

// Current is environment.current.
type Current struct {
	SetTrue float64 `json:"setTrue"`
	Drift   float64 `json:"drift"`
}

func dcPrefix(leaf string) func(*ctx) string {
	return func(c *ctx) string {
		return "electrical.dc." + strconv.Itoa(int(c.d.Src)) + "." + fieldText(c, "connectionNumber") + leaf
	}
}

func acPhase(phase string) []rule {
	prefix := func(c *ctx) string {
		return "electrical.ac." + strconv.Itoa(int(c.d.Src)) + "." + fieldText(c, "connectionNumber") + "." + phase
	}
	return []rule{
		{pathFn: func(c *ctx) string { return prefix(c) + ".power" }, field: "power", when: has("power")},
		{pathFn: func(c *ctx) string { return prefix(c) + ".current" }, field: "acRmsCurrent",
			when: func(c *ctx) bool { _, isStr := c.d.Field("acRmsCurrent").(string); return !isStr }},
	}
}

var transmissionStatus = [][3]string{
	{"checkTransmission", "Check %s Engine", "Check Transmission"},
	{"overTemperature", "%s Transmission Over Temperature", "Over Temperature"},
	{"lowOilPressure", "%s Transmission Low Oil Pressure", "Low Oil Pressure"},
	{"lowOilLevel", "%s Transmission Low Oil Level", "Low Oil Level"},
	{"sailDrive", "%s Transmission Sail Drive", "Sail Drive"},
}

func transmission() []rule {
	rs := []rule{
		{pathFn: enginePath("transmission.oilTemperature"), field: "oilTemperature"},
		{pathFn: enginePath("transmission.gear"), field: "transmissionGear"},
		{pathFn: enginePath("transmission.oilPressure"), value: nanNull("oilPressure", 1)},
	}
	for i, n := range transmissionStatus {
		i, n := i, n
		rs = append(rs, rule{
			pathFn: func(c *ctx) string { return "notifications.propulsion." + engineID(c) + ".transmission." + n[0] },
			when:   has("discreteStatus1"),
			value: func(c *ctx) (any, bool) {
				msg := fmt.Sprintf(n[1], engineTitle(c))
				on := false
				if v, isNum := c.d.Field("discreteStatus1").(float64); isNum {
					on = int64(v)&(1<<i) != 0
				} else {
					on = bitSet(c.d.Field("discreteStatus1"), n[2])
				}
				if on {
					return Notification{State: "alarm", Method: []string{"visual", "sound"}, Message: msg}, true
				}
				return Notification{State: "normal", Method: []string{"visual"}, Message: msg + " is Normal"}, true
			},
		})
	}
	return rs
}
