package device

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"devhost/abi"
	"devhost/host/power"
)

// RTC memory holds the duty cycle's record (power.RecordLen bytes, magic "DPWR") followed by
// the clock's value; either may be missing.
func splitRTC(b []byte) (pw, clk []byte) {
	if len(b) >= power.RecordLen && bytes.HasPrefix(b, []byte("DPWR")) {
		return b[:power.RecordLen], b[power.RecordLen:]
	}
	return nil, b
}

// powerCycle builds the duty cycle from the updater, the route and the Signal K stream, and
// starts it.
func (d *Device) powerCycle(ctx context.Context, g *errgroup.Group) error {
	pw, _ := splitRTC(d.opts.Handoff.RTC)
	in := power.Inputs{Unconfirmed: d.ota.Unconfirmed, UpdateBusy: d.ota.Busy, NetUp: d.net.Up}
	if d.sk != nil && d.skConnected != nil {
		in.Stream = &power.Stream{
			Enabled:   func() bool { return d.cfg.Bool("sk", "ws_enabled") },
			Connected: d.skConnected,
			Flush:     d.sk.Flush,
		}
	}
	d.power = power.New(power.Options{Clock: d.clk, Logger: d.ring.Logger("power"), Config: d.cfg, Inputs: in,
		ResetReason: d.opts.Handoff.ResetReason, RTC: pw,
		Sleep: func(dur time.Duration, rec []byte) {
			// The clock's value goes after the cycle's record; buffered deltas are not kept.
			d.sleepFor, d.sleepRTC = dur, append(rec, d.clock.EncodeRTC(dur)...)
			d.restartAfter(ExitDeepSleep, false, 0)
		}})
	if err := d.srv.HandleAll(d.power.Routes()); err != nil {
		return err
	}
	g.Go(func() error { d.power.Run(ctx); return nil })
	return nil
}

// pluginPower is the duty cycle as the plugin host sees it: each plugin's hold counts under
// an owner of its own (power.PluginOwner), so GET /power shows which plugin holds.
type pluginPower struct{ c *power.Cycle }

func (p pluginPower) Hold(plugin string) (release func()) { return p.c.Hold(power.PluginOwner(plugin)) }

// SleepNow is power_sleep: refused with the ABI's invalid-state while an update is
// unconfirmed or in progress.
func (p pluginPower) SleepNow() error {
	if err := p.c.SleepNow(); err != nil {
		return fmt.Errorf("%w: %w", abi.ErrState, err)
	}
	return nil
}
