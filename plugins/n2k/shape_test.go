package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"devhost/plugins/n2k/decode"
	"devhost/plugins/n2k/outflow"
	"devhost/sdk"
)

func TestNameFieldsGoIntoTheClaim(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	cfg := map[string]any{"enabled": true, "unique_number": 4321, "manufacturer": 1851, "device_function": 140,
		"device_class": 40, "device_instance": 0x2b, "system_instance": 3, "industry_group": 4}
	if err := h.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	msgs := sent(t, h, 0)
	if len(msgs) != 1 || msgs[0].PGN != 60928 {
		t.Fatalf("claim: %+v", msgs)
	}
	// canboat's own field definitions (and lookups) read the claim back.
	got := msgs[0].Map()
	for field, want := range map[string]any{"uniqueNumber": 4321.0, "manufacturerCode": "Raymarine", "deviceFunction": 140.0,
		"deviceClass": "Steering and Control surfaces", "deviceInstanceLower": 3.0, "deviceInstanceUpper": 5.0,
		"systemInstance": 3.0, "industryGroup": "Marine", "arbitraryAddressCapable": "Yes"} {
		if got[field] != want {
			t.Errorf("%s = %v, want %v", field, got[field], want)
		}
	}
	name := getStatus(t, h)["name"]
	// A NAME field changed: the plugin claims again with the new NAME.
	n := len(h.CANSent)
	if err := h.SetConfig(map[string]any{"device_instance": 1}); err != nil {
		t.Fatal(err)
	}
	msgs = sent(t, h, n)
	if len(msgs) != 1 || msgs[0].PGN != 60928 {
		t.Fatalf("no new claim after a NAME change: %+v", msgs)
	}
	if v, _ := msgs[0].Number("deviceInstanceLower"); v != 1 {
		t.Errorf("deviceInstanceLower %v after the change", v)
	}
	if after := getStatus(t, h)["name"]; after == name {
		t.Errorf("status name unchanged: %v", after)
	}
}

func TestDefaultNameIsAMarineGateway(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	if err := h.SetConfig(map[string]any{"enabled": true}); err != nil {
		t.Fatal(err)
	}
	msgs := sent(t, h, 0)
	for field, want := range map[string]any{"manufacturerCode": 2046.0, "deviceFunction": 130.0, "deviceClass": "Internetwork device",
		"industryGroup": "Marine", "systemInstance": 0.0, "deviceInstanceLower": 0.0} {
		if got := msgs[0].Field(field); got != want {
			t.Errorf("default %s = %v, want %v", field, got, want)
		}
	}
}

// heading puts a 127250 heading of rad radians on the bus.
func heading(t *testing.T, h *sdk.FakeHost, src uint8, rad float64) {
	t.Helper()
	data, err := decode.Encode(127250, map[string]any{"heading": rad, "reference": 1.0}) // magnetic
	if err != nil {
		t.Fatal(err)
	}
	fromBus(h, decode.Message{Header: decode.Header{Prio: 2, PGN: 127250, Src: src, Dst: 255}, Data: data})
}

func published(h *sdk.FakeHost, path string) []float64 {
	var out []float64
	for _, v := range h.Published {
		if v.Path == path {
			out = append(out, v.Value.Num)
		}
	}
	return out
}

