package device

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"devhost/abi"
	"devhost/host/board"
	"devhost/host/health"
	"devhost/host/plugin"
	"devhost/host/plugin/trust"
	"devhost/host/signalk/skplugin"
)

// plugins builds the plugin host over the device's services and starts it. Bundles load in
// the background: the HTTP API answers before they are up.
func (d *Device) plugins(ctx context.Context, g *errgroup.Group) error {
	dir, err := trust.DevKeyDir()
	if err != nil {
		return fmt.Errorf("plugin trust keys: %w", err)
	}
	keys, err := trust.DevicePublicKeys(dir)
	if err != nil {
		return fmt.Errorf("plugin trust keys: %w", err)
	}
	hw := d.sim.Hardware()
	pm, err := plugin.New(plugin.Options{
		Dir: filepath.Join(d.opts.DataDir, "plugins"), TrustedKeys: keys,
		Clock: d.clk, Logger: d.ring.Logger("plugins"), PluginLogger: d.ring.Logger,
		Publish: d.hub.Publish, DeviceID: hw.DeviceID(),
		Config: plugin.DeviceConfig{Registry: d.rtns, Config: d.cfg},
		Health: pluginHealth{d.hlth},
		Router: d.srv,
		WallClock: func() (time.Time, string, bool) {
			t, src, synced := d.clock.Now()
			return t, src.String(), synced
		},
		GPIO:    simGPIO{d.sim},
		SignalK: skplugin.New(d.sk),
	})
	if err != nil {
		return fmt.Errorf("plugin host: %w", err)
	}
	if err := d.srv.HandleAll(pm.Routes()); err != nil {
		return err
	}
	d.hub.OnConnect(pm.Snapshot)
	d.cfg.OnChange(pm.ConfigChanged)
	g.Go(func() error { return pm.Run(ctx) })
	return nil
}

// pluginHealth lets plugins report through the health table with string states.
type pluginHealth struct{ r *health.Registry }

func (h pluginHealth) Report(key, state, message string) error {
	return h.r.Report(key, health.State(state), message)
}

func (h pluginHealth) ReportFatal(key, state, message string) error {
	return h.r.ReportFatal(key, health.State(state), message)
}

// simGPIO is the simulated board's pin bank as plugins see it: a missing pin is the ABI's
// not-found, any other refusal a pin fault.
type simGPIO struct{ s *board.Sim }

func (g simGPIO) Read(pin int) (bool, error) { return g.s.GPIORead(pin) }

func (g simGPIO) Write(pin int, high bool) error { return pinErr(g.s.GPIOWrite(pin, high)) }

func (g simGPIO) Watch(pin int, fn func(int, bool)) (func(), error) {
	cancel, err := g.s.GPIOWatch(pin, fn)
	return cancel, pinErr(err)
}

func pinErr(err error) error {
	if errors.Is(err, board.ErrNoPin) {
		return fmt.Errorf("%w: %w", abi.ErrNotFound, err)
	}
	return err
}
