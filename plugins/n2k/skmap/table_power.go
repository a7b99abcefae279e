package skmap

// Autopilot target, AC input and inverter output lines, inverter status and battery
// configuration, as n2k-signalk 4.6.0 maps them.
func init() {
	rules[127237] = []rule{{field: "headingToSteerCourse", when: has("headingToSteerCourse"), pathFn: func(c *ctx) string {
		if c.d.Field("headingReference") == "Magnetic" {
			return "steering.autopilot.target.headingMagnetic"
		}
		return "steering.autopilot.target.headingTrue"
	}}}
	rules[127503] = []rule{{multi: acLines("electrical.ac.", "acceptability")}}
	rules[127504] = []rule{{multi: acLines("electrical.inverters.", "waveform")}}

	inverter := func(c *ctx) string { return "electrical.inverters." + fieldText(c, "instance") }
	rules[127509] = []rule{
		lowerState(inverter, ".operatingState", "operatingState"),
		onState(inverter, ".enabled", "inverterEnable"),
	}

	battery := func(c *ctx) string { return "electrical.batteries." + fieldText(c, "instance") }
	isNum := func(id string) func(*ctx) bool {
		return func(c *ctx) bool { _, ok := c.d.Field(id).(float64); return ok }
	}
	isStr := func(id string) func(*ctx) bool {
		return func(c *ctx) bool { _, ok := c.d.Field(id).(string); return ok }
	}
	plain := func(leaf, id string, when func(*ctx) bool) rule {
		return rule{pathFn: func(c *ctx) string { return battery(c) + leaf }, when: when,
			value: func(c *ctx) (any, bool) { return c.d.Field(id), true }}
	}
	rules[127513] = []rule{
		lowerState(battery, ".batteryType", "batteryType"),
		{pathFn: func(c *ctx) string { return battery(c) + ".supportsEqualization" }, when: isStr("supportsEqualization"),
			value: func(c *ctx) (any, bool) { return c.d.Field("supportsEqualization") == "Yes", true }},
		plain(".nominalVoltage", "nominalVoltage", isStr("nominalVoltage")),
		lowerState(battery, ".chemistry", "chemistry"),
		{pathFn: func(c *ctx) string { return battery(c) + ".capacity.nominal" }, when: isNum("capacity"), value: scaled("capacity", 3600)},
		plain(".temperatureCoefficient", "temperatureCoefficient", isNum("temperatureCoefficient")),
		plain(".peukertExponent", "peukertExponent", isNum("peukertExponent")),
		plain(".chargeEfficiencyFactor", "chargeEfficiencyFactor", isNum("chargeEfficiencyFactor")),
	}
}

// acLines maps the repeating lines of 127503 and 127504: each value present under
// <base><instance>.<phase>.<field>, the phase A, B or C for line 0, 1 or 2 (A otherwise).
func acLines(base, first string) func(*ctx, *[]Value) {
	fields := []string{first, "voltage", "current", "frequency", "breakerSize", "realPower", "reactivePower", "powerFactor"}
	return func(c *ctx, out *[]Value) {
		for _, line := range c.d.List {
			phase := "A"
			if n, ok := line.Field("line").(float64); ok && n >= 0 && n <= 2 {
				phase = string(rune('A' + int(n)))
			}
			prefix := base + fieldText(c, "instance") + "." + phase + "."
			for _, f := range fields {
				if v, ok := line.Lookup(f); ok {
					*out = append(*out, Value{Path: prefix + f, Value: v})
				}
			}
		}
	}
}
