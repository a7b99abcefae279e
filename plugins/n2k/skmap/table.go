package skmap

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// rules is the mapping, PGN by PGN, as n2k-signalk 4.6.0 defines it.
var rules = map[uint32][]rule{
	126992: {{path: "navigation.datetime", value: dateTime, when: all(has("date"), has("time"))}},
	127250: {
		{path: "navigation.headingMagnetic", field: "heading", when: all(eq("reference", "Magnetic"), has("heading"))},
		{path: "navigation.headingTrue", field: "heading", when: all(eq("reference", "True"), has("heading"))},
		{path: "navigation.magneticVariation", field: "variation", when: has("variation")},
		{path: "navigation.magneticDeviation", field: "deviation", when: has("deviation")},
	},
	127251: {{path: "navigation.rateOfTurn", field: "rate"}},
	127257: {{path: "navigation.attitude", value: attitude}},
	127258: {{path: "navigation.magneticVariation", field: "variation"}},
	127489: engineDynamic(),
	127501: {{multi: switchBank}},
	127505: {
		{pathFn: tankPath("currentLevel"), value: scaled("level", 0.01)},
		{pathFn: tankPath("capacity"), value: scaled("capacity", 0.001), when: has("capacity")},
	},
	127506: {
		{path: "electrical.batteries.{instance}.capacity.stateOfCharge", value: scaled("stateOfCharge", 0.01), when: has("stateOfCharge")},
		{path: "electrical.batteries.{instance}.capacity.stateOfHealth", value: scaled("stateOfHealth", 0.01), when: has("stateOfHealth")},
		{path: "electrical.batteries.{instance}.capacity.timeRemaining", allowNull: true,
			value: func(c *ctx) (any, bool) { return timeToSeconds(c.d.Field("timeRemaining")) }},
	},
	127508: {
		{path: "electrical.batteries.{instance}.voltage", field: "voltage"},
		{path: "electrical.batteries.{instance}.current", field: "current"},
		{path: "electrical.batteries.{instance}.temperature", field: "temperature"},
	},
	128259: {
		{path: "navigation.speedThroughWater", field: "speedWaterReferenced", when: has("speedWaterReferenced")},
		{path: "navigation.speedOverGround", field: "speedGroundReferenced", when: truthy("speedGroundReferenced")},
		{path: "navigation.speedThroughWaterReferenceType", field: "speedWaterReferencedType", when: truthy("speedWaterReferencedType")},
	},
	128267: {
		{path: "environment.depth.belowTransducer", field: "depth"},
		{path: "environment.depth.surfaceToTransducer", field: "offset", when: offsetSign(1)},
		{path: "environment.depth.transducerToKeel", field: "offset", when: offsetSign(-1)},
		{path: "environment.depth.belowSurface", value: depthPlusOffset, when: all(has("depth"), offsetSign(1))},
		{path: "environment.depth.belowKeel", value: depthPlusOffset, when: all(has("depth"), offsetSign(-1))},
	},
	128275: {
		{path: "navigation.trip.log", field: "tripLog"},
		{path: "navigation.log", field: "log"},
	},
	129025: {{path: "navigation.position", value: position, when: all(has("longitude"), has("latitude"))}},
	129026: {
		{path: "navigation.speedOverGround", field: "sog"},
		{path: "navigation.courseOverGroundTrue", field: "cog", when: eq("cogReference", "True")},
		{path: "navigation.courseOverGroundMagnetic", field: "cog", when: eq("cogReference", "Magnetic")},
	},
	129029: {
		{path: "navigation.position", value: position, when: all(has("longitude"), has("latitude"))},
		{path: "navigation.datetime", value: dateTime, when: all(has("date"), has("time"))},
		{path: "navigation.gnss.antennaAltitude", field: "altitude"},
		{path: "navigation.gnss.satellites", field: "numberOfSvs"},
		{path: "navigation.gnss.horizontalDilution", field: "hdop"},
		{path: "navigation.gnss.positionDilution", field: "pdop"},
		{path: "navigation.gnss.geoidalSeparation", field: "geoidalSeparation"},
		{path: "navigation.gnss.differentialAge", field: "ageOfDgnssCorrections"},
		{path: "navigation.gnss.differentialReference", field: "referenceStationId"},
		{path: "navigation.gnss.type", value: mapped("gnssType", map[string]string{
			"GPS+GLONASS": "Combined GPS/GLONASS", "integrated": "Integrated navigation system", "surveyed": "Surveyed"})},
		{path: "navigation.gnss.methodQuality", value: mapped("method", map[string]string{
			"no GNSS": "no GPS", "GNSS fix": "GNSS Fix", "RTK Fixed Integer": "RTK fixed integer", "Simulate mode": "Simulator mode"})},
		{path: "navigation.gnss.integrity", value: mapped("integrity", map[string]string{
			"No integrity checking": "no Integrity checking"})},
	},
	129540: {{path: "navigation.gnss.satellitesInView", value: satellites}},
	130306: {
		{path: "environment.wind.speedApparent", field: "windSpeed", when: apparentWind},
		{path: "environment.wind.speedTrue", field: "windSpeed", when: eq("reference", "True (boat referenced)")},
		{path: "environment.wind.speedOverGround", field: "windSpeed", when: eq("reference", "True (ground referenced to North)")},
		{path: "environment.wind.angleApparent", when: apparentWind, value: func(c *ctx) (any, bool) {
			a := num(c, "windAngle")
			if a <= math.Pi {
				return a, true
			}
			return a - 2*math.Pi, true
		}},
		{path: "environment.wind.angleTrueWater", field: "windAngle", when: eq("reference", "True (boat referenced)")},
		{path: "environment.wind.directionTrue", field: "windAngle", when: eq("reference", "True (ground referenced to North)")},
		{path: "environment.wind.directionMagnetic", field: "windAngle", when: eq("reference", "Magnetic (ground referenced to Magnetic North)")},
	},
	130310: {
		{path: "environment.outside.temperature", field: "outsideAmbientAirTemperature", when: truthy("outsideAmbientAirTemperature")},
		{path: "environment.outside.pressure", value: scaled("atmosphericPressure", 1), when: truthy("atmosphericPressure")},
		{path: "environment.water.temperature", value: scaled("waterTemperature", 1), when: truthy("waterTemperature")},
	},
	130311: {
		{pathFn: func(c *ctx) string {
			s, _ := c.d.Field("temperatureSource").(string)
			return temperaturePath(s, "default")
		}, field: "temperature", when: has("temperatureSource")},
		{pathFn: func(c *ctx) string {
			s, _ := c.d.Field("humiditySource").(string)
			if p := humidityPath(s, "default"); p != "" {
				return p
			}
			if s == "Inside" {
				return "environment.inside.relativeHumidity"
			}
			return "environment.outside.humidity"
		}, value: scaled("humidity", 0.01), when: has("humidity")},
		{path: "environment.outside.pressure", value: scaled("atmosphericPressure", 1), when: truthy("atmosphericPressure")},
	},
	130312: {{pathFn: temperatureInstancePath, field: "actualTemperature", instance: true}},
	130313: {{pathFn: func(c *ctx) string {
		s := jsString(c.d.Field("source"))
		inst := fieldText(c, "instance")
		if p := humidityPath(s, inst); p != "" {
			return p
		}
		return "environment.userDefined" + s + "." + inst + ".relativeHumidity"
	}, value: scaled("actualHumidity", 0.01), when: has("actualHumidity"), instance: true}},
	130314: {{pathFn: func(c *ctx) string {
		s, _ := c.d.Field("source").(string)
		return pressurePath(s, fieldText(c, "instance"))
	}, field: "pressure", instance: true}},
	130316: {{pathFn: temperatureInstancePath, field: "temperature", instance: true}},
}

