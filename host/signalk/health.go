package signalk

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"devhost/host/clock"
	"devhost/host/config"
	"devhost/host/health"
	"devhost/host/sk"
)

// Health condition keys this package raises.
const (
	KeyLinkStalled = "skLinkStalled"
	KeyCertificate = "skCertificate"
)

// PathDatetime is the time fallback's subscription.
const PathDatetime = "navigation.datetime"

// stallDelay is sk.stall_s (at least 60 s).
func (c *Client) stallDelay() time.Duration {
	s := c.cfg.Int(config.NsSK, config.SKStallS)
	if s < 60 {
		s = 300
	}
	return time.Duration(s) * time.Second
}

// evalStall raises skLinkStalled (alarm, counted by the restart policy) when the network is
// up, the stream worked once this boot, and it has been down for sk.stall_s; it clears it
// otherwise. Loss of the network itself is never a reason: the condition clears while down.
func (c *Client) evalStall() {
	if c.hlth == nil {
		return
	}
	c.mu.Lock()
	if c.stallTimer != nil {
		c.stallTimer.Stop()
		c.stallTimer = nil
	}
	cond := c.netUp && c.everUp && !c.connected
	var report func() error
	if !cond {
		if c.stalled {
			c.stalled = false
			report = func() error { return c.hlth.Report(KeyLinkStalled, health.Normal, "") }
		}
	} else {
		start := c.downSince
		if c.netUpSince.After(start) {
			start = c.netUpSince
		}
		d := c.stallDelay()
		left := start.Add(d).Sub(c.clk.Now())
		if left <= 0 {
			if !c.stalled {
				c.stalled = true
				msg := fmt.Sprintf("Signal K stream down for %d s with the network up", int(d/time.Second))
				report = func() error { return c.hlth.ReportFatal(KeyLinkStalled, health.Alarm, msg) }
			}
		} else {
			c.stallTimer = c.clk.AfterFunc(left, c.evalStall)
		}
	}
	c.mu.Unlock()
	if report != nil {
		if err := report(); err != nil {
			c.log.Warn("signalk: health report", "key", KeyLinkStalled, "err", err)
		}
	}
}

// notify is the health sink: every condition change becomes the Signal K notification
// notifications.dev.<hostname>.<key> with its state, message and the visual method.
func (c *Client) notify(cond health.Condition) {
	path := "notifications.dev." + c.hostname() + "." + cond.Key
	v, _ := json.Marshal(map[string]any{
		"state": string(cond.State), "message": cond.Message, "method": []string{"visual"},
	})
	if err := c.stream.Publish(sk.Value{Path: path, Value: json.RawMessage(v)}); err != nil {
		c.log.Debug("signalk: notification not queued", "path", path, "err", err)
	}
}

// runTelemetry publishes dev.<hostname>.* every sk.health_s (0: off).
func (c *Client) runTelemetry(ctx context.Context) {
	if c.tele == nil {
		return
	}
	for {
		s := c.cfg.Int(config.NsSK, config.SKHealthS)
		var tc <-chan time.Time
		var t interface{ Stop() bool }
		if s > 0 {
			tm := c.clk.NewTimer(time.Duration(s) * time.Second)
			tc, t = tm.Chan(), tm
		}
		select {
		case <-ctx.Done():
			if t != nil {
				t.Stop()
			}
			return
		case <-c.telemetryCh:
			if t != nil {
				t.Stop()
			}
		case <-tc:
			c.publishTelemetry()
		}
	}
}

// TelemetryValues are the values of one telemetry publication.
func (c *Client) TelemetryValues() []sk.Value {
	t := c.tele()
	p := "dev." + c.hostname() + "."
	c.mu.Lock()
	reconnects := c.connects - 1
	c.mu.Unlock()
	if reconnects < 0 {
		reconnects = 0
	}
	var rssi any
	if t.RSSI != nil {
		rssi = float64(*t.RSSI)
	}
	reason := t.ResetReason
	if reason == "" {
		reason = "unknown"
	}
	return []sk.Value{
		{Path: p + "uptime", Value: float64(t.Uptime / time.Second)},
		{Path: p + "freeHeap", Value: float64(t.Memory.FreeHeap)},
		{Path: p + "minFreeHeap", Value: float64(t.Memory.MinFreeHeap)},
		{Path: p + "internalFree", Value: float64(t.Memory.FreeInternal)},
		{Path: p + "largestBlock", Value: float64(t.Memory.LargestBlock)},
		{Path: p + "rssi", Value: rssi},
		{Path: p + "wifiReconnects", Value: float64(t.WiFiReconnects)},
		{Path: p + "skReconnects", Value: float64(reconnects)},
		{Path: p + "resetReason", Value: reason},
	}
}

func (c *Client) publishTelemetry() {
	if err := c.stream.Publish(c.TelemetryValues()...); err != nil {
		c.log.Debug("signalk: telemetry not queued", "err", err)
	}
}

// runTime owns the time fallback's subscription: it re-evaluates it when kicked (config, a
// clock change) and every minute (a carried RTC value goes stale without telling anyone).
func (c *Client) runTime(ctx context.Context) {
	if c.wall == nil {
		return
	}
	var held func()
	defer func() {
		if held != nil {
			held()
		}
	}()
	for {
		held = c.timeFallback(held)
		t := c.clk.NewTimer(time.Minute)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-c.timeKick:
		case <-t.Chan():
		}
		t.Stop()
	}
}

func (c *Client) kickTime() {
	select {
	case c.timeKick <- struct{}{}:
	default:
	}
}

// timeFallback holds the navigation.datetime subscription exactly while it may set the
// clock: time.sk_fallback on, and the clock unsynced or set by Signal K itself. A better
// source (manual, sntp) ends it. held is the current subscription's cancel (nil: none).
func (c *Client) timeFallback(held func()) func() {
	_, src, synced := c.wall.Now()
	want := c.cfg.Bool(config.NsTime, config.TimeSKFallback) && src.Rank() <= clock.SourceSK.Rank() &&
		(!synced || src == clock.SourceSK)
	c.timeSubOn.Store(want && held != nil)
	if want == (held != nil) {
		return held
	}
	if !want {
		held()
		c.log.Info("signalk: time subscription dropped", "clock_source", src.String())
		return nil
	}
	// The clock tells every later Set; a better source ends the subscription.
	cancelWatch, err := c.wall.Subscribe(func(s clock.Source) {
		if s.Rank() > clock.SourceSK.Rank() {
			c.kickTime()
		}
	})
	if err != nil {
		c.log.Warn("signalk: no clock subscriber slot; time fallback off", "err", err)
		return nil
	}
	cancelSub, err := c.stream.Subscribe(PathDatetime, c.onDatetime)
	if err != nil {
		cancelWatch()
		c.log.Warn("signalk: time subscription refused", "err", err)
		return nil
	}
	c.timeSubOn.Store(true)
	c.log.Info("signalk: time subscription held", "path", PathDatetime)
	return func() { cancelSub(); cancelWatch() }
}

// onDatetime sets the clock from navigation.datetime as source sk.
func (c *Client) onDatetime(d sk.Delta) {
	var s string
	if json.Unmarshal(d.Value, &s) != nil {
		return
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		c.log.Debug("signalk: navigation.datetime unreadable", "value", s)
		return
	}
	if err := c.wall.Set(clock.SourceSK, t); err != nil {
		c.log.Debug("signalk: clock not set from Signal K", "err", err)
		c.kickTime()
	}
}
