package main

import (
	"encoding/json"
	"math"
	"strings"
	"time"

	"devhost/abi"
	"devhost/plugins/n2k/outflow"
	"devhost/plugins/n2k/skmap"
	"devhost/plugins/n2k/skmeta"
	"devhost/sdk"
)

// nameFields are the parts of the ISO NAME the owner sets (f_n2k); a change re-claims.
type nameFields struct {
	unique                   uint32
	manufacturer             uint16
	function, class          uint8
	devInstance, sysInstance uint8
	industry                 uint8
}

func readName(cfg sdk.Config) nameFields {
	return nameFields{
		unique:       uint32(cfg.Int("unique_number")),
		manufacturer: uint16(cfg.Int("manufacturer")),
		function:     uint8(cfg.Int("device_function")),
		class:        uint8(cfg.Int("device_class")),
		devInstance:  uint8(cfg.Int("device_instance")),
		sysInstance:  uint8(cfg.Int("system_instance")),
		industry:     uint8(cfg.Int("industry_group")),
	}
}

// minRatePeriod is the shortest timer period the ABI allows.
const minRatePeriod = 10 * time.Millisecond

// shape applies the path overrides and the rate limit (per path and source) of cfg, and
// reports in the warn condition n2k.config the issues of the other keys given and the
// override rows that break the rules (left out).
func (p *plugin) shape(cfg sdk.Config, issues []string) {
	o, bad := outflow.ParseOverrides(cfg.String("path_overrides"))
	p.overrides = o
	if len(bad) > 0 {
		msgs := make([]string, len(bad))
		for i, e := range bad {
			msgs[i] = e.Error()
		}
		issues = append(issues, "path_overrides: "+strings.Join(msgs, "; "))
	}
	p.reportConfig(strings.Join(issues, "; "))

	interval := time.Duration(max(cfg.Int("rate_ms"), 0)) * time.Millisecond
	if interval == p.limiter.Interval {
		return
	}
	p.readClock()
	for _, h := range p.limiter.Due(p.uptime + p.limiter.Interval) { // what was held goes out now
		p.publishHeld(h)
	}
	p.unlimitedBefore += p.limiter.Untracked()
	p.limiter = outflow.Limiter[sdk.Source]{Interval: interval}
	var err error
	if interval > 0 {
		err = sdk.SetTimer(timerRate, max(interval, minRatePeriod), max(interval, minRatePeriod))
	} else {
		err = sdk.CancelTimer(timerRate)
	}
	if err != nil {
		sdk.Logf(sdk.LevelWarn, "rate timer: %v", err)
	}
}

// reportConfig sets n2k.config: warn with issue (cut to what a condition holds), or normal
// when there is none; only a change is reported.
func (p *plugin) reportConfig(issue string) {
	if len(issue) > abi.MaxHealthMessage {
		issue = truncate(issue, abi.MaxHealthMessage-3) + "..."
	}
	if issue == p.cfgIssue {
		return
	}
	state := sdk.Normal
	if issue != "" {
		state = sdk.Warn
	}
	if err := sdk.ReportHealth(condConfig, state, issue); err != nil {
		sdk.Logf(sdk.LevelWarn, "health: %v", err)
		return
	}
	p.cfgIssue = issue
	if issue != "" {
		sdk.Logf(sdk.LevelWarn, "n2k: config: %s", issue)
	}
}

// valueText answers the JSON of the delta's value i as written in the delta event, nil
// when the delta was not written (delta events off).
func (p *plugin) valueText(i int) []byte {
	if 2*i+1 >= len(p.spans) {
		return nil
	}
	return p.one[p.spans[2*i]:p.spans[2*i+1]]
}

// held is a rate-limited value with the source of the message it came in, as the limiter
// keeps it.
type held struct {
	src sdk.Source
	v   any
}

// limitStream is the stream the rate limit counts a value of path from src in: Signal K
// tells sources apart by $source (sender and instance), so the PGN is left out (a GPS's
// 129025 and 129029 positions are one stream, two GPS receivers' are two).
func limitStream(path string, src sdk.Source) outflow.Stream[sdk.Source] {
	src.PGN = 0
	return outflow.Stream[sdk.Source]{Path: path, Source: src}
}

// publishHeld sends a value the rate limiter held, with its source.
func (p *plugin) publishHeld(h outflow.Held[sdk.Source]) {
	if x, ok := h.Value.(held); ok {
		p.publishIn("", x.src, h.Path, x.v, nil)
		return
	}
	p.publishIn("", sdk.Source{}, h.Path, h.Value, nil)
}