func init() {
	// Maretron's AC and generator PGNs (J1939 numbers 65005..65030), per device instance.
	for i, kind := range []string{"ac", "generators"} {
		base := uint32(65005 + 13*i)
		rules[base] = totalEnergy(kind)
		for j, phase := range []string{"phase.C", "phase.B", "phase.A"} {
			p := base + 1 + uint32(3*j)
			rules[p] = reactivePower(kind, phase)
			rules[p+1] = acPowerRules(kind, phase)
			rules[p+2] = quantities(kind, phase)
		}
		rules[base+10] = reactivePower(kind, "total")
		rules[base+11] = acPowerRules(kind, "total")
		rules[base+12] = quantities(kind, "average")
	}
}

// fieldText is a field as JavaScript concatenates it ("undefined" when absent).
func fieldText(c *ctx, id string) string {
	if v, ok := c.d.Lookup(id); ok {
		return jsString(v)
	}
	return "undefined"
}

func apparentWind(c *ctx) bool {
	v, ok := c.d.Lookup("reference")
	return !ok || v == "Apparent"
}

func offsetSign(sign float64) func(*ctx) bool {
	return func(c *ctx) bool {
		v, ok := c.d.Field("offset").(float64)
		return ok && v*sign > 0
	}
}

func depthPlusOffset(c *ctx) (any, bool) { return num(c, "depth") + num(c, "offset"), true }

