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
	"devhost/host/plugin"
	"devhost/host/plugin/trust"
	"devhost/host/signalk/skplugin"
	"devhost/host/socketcan"
)

// plugins builds the plugin host over the device's services and starts it. Bundles load in
// the background, and the firmware's own bundles are offered in the background too: the
// HTTP API answers before they are up.
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
		Health: healthReporter{d.hlth},
		Router: d.srv,
		WallClock: func() (time.Time, string, bool) {
			t, src, synced := d.clock.Now()
			return t, src.String(), synced
		},
		GPIO:    simGPIO{d.sim},
		CAN:     boardCAN{d.canBus(ctx, g)},
		BLE:     simBLE{d.sim},
		SignalK: skplugin.New(d.sk),
		MDNS:    d.pluginMDNS(),
		Power:   pluginPower{d.power},

		Peripheral: simPeripheral{d.sim},
		WiFi:       pluginWiFi{d},
		Button:     pluginButton{d},
		PoP:        d.provPoP,
	})
	if err != nil {
		return fmt.Errorf("plugin host: %w", err)
	}
	d.pm = pm
	if err := d.srv.HandleAll(pm.Routes()); err != nil {
		return err
	}
	d.hub.OnConnect(pm.Snapshot)
	d.cfg.OnChange(pm.ConfigChanged)
	g.Go(func() error { return pm.Run(ctx) })
	d.offerBundled(ctx, g, pm)
	return nil
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
	switch {
	case errors.Is(err, board.ErrNoPin):
		return fmt.Errorf("%w: %w", abi.ErrNotFound, err)
	case errors.Is(err, board.ErrPinFault):
		return fmt.Errorf("%w: %w", abi.ErrIO, err)
	}
	return err
}

// canBus is the board's CAN bus: the simulated one (*board.Sim) or a SocketCAN interface
// (*socketcan.Bus).
type canBus interface {
	CANSend(f board.CANFrame) error
	CANReceive(fn func(board.CANFrame)) (cancel func(), err error)
}

// canBus answers the simulated bus, or, when the board file names a SocketCAN interface
// (can_iface), a bus on that interface whose reader runs in g until ctx ends. A missing or
// down interface is not an error here: the bus logs it, counts it and keeps reopening.
func (d *Device) canBus(ctx context.Context, g *errgroup.Group) canBus {
	iface := d.sim.CANIface()
	if iface == "" {
		return d.sim
	}
	bus := socketcan.New(socketcan.Options{Iface: iface, Clock: d.clk, Logger: d.ring.Logger("can"),
		Health: healthReporter{d.hlth}})
	g.Go(func() error { return bus.Run(ctx) })
	return bus
}

// boardCAN is the board's CAN bus as plugins see it: a frame the bus cannot carry is the
// ABI's invalid argument, any other failure a hardware fault.
type boardCAN struct{ bus canBus }

func (c boardCAN) Send(f plugin.CANFrame) error {
	err := c.bus.CANSend(board.CANFrame{ID: f.ID, Extended: f.Extended, Remote: f.Remote, Data: f.Data})
	if errors.Is(err, board.ErrFrame) {
		return fmt.Errorf("%w: %w", abi.ErrInvalid, err)
	}
	return err
}

func (c boardCAN) Receive(fn func(plugin.CANFrame)) (func(), error) {
	return c.bus.CANReceive(func(f board.CANFrame) {
		fn(plugin.CANFrame{ID: f.ID, Extended: f.Extended, Remote: f.Remote, Data: f.Data})
	})
}

// simBLE is the simulated board's BLE radio as plugins see it.
type simBLE struct{ s *board.Sim }

func (b simBLE) Advertise(data []byte) error {
	err := b.s.BLEAdvertise(data)
	if errors.Is(err, board.ErrFrame) {
		return fmt.Errorf("%w: %w", abi.ErrInvalid, err)
	}
	return err
}

func (b simBLE) StopAdvertising() error { return b.s.BLEStopAdvertising() }

func (b simBLE) Scan(fn func(plugin.BLEAdvert)) (func(), error) {
	return b.s.BLEScan(func(a board.BLEAdvert) {
		fn(plugin.BLEAdvert{Address: a.Address, RSSI: a.RSSI, Data: a.Data})
	})
}
