package skmap

import (
	"strings"
)

// Charger and inverter configuration, the active route and NMEA 2000 alerts, as
// n2k-signalk 4.6.0 maps them.
func init() {
	charger := func(c *ctx) string { return "electrical.chargers." + fieldText(c, "instance") }
	rules[127510] = fieldRules(charger, "on .enabled chargerEnableDisable; num .chargeCurrentLimit chargeCurrentLimit; "+
		"lower .chargingAlgorithm chargingAlgorithm; lower .chargeMode chargerMode; lower .estimatedTemperature estimatedTemperature; "+
		"on .equalizeOneTimeEnabled equalizeOneTimeEnableDisable; on .overChargeEnabled overChargeEnableDisable; num .equalizeTime equalizeTime")
	inverter := func(c *ctx) string { return "electrical.inverters." + fieldText(c, "instance") }
	rules[127511] = fieldRules(inverter, "on .enabled inverterEnableDisable; lower .inverterMode inverterMode; "+
		"on .loadSenseEnabled loadSenseEnableDisable; num .loadSensePowerThreshold loadSensePowerThreshold; num .loadSenseInterval loadSenseInterval")

	// 129285 names its paths after the calculation type of the last 129284 (as 129283 does).
	route := func(leaf string) func(*ctx) string {
		return func(c *ctx) string { return "navigation.course" + c.st.courseType + leaf }
	}
	routed := func(c *ctx) bool { return c.st.courseType != "" }
	waypoints := func(n int) func(*ctx) bool {
		return func(c *ctx) bool { return routed(c) && len(c.d.List) >= n }
	}
	following := func(c *ctx) bool {
		if !waypoints(3)(c) {
			return false
		}
		_, lat := c.d.List[2].Lookup("wpLatitude")
		_, lon := c.d.List[2].Lookup("wpLongitude")
		return lat && lon
	}
	wpName := func(i int) func(*ctx) (any, bool) {
		return func(c *ctx) (any, bool) { v, ok := c.d.List[i].Lookup("wpName"); return v, ok }
	}
	wpPosition := func(i int) func(*ctx) (any, bool) {
		return func(c *ctx) (any, bool) {
			p := map[string]any{}
			for _, k := range [][2]string{{"latitude", "wpLatitude"}, {"longitude", "wpLongitude"}} {
				if v, ok := c.d.List[i].Lookup(k[1]); ok {
					p[k[0]] = v
				}
			}
			return p, true
		}
	}
	rules[129285] = []rule{
		{pathFn: route(".activeRoute.name"), field: "routeName", when: routed},
		{pathFn: route(".previousPoint.name"), value: wpName(0), when: waypoints(1)},
		{pathFn: route(".previousPoint.position"), value: wpPosition(0), when: waypoints(1)},
		{pathFn: route(".nextPoint.name"), value: wpName(1), when: waypoints(2)},
		{pathFn: route(".followingPoint.name"), value: wpName(2), when: following},
		{pathFn: route(".followingPoint.position"), value: wpPosition(2), when: following},
	}

	// 126985 (alert text) maps to nothing: it keeps the text for the sender's 126983 alerts.
	rules[126985] = []rule{{when: func(c *ctx) bool {
		if c.st.alerts == nil {
			c.st.alerts = map[string]any{}
		}
		c.st.alerts[fieldText(c, "alertId")] = c.d.Field("alertTextDescription")
		return false
	}}}
	rules[126983] = []rule{{pathFn: alertPath, value: alertValue, when: func(c *ctx) bool {
		_, text := c.st.alerts[fieldText(c, "alertId")]
		return has("alertType")(c) && text
	}}}
}

// fieldRules builds the rules of a PGN whose values are its fields under one path prefix,
// from a table of "kind leaf field" entries separated by ";". The kinds: on (true for "On",
// false for another name), num (a number, as it is) and lower (a name, lower-cased); each
// value is there when its field has that type. A malformed entry is left out
// (TestFieldRules counts the rules of every table).
func fieldRules(prefix func(*ctx) string, table string) []rule {
	var rs []rule
	for _, entry := range strings.Split(table, ";") {
		f := strings.Fields(entry)
		if len(f) != 3 {
			continue
		}
		switch f[0] {
		case "on":
			rs = append(rs, onState(prefix, f[1], f[2]))
		case "lower":
			rs = append(rs, lowerState(prefix, f[1], f[2]))
		case "num":
			leaf, field := f[1], f[2]
			rs = append(rs, rule{pathFn: func(c *ctx) string { return prefix(c) + leaf },
				when:  func(c *ctx) bool { _, ok := c.d.Field(field).(float64); return ok },
				value: func(c *ctx) (any, bool) { return c.d.Field(field), true }})
		}
	}
	return rs
}