var tankTypes = map[string]string{"Fuel": "fuel", "Water": "freshWater", "Gray water": "wasteWater",
	"Live well": "liveWell", "Oil": "lubrication", "Black water": "blackWater"}

func tankPath(leaf string) func(*ctx) string {
	return func(c *ctx) string {
		t, _ := c.d.Field("type").(string)
		kind, ok := tankTypes[t]
		if !ok {
			kind = "undefined"
		}
		return "tanks." + kind + "." + fieldText(c, "instance") + "." + leaf
	}
}

// Temperature, humidity and pressure sources to paths (<index> is the instance).
var (
	temperaturePaths = map[string]string{
		"Sea Temperature": "environment.water.temperature", "Outside Temperature": "environment.outside.temperature",
		"Inside Temperature": "environment.inside.<index>.temperature", "Engine Room Temperature": "environment.inside.engineRoom.temperature",
		"Main Cabin Temperature": "environment.inside.mainCabin.temperature", "Live Well Temperature": "tanks.liveWell.<index>.temperature",
		"Bait Well Temperature": "tanks.baitWell.<index>.temperature", "Refrigeration Temperature": "environment.inside.refrigerator.temperature",
		"Refridgeration Temperature": "environment.inside.refrigerator.temperature", "Heating System Temperature": "environment.inside.heating.temperature",
		"Dew Point Temperature": "environment.outside.dewPointTemperature", "Apparent Wind Chill Temperature": "environment.outside.apparentWindChillTemperature",
		"Theoretical Wind Chill Temperature": "environment.outside.theoreticalWindChillTemperature",
		"Heat Index Temperature":             "environment.outside.heatIndexTemperature", "Freezer Temperature": "environment.inside.freezer.temperature",
		"Exhaust Gas Temperature": "propulsion.<index>.exhaustTemperature",
	}
	humidityPaths = map[string]string{"Inside": "environment.inside.<index>.relativeHumidity", "Outside": "environment.outside.humidity"}
	pressurePaths = map[string]string{"Atmospheric": "", "Water": "water", "Steam": "steam", "Compressed Air": "compressedAir",
		"Hydraulic": "hydraulic", "Filter": "filter", "AltimeterSetting": "altimetersetting", "Oil": "oil", "Fuel": "fuel"}
)

func temperaturePath(source, index string) string {
	return strings.Replace(temperaturePaths[source], "<index>", index, 1)
}

func humidityPath(source, index string) string {
	return strings.Replace(humidityPaths[source], "<index>", index, 1)
}

func pressurePath(source, index string) string {
	p, ok := pressurePaths[source]
	switch {
	case !ok:
		return ""
	case p == "":
		return "environment.outside.pressure"
	}
	return p + "." + index + ".pressure"
}

func temperatureInstancePath(c *ctx) string {
	src, ok := c.d.Lookup("source")
	if !ok {
		return ""
	}
	inst := "0"
	if _, ok := c.d.Lookup("instance"); ok {
		inst = fieldText(c, "instance")
	}
	if s, isStr := src.(string); isStr {
		if p, ok := temperaturePaths[s]; ok {
			return strings.Replace(p, "<index>", inst, 1)
		}
	}
	return "generic.temperatures.userDefined" + strings.ReplaceAll(jsString(src), " ", "_") + "." + inst + ".temperature"
}

