package skmap

import (
	"strconv"
	"strings"
	"time"
)

// Trip fuel, chargers, converters, direction data and navigation to a waypoint, as
// n2k-signalk 4.6.0 maps them.
func init() {
	trip := func(leaf, field string) rule {
		return rule{pathFn: enginePath("trip." + leaf), value: scaled(field, 0.001), when: has(field)}
	}
	rules[127497] = []rule{trip("fuelUsed", "tripFuelUsed"), trip("fuelRate.average", "fuelRateAverage"),
		trip("fuelRate.economy", "fuelRateEconomy"), trip("fuelRate.instantaneousEconomy", "instantaneousFuelEconomy")}

	charger := func(c *ctx) string { return "electrical.chargers." + fieldText(c, "instance") }
	rules[127507] = []rule{
		lowerState(charger, ".operatingState", "operatingState"),
		lowerState(charger, ".chargeMode", "chargeMode"),
		onState(charger, ".enabled", "enabled"),
		onState(charger, ".equalizationPending", "equalizationPending"),
		{pathFn: func(c *ctx) string { return charger(c) + ".equalizationTimeRemaining" }, allowNull: true,
			value: func(c *ctx) (any, bool) { return timeToSeconds(c.d.Field("equalizationTimeRemaining")) }},
	}

	converter := func(c *ctx) string {
		return "electrical.converter." + strconv.Itoa(int(c.d.Src)) + "." + fieldText(c, "connectionNumber")
	}
	rules[127750] = []rule{
		lowerState(converter, ".operatingState", "operatingState"),
		lowerState(converter, ".temperatureState", "temperatureState"),
		lowerState(converter, ".overloadState", "overloadState"),
		lowerState(converter, ".lowDCVoltageState", "lowDcVoltageState"),
		lowerState(converter, ".rippleState", "rippleState"),
	}

	rules[130577] = []rule{
		{path: "navigation.courseOverGroundTrue", field: "cog", when: eq("cogReference", "True")},
		{path: "navigation.speedOverGround", field: "sog", when: truthy("sog")},
		{path: "environment.current", when: all(truthy("drift"), truthy("set")), value: func(c *ctx) (any, bool) {
			if c.d.Field("cogReference") == "True" || c.d.Field("setReference") == "Magnetic" {
				return Current{SetTrue: num(c, "set"), Drift: num(c, "drift")}, true
			}
			return nil, false
		}},
	}

	course := func(c *ctx) string {
		kind := "Rhumbline"
		if c.d.Field("calculationType") == "Great Circle" {
			kind = "GreatCircle"
		}
		c.st.courseType = kind // 129283 names its path after the last calculation seen
		return "navigation.course" + kind
	}
	rules[129284] = []rule{
		{pathFn: func(c *ctx) string { return course(c) + ".bearingTrack" + fieldText(c, "courseBearingReference") },
			field: "bearingOriginToDestinationWaypoint"},
		{pathFn: func(c *ctx) string { return course(c) + ".nextPoint.distance" }, field: "distanceToWaypoint"},
		{pathFn: func(c *ctx) string { return course(c) + ".nextPoint.velocityMadeGood" }, field: "waypointClosingVelocity"},
		{pathFn: func(c *ctx) string { return course(c) + ".nextPoint.bearing" + fieldText(c, "courseBearingReference") },
			field: "bearingPositionToDestinationWaypoint"},
		{pathFn: func(c *ctx) string { return course(c) + ".nextPoint.position" }, allowNull: true,
			value: func(c *ctx) (any, bool) {
				return Position{Longitude: num(c, "destinationLongitude"), Latitude: num(c, "destinationLatitude")}, true
			}},
		{pathFn: func(c *ctx) string { return course(c) + ".nextPoint.timeToGo" }, when: all(truthy("etaDate"), truthy("etaTime")),
			value: timeToGo},
	}
	rules[129283] = []rule{{
		pathFn: func(c *ctx) string { return "navigation.course" + c.st.courseType + ".crossTrackError" },
		field:  "xte",
		when: func(c *ctx) bool {
			return c.d.Field("navigationTerminated") == "No" && has("xte")(c) && c.st.courseType != ""
		},
	}}
}

func lowerState(prefix func(*ctx) string, leaf, field string) rule {
	return rule{pathFn: func(c *ctx) string { return prefix(c) + leaf },
		when: func(c *ctx) bool { _, ok := c.d.Field(field).(string); return ok },
		value: func(c *ctx) (any, bool) {
			s, _ := c.d.Field(field).(string)
			return strings.ToLower(s), true
		}}
}

func onState(prefix func(*ctx) string, leaf, field string) rule {
	return rule{pathFn: func(c *ctx) string { return prefix(c) + leaf },
		when:  func(c *ctx) bool { _, ok := c.d.Field(field).(string); return ok },
		value: func(c *ctx) (any, bool) { return c.d.Field(field) == "On", true }}
}

// timeToGo is the ETA less the message's time, in seconds.
func timeToGo(c *ctx) (any, bool) {
	date, _ := c.d.Field("etaDate").(string)
	tm, _ := c.d.Field("etaTime").(string)
	eta, err := time.Parse(time.RFC3339Nano, strings.ReplaceAll(date, ".", "-")+"T"+tm+"Z")
	if err != nil {
		return nil, true
	}
	return TimeToGo{eta: eta, at: c.stamp}, true
}

// TimeToGo is the seconds from the update's time to an ETA: the update's time may be set
// after mapping (the plugin stamps a message when it publishes it), so it is read when the
// value is written. JSON null when that time is not a time.
type TimeToGo struct {
	eta time.Time
	at  *string
}

// Seconds answers the time to go, false when the update's time is not a time.
func (t TimeToGo) Seconds() (float64, bool) {
	now, err := time.Parse(time.RFC3339Nano, *t.at)
	if err != nil {
		return 0, false
	}
	return t.eta.Sub(now).Seconds(), true
}

// MarshalJSON writes the seconds.
func (t TimeToGo) MarshalJSON() ([]byte, error) { return AppendValue(nil, t), nil }