// rateLimited answers a host running the plugin enabled with a rate limit of a second.
func rateLimited(t *testing.T) *sdk.FakeHost {
	t.Helper()
	h := fakeHost(t)
	if err := h.SetConfig(map[string]any{"enabled": true, "rate_ms": 1000}); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestRateLimitLatestWins(t *testing.T) {
	h := rateLimited(t)
	defer h.Stop()
	const path = "navigation.headingMagnetic"
	heading(t, h, 7, 1.0)
	for i, rad := range []float64{1.1, 1.2, 1.3} {
		if err := h.Advance(200 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		heading(t, h, 7, rad)
		if got := published(h, path); len(got) != 1 {
			t.Fatalf("after value %d within the interval: %v", i+2, got)
		}
	}
	// The test's 127250 carries three paths (the heading, and the deviation and variation it
	// leaves at 0): three streams, each with its latest value held.
	want := map[string]any{"interval_ms": 1000.0, "streams": 3.0, "held": 3.0, "unlimited": 0.0}
	if got, _ := getStatus(t, h)["rate_limit"].(map[string]any); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("status rate_limit %v, want %v", got, want)
	}
	// The interval ends: the latest held value (1.3) goes out, not 1.1 or 1.2.
	if err := h.Advance(500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := published(h, path); len(got) != 2 || got[0] != 1.0 || got[1] != 1.3 {
		t.Fatalf("published %v, want [1 1.3]", got)
	}
	// Nothing held: the timer sends nothing more.
	if err := h.Advance(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	if got := published(h, path); len(got) != 2 {
		t.Fatalf("published %v after idle intervals", got)
	}
	// Rate limit off: every value goes out at once.
	if err := h.SetConfig(map[string]any{"rate_ms": 0}); err != nil {
		t.Fatal(err)
	}
	heading(t, h, 7, 2.0)
	heading(t, h, 7, 2.1)
	if got := published(h, path); len(got) != 4 || got[3] != 2.1 {
		t.Fatalf("without a limit: %v", got)
	}
	if _, armed := h.Timers[timerRate]; armed {
		t.Error("the rate timer still armed with no limit")
	}
	if rl, ok := getStatus(t, h)["rate_limit"]; ok {
		t.Errorf("status rate_limit %v with no limit", rl)
	}
}

// The status counts the values the limit let pass because it had no room for their stream,
// and keeps counting across a change of the interval.
func TestRateLimitStatusCountsUnlimited(t *testing.T) {
	p := newPlugin()
	p.limiter.Interval = time.Second
	src := sdk.Source{Type: "NMEA2000", Src: "3"}
	for i := range outflow.MaxStreams + 2 {
		p.limiter.Offer(limitStream(fmt.Sprintf("electrical.batteries.%d.voltage", i), src), nil, 0)
	}
	want := rateView{IntervalMs: 1000, Streams: outflow.MaxStreams, Unlimited: 2}
	if got := p.status().RateLimit; got == nil || *got != want {
		t.Fatalf("rate_limit %+v, want %+v", got, want)
	}
	p.unlimitedBefore += p.limiter.Untracked() // as shape does when rate_ms changes
	p.limiter = outflow.Limiter[sdk.Source]{Interval: 2 * time.Second}
	p.limiter.Offer(limitStream("navigation.position", src), nil, 0)
	want = rateView{IntervalMs: 2000, Streams: 1, Unlimited: 2}
	if got := p.status().RateLimit; got == nil || *got != want {
		t.Fatalf("after the change: rate_limit %+v, want %+v", got, want)
	}
}

// The limit is per path and source: two compasses sending one path at the same rate both
// get through, each with its own latest value at the interval's end, whichever sends first.
func TestRateLimitPerSource(t *testing.T) {
	h := rateLimited(t)
	defer h.Stop()
	const path = "navigation.headingMagnetic"
	bySender := func() map[string][]float64 {
		out := map[string][]float64{}
		for _, v := range h.Sourced {
			if v.Path == path {
				out[v.Source.Src] = append(out[v.Source.Src], v.Value.Num)
			}
		}
		return out
	}
	heading(t, h, 7, 1.0)
	heading(t, h, 8, 2.0)
	for i := range 3 {
		if err := h.Advance(200 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		heading(t, h, 8, 2.1+float64(i)/10)
		heading(t, h, 7, 1.1+float64(i)/10)
	}
	if got := bySender(); fmt.Sprint(got) != "map[7:[1] 8:[2]]" {
		t.Fatalf("within the interval: %v", got)
	}
	if err := h.Advance(500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := bySender(); fmt.Sprint(got) != "map[7:[1 1.3] 8:[2 2.3]]" {
		t.Fatalf("after the interval: %v, want each sender's first and latest", got)
	}
}

func TestPathOverrides(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	rows := `[{"from":"electrical.batteries.1","to":"electrical.batteries.house"}]`
	if err := h.SetConfig(map[string]any{"enabled": true, "path_overrides": rows}); err != nil {
		t.Fatal(err)
	}
	battery := func(inst int, volts float64) {
		data, err := decode.Encode(127508, map[string]any{"instance": float64(inst), "voltage": volts})
		if err != nil {
			t.Fatal(err)
		}
		fromBus(h, decode.Message{Header: decode.Header{Prio: 6, PGN: 127508, Src: 12, Dst: 255}, Data: data})
	}
	battery(1, 12.5)
	battery(2, 13.1)
	v := h.Values()
	if got := v["electrical.batteries.house.voltage"]; got.Num != 12.5 {
		t.Errorf("house voltage %+v (paths %v)", got, h.Paths())
	}
	if _, ok := v["electrical.batteries.1.voltage"]; ok {
		t.Error("instance 1 still published under its instance path")
	}
	if got := v["electrical.batteries.2.voltage"]; got.Num != 13.1 {
		t.Errorf("instance 2 (no override) %+v", got)
	}
	if hl, ok := h.Health["n2k.config"]; ok && hl.State != sdk.Normal {
		t.Errorf("config condition %+v for good rows", hl)
	}

	// A bad row is left out and named in n2k.config; the good rows still work.
	rows = `[{"from":"electrical.batteries.2","to":"electrical.batteries.start"},{"from":"bad path","to":"x"}]`
	if err := h.SetConfig(map[string]any{"path_overrides": rows}); err != nil {
		t.Fatal(err)
	}
	hl := h.Health["n2k.config"]
	if hl.State != sdk.Warn || !strings.Contains(hl.Message, "row 2") {
		t.Fatalf("config condition %+v", hl)
	}
	battery(2, 13.2)
	if got := h.Values()["electrical.batteries.start.voltage"]; got.Num != 13.2 {
		t.Errorf("start voltage %+v", got)
	}
	battery(1, 12.6)
	if got := h.Values()["electrical.batteries.1.voltage"]; got.Num != 12.6 {
		t.Errorf("the removed override still applies: %+v", got)
	}
	// Fixed: the condition returns to normal.
	if err := h.SetConfig(map[string]any{"path_overrides": "[]"}); err != nil {
		t.Fatal(err)
	}
	if hl := h.Health["n2k.config"]; hl.State != sdk.Normal {
		t.Errorf("config condition %+v after the fix", hl)
	}
}

// Overrides apply before the rate limit: the limit is per published path (and source).
func TestOverridesThenRateLimit(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	rows := `[{"from":"navigation.headingMagnetic","to":"navigation.headingCompass"}]`
	if err := h.SetConfig(map[string]any{"enabled": true, "rate_ms": 500, "path_overrides": rows}); err != nil {
		t.Fatal(err)
	}
	heading(t, h, 7, 0.5)
	heading(t, h, 7, 0.6)
	if err := h.Advance(time.Second); err != nil {
		t.Fatal(err)
	}
	if got := published(h, "navigation.headingCompass"); fmt.Sprint(got) != "[0.5 0.6]" {
		t.Errorf("published %v", got)
	}
}

func battery(t *testing.T, h *sdk.FakeHost, inst int, volts float64) {
	t.Helper()
	data, err := decode.Encode(127508, map[string]any{"instance": float64(inst), "voltage": volts})
	if err != nil {
		t.Fatal(err)
	}
	fromBus(h, decode.Message{Header: decode.Header{Prio: 6, PGN: 127508, Src: 12, Dst: 255}, Data: data})
}

func TestMetaUnitsDeclaredOnFirstPublication(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	rows := `[{"from":"electrical.batteries.1","to":"electrical.batteries.house"}]`
	if err := h.SetConfig(map[string]any{"enabled": true, "path_overrides": rows}); err != nil {
		t.Fatal(err)
	}
	heading(t, h, 7, 1.0)
	battery(t, h, 1, 12.5)
	for path, want := range map[string]string{
		"navigation.headingMagnetic":         `{"units":"rad"}`,
		"electrical.batteries.house.voltage": `{"units":"V"}`, // the overridden path
	} {
		if got := h.Meta[path]; got != want {
			t.Errorf("meta of %s = %q, want %s", path, got, want)
		}
	}
	if _, ok := h.Meta["electrical.batteries.1.voltage"]; ok {
		t.Error("meta declared for the path the override replaced")
	}
	// Once per path: more values declare nothing again.
	calls := func() int {
		n := 0
		for _, c := range h.Calls {
			if c == "sk_meta" {
				n++
			}
		}
		return n
	}
	before := calls()
	heading(t, h, 7, 1.1)
	battery(t, h, 1, 12.6)
	if calls() != before {
		t.Errorf("meta declared again: %d calls, then %d", before, calls())
	}
}

func TestMetaBudget(t *testing.T) {
	h := fakeHost(t)
	defer h.Stop()
	if err := h.SetConfig(map[string]any{"enabled": true}); err != nil {
		t.Fatal(err)
	}
	for inst := range metaBudget + 12 {
		battery(t, h, inst, 12)
	}
	if n := len(h.Meta); n != metaBudget {
		t.Errorf("%d paths declared, want the budget %d", n, metaBudget)
	}
	if got := h.Values()[fmt.Sprintf("electrical.batteries.%d.voltage", metaBudget+11)]; got.Num != 12 {
		t.Errorf("values past the budget still published: %+v", got)
	}
}

// One sender's values of a path are one rate-limited stream whichever PGN carries them (a
// GPS sends navigation.position in 129025 and 129029); another sender is a stream of its own.
func TestLimitStreamIgnoresThePGN(t *testing.T) {
	const path = "navigation.position"
	rapid := sdk.Source{Type: "NMEA2000", Src: "3", PGN: 129025}
	gnss := rapid
	gnss.PGN = 129029
	other := rapid
	other.Src = "4"
	if limitStream(path, rapid) != limitStream(path, gnss) {
		t.Errorf("129025 and 129029 from one sender: two streams")
	}
	if limitStream(path, rapid) == limitStream(path, other) {
		t.Errorf("two senders: one stream")
	}
}