// engineID is n2k-signalk's engine id: the instance number, or port/starboard.
func engineID(c *ctx) string {
	switch v := c.d.Field("instance").(type) {
	case float64:
		return jsString(v)
	case string:
		if v == "Single Engine or Dual Engine Port" {
			return "port"
		}
	}
	return "starboard"
}

func engineTitle(c *ctx) string {
	id := engineID(c)
	if id == "port" || id == "starboard" {
		return strings.ToUpper(id[:1]) + id[1:]
	}
	return id
}

func enginePath(leaf string) func(*ctx) string {
	k := newEngineSlot()
	return func(c *ctx) string {
		e := c.engine()
		if e.strs[k] == "" {
			e.strs[k] = "propulsion." + e.id + "." + leaf
		}
		return e.strs[k]
	}
}

// engineMemo is what the engine rules made for one engine (engineID) of one source: the
// paths by the rule's slot and the status bits' notifications (normal, alarm) by theirs.
// An engine message maps to dozens of values, and building each path and finding each
// notification in the source's memo map (hashing two strings) cost a few percent of the
// plugin's time inside the sandbox.
type engineMemo struct {
	id    string
	strs  []string
	notes [][2]any
}

// engineSlots counts the slots the engine rules took (while the tables are made).
var engineSlots int

func newEngineSlot() int {
	engineSlots++
	return engineSlots - 1
}

// maxEngines bounds the engine memos of one source: a boat has one to four engines, a source
// reporting more (bad data, or ids that change) replaces its memos in turn.
const maxEngines = 8

// engine answers the memo of the message's engine for its source.
func (c *ctx) engine() *engineMemo {
	if c.eng != nil {
		return c.eng
	}
	id := engineID(c)
	st := c.st
	for _, e := range st.engines {
		if e.id == id {
			c.eng = e
			return e
		}
	}
	e := &engineMemo{id: id, strs: make([]string, engineSlots), notes: make([][2]any, engineSlots)}
	if len(st.engines) < maxEngines {
		st.engines = append(st.engines, e)
	} else {
		st.engines[st.engineNext] = e
		st.engineNext = (st.engineNext + 1) % maxEngines
	}
	c.eng = e
	return e
}

// engine status bits: the notification path, its message and the bit's name in canboat.
var (
	engineStatus1 = [][3]string{
		{"checkEngine", "Check %s Engine", "Check Engine"}, {"overTemperature", "%s Engine Over Temperature", "Over Temperature"},
		{"lowOilPressure", "%s Engine Low Oil Pressure", "Low Oil Pressure"}, {"lowOilLevel", "%s Engine Low Oil Level", "Low Oil Level"},
		{"lowFuelPressure", "%s Engine Low Fuel Pressure", "Low Fuel Pressure"}, {"lowSystemVoltage", "%s Low System Voltage", "Low System Voltage"},
		{"lowCoolantLevel", "%s Engine Low Coolant Level", "Low Coolant Level"}, {"waterFlow", "%s Engine Water Flow", "Water Flow"},
		{"waterInFuel", "%s Water in Fuel", "Water In Fuel"}, {"chargeIndicator", "%s Engine Charge Indicator", "Charge Indicator"},
		{"preheatIndicator", "%s Preheat Indicator", "Preheat Indicator"}, {"highBoostPressure", "%s Engine High Boost Pressure", "High Boost Pressure"},
		{"revLimitExceeded", "%s Engine Rev Limit Exceeded", "Rev Limit Exceeded"}, {"eGRSystem", "%s Engine EGR System", "EGR System"},
		{"throttlePositionSensor", "%s Engine Throttle Position Sensor", "Throttle Position Sensor"},
		{"emergencyStopMode", "%s Engine Emergency Stop Mode", "Emergency Stop"},
	}
	engineStatus2 = [][3]string{
		{"warningLevel1", "%s Engine Warning Level 1", "Warning Level 1"}, {"warningLevel2", "%s Engine Warning Level 2", "Warning Level 2"},
		{"powerReduction", "%s Engine Power Reduction", "Power Reduction"}, {"maintenanceNeeded", "%s Engine Maintenance Needed", "Maintenance Needed"},
		{"commError", "%s Engine Comm Error", "Engine Comm Error"}, {"subOrSecondaryThrottle", "%s Engine Sub or Secondary Throttle", "Sub or Secondary Throttle"},
		{"neutralStartProtect", "%s Neutral Start Protect", "Neutral Start Protect"}, {"shuttingDown", "%s Engine Shutting Down", "Engine Shutting Down"},
	}
)