// sourceOf is the source a message's values are published with: the sender's address and
// the PGN, with the instance n2k-signalk gives the source when it is one the device takes
// (letters, digits, _ and -). A source the device would refuse leaves the values the
// device's own source (the zero Source).
func sourceOf(s *skmap.Source) sdk.Source {
	src := sdk.Source{Type: s.Type, Src: s.Src, PGN: s.PGN}
	if s.Instance != nil {
		src.Instance = *s.Instance
		if sdk.ValidSource(src) != nil {
			src.Instance = ""
		}
	}
	if sdk.ValidSource(src) != nil {
		return sdk.Source{}
	}
	return src
}

// sourceCache keeps sourceOf's answers: a bus has a few dozen (sender, PGN, instance)
// combinations, and each message would check its source again. Bounded: it starts afresh
// past maxSources entries.
type sourceCache map[sourceKey]sdk.Source

type sourceKey struct {
	typ, src, instance string
	pgn                uint32
	hasInstance        bool
}

const maxSources = 1024

// of answers sourceOf(s), checked once per combination.
func (c *sourceCache) of(s *skmap.Source) sdk.Source {
	k := sourceKey{typ: s.Type, src: s.Src, pgn: s.PGN}
	if s.Instance != nil {
		k.instance, k.hasInstance = *s.Instance, true
	}
	if src, ok := (*c)[k]; ok {
		return src
	}
	if *c == nil || len(*c) >= maxSources {
		*c = sourceCache{}
	}
	src := sourceOf(s)
	(*c)[k] = src
	return src
}

// publishTarget sends an AIS target's values to Signal K under its context; a context the
// device does not take (vessels.unknown, a report without an MMSI) is left out.
func (p *plugin) publishTarget(context string, src sdk.Source, values []skmap.Value) {
	if sdk.ValidContext(context) != nil {
		return
	}
	for i, v := range values {
		p.publishIn(context, src, v.Path, v.Value, p.valueText(i))
	}
}

// publishIn sends one value to Signal K, for the own vessel (context "") or another, with
// its message's source (the zero Source: the device's own); a number that is not finite goes
// as null. text, when not nil, is v's JSON, written already.
func (p *plugin) publishIn(context string, src sdk.Source, path string, v any, text []byte) {
	var err error
	switch x := v.(type) {
	case float64:
		switch {
		case math.IsNaN(x) || math.IsInf(x, 0):
			err = publish(context, src, path, nil)
		case context == "" && src == sdk.Source{}:
			err = sdk.PublishNumber(path, x)
		default:
			err = publish(context, src, path, v) // v, already boxed: x would be boxed again
		}
	case string, bool, nil:
		err = publish(context, src, path, x)
	default:
		// A composite (position, attitude...): written by hand, as reflection is slow
		// inside the sandbox.
		if text == nil {
			p.val = skmap.AppendValue(p.val[:0], x)
			text = p.val
		}
		if context == "" && src == (sdk.Source{}) {
			err = sdk.PublishJSON(path, text)
		} else {
			err = publish(context, src, path, json.RawMessage(text))
		}
	}
	if err != nil {
		sdk.Logf(sdk.LevelWarn, "publish %s %s: %v", context, path, err)
	}
}

func publish(context string, src sdk.Source, path string, v any) error {
	switch {
	case src != sdk.Source{}:
		return sdk.PublishToFrom(context, src, path, v)
	case context == "":
		return sdk.Publish(path, v)
	}
	return sdk.PublishTo(context, path, v)
}

// metaBudget bounds the meta declarations of the plugin: the device keeps a bounded table of
// them for every plugin and itself (reconciled with the server on each connect).
const metaBudget = 48

// declareMeta declares the units of path the first time the plugin publishes it, when the
// Signal K specification gives it units; a refusal (the device's table full) ends the
// declarations for this run.
func (p *plugin) declareMeta(path string) {
	if p.metaDone == nil {
		p.metaDone = map[string]bool{}
	}
	if p.metaStop || p.metaDone[path] {
		return
	}
	p.metaDone[path] = true
	u := skmeta.Units(path)
	if u == "" {
		return
	}
	if p.metaSent >= metaBudget {
		sdk.Logf(sdk.LevelInfo, "meta: %d paths declared, no more this run", p.metaSent)
		p.metaStop = true
		return
	}
	if err := sdk.DeclareMeta(path, map[string]string{"units": u}); err != nil {
		sdk.Logf(sdk.LevelWarn, "meta %s: %v; no more declarations this run", path, err)
		p.metaStop = true
		return
	}
	p.metaSent++
}