// alertTypes are the NMEA 2000 alert types and their Signal K states; a type outside them
// counts as a caution.
var alertTypes = [][2]string{{"Emergency Alarm", "emergency"}, {"Alarm", "alarm"}, {"Warning", "warn"}, {"Caution", "alert"}}

func alertType(c *ctx) [2]string {
	if s, ok := c.d.Field("alertType").(string); ok {
		for _, t := range alertTypes {
			if t[0] == s {
				return t
			}
		}
	}
	return alertTypes[len(alertTypes)-1]
}

func alertPath(c *ctx) string {
	category, _ := c.d.Field("alertCategory").(string)
	return "notifications.nmea." + strings.ToLower(strings.ReplaceAll(alertType(c)[0], " ", "")) + "." +
		strings.ToLower(category) + "." + fieldText(c, "alertSystem") + "." + fieldText(c, "alertId")
}

// Alert is the notification of a 126983 alert: the state and text with the alert's fields.
type Alert struct {
	State                          string   `json:"state"`
	Method                         []string `json:"method"`
	Message                        any      `json:"message,omitempty"`
	AlertType                      any      `json:"alertType,omitempty"`
	AlertCategory                  any      `json:"alertCategory,omitempty"`
	AlertSystem                    any      `json:"alertSystem,omitempty"`
	AlertID                        any      `json:"alertId,omitempty"`
	DataSourceNetworkIDNAME        any      `json:"dataSourceNetworkIDNAME,omitempty"`
	DataSourceInstance             any      `json:"dataSourceInstance,omitempty"`
	DataSourceIndexSource          any      `json:"dataSourceIndex-Source,omitempty"`
	Occurrence                     any      `json:"occurrence,omitempty"`
	TemporarySilenceStatus         any      `json:"temporarySilenceStatus,omitempty"`
	AcknowledgeStatus              any      `json:"acknowledgeStatus,omitempty"`
	EscalationStatus               any      `json:"escalationStatus,omitempty"`
	TemporarySilenceSupport        any      `json:"temporarySilenceSupport,omitempty"`
	AcknowledgeSupport             any      `json:"acknowledgeSupport,omitempty"`
	EscalationSupport              any      `json:"escalationSupport,omitempty"`
	AcknowledgeSourceNetworkIDNAME any      `json:"acknowledgeSourceNetworkIDNAME,omitempty"`
	TriggerCondition               any      `json:"triggerCondition,omitempty"`
	ThresholdStatus                any      `json:"thresholdStatus,omitempty"`
	AlertPriority                  any      `json:"alertPriority,omitempty"`
	AlertState                     any      `json:"alertState,omitempty"`
}

func alertValue(c *ctx) (any, bool) {
	f := c.d.Field
	a := Alert{State: alertType(c)[1], Method: []string{"visual", "sound"}, Message: c.st.alerts[fieldText(c, "alertId")],
		AlertType: f("alertType"), AlertCategory: f("alertCategory"), AlertSystem: f("alertSystem"), AlertID: f("alertId"),
		DataSourceNetworkIDNAME: f("dataSourceNetworkIdName"), DataSourceInstance: f("dataSourceInstance"),
		DataSourceIndexSource: f("dataSourceIndexSource"), Occurrence: f("alertOccurrenceNumber"),
		TemporarySilenceStatus: f("temporarySilenceStatus"), AcknowledgeStatus: f("acknowledgeStatus"),
		EscalationStatus: f("escalationStatus"), TemporarySilenceSupport: f("temporarySilenceSupport"),
		AcknowledgeSupport: f("acknowledgeSupport"), EscalationSupport: f("escalationSupport"),
		AcknowledgeSourceNetworkIDNAME: f("acknowledgeSourceNetworkIdName"), TriggerCondition: f("triggerCondition"),
		ThresholdStatus: f("thresholdStatus"), AlertPriority: f("alertPriority"), AlertState: f("alertState")}
	// A silenced or acknowledged alert is shown without sound or sight.
	if f("temporarySilenceStatus") == "Yes" || f("acknowledgeStatus") == "Yes" {
		a.Method = []string{}
	}
	return a, true
}