func engineDynamic() []rule {
	rs := []rule{
		{pathFn: enginePath("temperature"), field: "temperature"},
		{pathFn: enginePath("alternatorVoltage"), field: "alternatorPotential"},
		{pathFn: enginePath("fuel.rate"), value: nanNull("fuelRate", 1/3600000.0)},
		{pathFn: enginePath("oilPressure"), value: nanNull("oilPressure", 1)},
		{pathFn: enginePath("runTime"), value: func(c *ctx) (any, bool) { return timeToSeconds(c.d.Field("totalEngineHours")) }},
		{pathFn: enginePath("oilTemperature"), field: "oilTemperature"},
		{pathFn: enginePath("coolantPressure"), value: nanNull("coolantPressure", 1000)},
		{pathFn: enginePath("engineLoad"), value: nanNull("engineLoad", 0.01)},
		{pathFn: enginePath("engineTorque"), value: nanNull("engineTorque", 0.01)},
		{pathFn: enginePath("fuel.pressure"), value: nanNull("fuelPressure", 1000)},
	}
	for _, set := range []struct {
		field string
		bits  [][3]string
	}{{"discreteStatus1", engineStatus1}, {"discreteStatus2", engineStatus2}} {
		for _, n := range set.bits {
			n, field, k := n, set.field, newEngineSlot()
			rs = append(rs, rule{
				pathFn: func(c *ctx) string {
					e := c.engine()
					if e.strs[k] == "" {
						e.strs[k] = "notifications.propulsion." + e.id + "." + n[0]
					}
					return e.strs[k]
				},
				when: has(field),
				value: func(c *ctx) (any, bool) {
					alarm := 0
					if bitSet(c.d.Field(field), n[2]) {
						alarm = 1
					}
					e := c.engine()
					if note := e.notes[k][alarm]; note != nil {
						return note, true
					}
					msg := fmt.Sprintf(n[1], engineTitle(c))
					var note any = Notification{State: "normal", Method: []string{}, Message: msg + " is Normal"}
					if alarm == 1 {
						note = Notification{State: "alarm", Method: []string{"visual", "sound"}, Message: msg}
					}
					e.notes[k][alarm] = note
					return note, true
				},
			})
		}
	}
	return rs
}

// bitSet reports whether a bit-lookup field names bit (as a substring, as the reference
// looks for it in the list).
func bitSet(v any, name string) bool {
	switch x := v.(type) {
	case []string:
		for _, s := range x {
			if s == name {
				return true
			}
		}
	case string:
		return strings.Contains(x, name)
	}
	return false
}

// switchBank maps 127501: every indicator present gives its state (1 on, 0 otherwise) and
// its order in the bank.
func switchBank(c *ctx, out *[]Value) {
	inst := fieldText(c, "instance")
	for i := 1; i <= 28; i++ {
		v, ok := c.d.Lookup(indicators[i])
		if !ok {
			continue
		}
		state := 0
		if v == "On" {
			state = 1
		}
		paths := c.remember(memoKey{kind: 's', a: inst, n: i}, func() any {
			base := "electrical.switches.bank." + inst + "." + strconv.Itoa(i)
			return [2]string{base + ".state", base + ".order"}
		}).([2]string)
		*out = append(*out, Value{Path: paths[0], Value: numbers[state]}, Value{Path: paths[1], Value: numbers[i]})
	}
}

