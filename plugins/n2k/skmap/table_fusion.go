package skmap

import "strconv"

// Fusion stereos (130820), as n2k-signalk 4.6.0 maps them: one device, fusion1, its zones
// and the sources; the track, tuner and playback values go under the current source, known
// once a Source message named it.
func init() {
	const dev = "entertainment.device.fusion1."
	current := func(c *ctx) bool { return c.st.m.fusionSource != "" }
	source := func(leaf string) func(*ctx) string {
		return func(c *ctx) string { return dev + "avsource.source" + c.st.m.fusionSource + leaf }
	}
	field := func(id string) func(*ctx) (any, bool) {
		return func(c *ctx) (any, bool) { v, ok := c.d.Lookup(id); return v, ok }
	}
	duration := func(id string) func(*ctx) (any, bool) {
		return func(c *ctx) (any, bool) { return timeToSeconds(c.d.Field(id)) }
	}
	rs := []rule{
		{path: dev + "name", when: isID("fusionDeviceName"), value: field("name")},
		{path: dev + "state", when: isID("fusionPowerState"), value: func(c *ctx) (any, bool) {
			if c.d.Field("state") == "On" {
				return "on", true
			}
			return "off", true
		}},
		{pathFn: source(".track.artistName"), when: all(isID("fusionArtistName"), has("artist"), current), value: field("artist")},
		{pathFn: source(".track.albumName"), when: all(isID("fusionAlbumName"), has("album"), current), value: field("album")},
		{pathFn: source(".track.name"), when: all(isID("fusionTrackName"), has("track"), current), value: field("track")},
		{pathFn: source(".track.elapsedTime"), when: all(isID("fusionTrackPosition"), current), value: duration("progress")},
		{pathFn: source(".track.length"), when: all(isID("fusionMedia"), current), value: duration("length")},
		{pathFn: source(".track.artistName"), when: all(isID("fusionSiriusxmArtist"), current), value: field("artist")},
		{pathFn: source(".track.name"), when: all(isID("fusionSiriusxmTitle"), current), value: field("title")},
		{pathFn: source(".tuner.stationName"), when: all(isID("fusionSiriusxmChannel"), current), value: field("channel")},
		{pathFn: source(".track.genre"), when: all(isID("fusionSiriusxmContentInfo"), current), value: field("genre")},
		{pathFn: source(".track.number"), when: all(isID("fusionMedia"), current), value: field("track")},
		{pathFn: source(".track.totalTracks"), when: all(isID("fusionMedia"), current), value: field("trackCount")},
	}
	for z := 1; z <= 4; z++ {
		rs = append(rs, rule{path: dev + "output.zone" + strconv.Itoa(z) + ".volume.master", when: isID("fusionVolumes"),
			value: field("zone" + strconv.Itoa(z))})
	}
	rs = append(rs, rule{when: isID("fusionZoneName"), value: field("name"), pathFn: func(c *ctx) string {
		zone := "NaN"
		if n, ok := c.d.Field("number").(float64); ok {
			zone = jsString(n + 1)
		}
		return dev + "output.zone" + zone + ".name"
	}})
	// The zones' source: zone 1's also makes it the current source.
	rs = append(rs, rule{path: dev + "output.zone1.source", when: isID("fusionSource"), value: func(c *ctx) (any, bool) {
		id, ok := c.d.Lookup("currentSourceId")
		if !ok {
			return nil, false
		}
		c.st.m.fusionSource = jsString(id)
		return dev + "avsource.source" + c.st.m.fusionSource, true
	}})
	for z := 2; z <= 4; z++ {
		rs = append(rs, rule{path: dev + "output.zone" + strconv.Itoa(z) + ".source", when: isID("fusionSource"),
			value: func(c *ctx) (any, bool) { return dev + "avsource.source" + fieldText(c, "currentSourceId"), true }})
	}
	rs = append(rs,
		rule{when: isID("fusionSource"), value: field("source"),
			pathFn: func(c *ctx) string { return dev + "avsource.source" + fieldText(c, "sourceId") + ".name" }},
		rule{pathFn: source(".tuner.frequency"), when: all(isID("fusionTuner"), current, has("frequency")),
			value: func(c *ctx) (any, bool) {
				if c.d.Field("sourceId") == "AM" {
					return num(c, "frequency") / 1000, true
				}
				return num(c, "frequency") / 1000000, true
			}},
		rule{pathFn: source(".tuner.signalStrength"), when: all(isID("fusionTuner"), current), value: field("signalStrength")},
		rule{pathFn: source(".track.name"), when: all(isID("fusionTuner"), current), value: func(c *ctx) (any, bool) {
			s, _ := c.d.Field("track").(string)
			return s, s != ""
		}},
		rule{pathFn: source(".playbackState"), when: all(isID("fusionMedia"), current), value: func(c *ctx) (any, bool) {
			if f := c.d.Field("flags"); f == "Paused" || f == "Stopped" {
				return "Paused", true
			}
			return "Playing", true
		}},
	)
	for z := 1; z <= 4; z++ {
		rs = append(rs, rule{path: dev + "output.zone" + strconv.Itoa(z) + ".isMuted", when: isID("fusionMute"),
			value: func(c *ctx) (any, bool) { return c.d.Field("mute") == "Mute On", true }})
	}
	for z := 1; z <= 4; z++ {
		rs = append(rs, rule{path: dev + "output.zone" + strconv.Itoa(z) + ".equalizer", when: isID("fusionEq"),
			value: func(c *ctx) (any, bool) {
				eq := map[string]any{}
				for _, k := range []string{"bass", "mid", "treble"} {
					if v, ok := c.d.Lookup(k); ok {
						eq[k] = v
					}
				}
				return eq, true
			}})
	}
	rules[130820] = rs
}