// indicators are 127501's field ids by switch; numbers the boxed 0..28 (no allocation).
var (
	indicators [29]string
	numbers    [29]any
)

func init() {
	for i := range indicators {
		indicators[i] = "indicator" + strconv.Itoa(i)
		numbers[i] = float64(i)
	}
}

func satellites(c *ctx) (any, bool) {
	sats := []Satellite{}
	for _, s := range c.d.List {
		if s.Len() >= 4 {
			sats = append(sats, Satellite{ID: s.Field("prn"), Elevation: s.Field("elevation"), Azimuth: s.Field("azimuth"), SNR: s.Field("snr")})
		}
	}
	return SatellitesInView{Count: len(sats), Satellites: sats}, true
}

// Maretron AC and generator PGNs: the paths need the device instance of the address claim.
func acPrefix(kind, phase string, c *ctx) string {
	inst := 0
	if c.st.deviceInstance != nil {
		inst = *c.st.deviceInstance
	}
	return "electrical." + kind + "." + strconv.Itoa(inst) + "." + phase
}

func claimed(c *ctx) bool { return c.st.deviceInstance != nil }

func present(id string) func(*ctx) bool {
	return func(c *ctx) bool { _, ok := c.d.Lookup(id); return ok && claimed(c) }
}

func totalEnergy(kind string) []rule {
	return []rule{
		{pathFn: func(c *ctx) string { return acPrefix(kind, "total", c) + ".energyExport" }, field: "totalEnergyExport", when: present("totalEnergyExport")},
		{pathFn: func(c *ctx) string { return acPrefix(kind, "total", c) + ".energyImport" }, field: "totalEnergyImport", when: present("totalEnergyImport")},
	}
}

func reactivePower(kind, phase string) []rule {
	return []rule{
		{pathFn: func(c *ctx) string { return acPrefix(kind, phase, c) + ".reactivePower" }, field: "reactivePower", when: claimed},
		{pathFn: func(c *ctx) string { return acPrefix(kind, phase, c) + ".powerFactor" }, when: present("powerFactor"),
			value: func(c *ctx) (any, bool) {
				pf := num(c, "powerFactor")
				if c.st.powerFactor == nil {
					c.st.powerFactor = map[string]float64{}
				}
				c.st.powerFactor[acPrefix(kind, phase, c)] = pf
				// The reference divides the already scaled factor by 32768 once more.
				return pf / 32768, true
			}},
		{pathFn: func(c *ctx) string { return acPrefix(kind, phase, c) + ".powerFactorLagging" }, when: present("powerFactorLagging"),
			value: func(c *ctx) (any, bool) {
				s, _ := c.d.Field("powerFactorLagging").(string)
				return strings.ToLower(s), true
			}},
	}
}

func acPowerRules(kind, phase string) []rule {
	return []rule{
		{pathFn: func(c *ctx) string { return acPrefix(kind, phase, c) + ".realPower" }, field: "realPower", when: claimed},
		{pathFn: func(c *ctx) string { return acPrefix(kind, phase, c) + ".apparentPower" },
			when: func(c *ctx) bool {
				_, ok := c.st.powerFactor[acPrefix(kind, phase, c)]
				return present("apparentPower")(c) && ok
			},
			value: func(c *ctx) (any, bool) {
				return num(c, "apparentPower") * c.st.powerFactor[acPrefix(kind, phase, c)], true
			}},
	}
}

func quantities(kind, phase string) []rule {
	return []rule{
		{pathFn: func(c *ctx) string { return acPrefix(kind, phase, c) + ".lineLineVoltage" }, field: "lineLineAcRmsVoltage", when: claimed},
		{pathFn: func(c *ctx) string { return acPrefix(kind, phase, c) + ".lineNeutralVoltage" }, field: "lineNeutralAcRmsVoltage", when: claimed},
		{pathFn: func(c *ctx) string { return acPrefix(kind, phase, c) + ".frequency" }, field: "acFrequency", when: claimed},
		{pathFn: func(c *ctx) string { return acPrefix(kind, phase, c) + ".current" }, field: "acRmsCurrent", when: claimed},
	}
}
