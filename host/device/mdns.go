package device

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"devhost/abi"
	"devhost/host/build"
	"devhost/host/mdns"
	"devhost/host/plugin"
)

// startMDNS builds the responder on the interfaces named at start (--mdns-iface), advertises
// the device's own services on it and keeps the host name in step with net.hostname. It
// returns nil without interfaces: the simulated board's network is the host's own, and mDNS
// must not leak onto a LAN it was not asked to use. Closing the responder at shutdown sends
// the goodbyes.
func (d *Device) startMDNS(ctx context.Context, g *errgroup.Group) (*mdns.Responder, error) {
	if len(d.opts.MDNSInterfaces) == 0 {
		return nil, nil
	}
	resp, err := mdns.New(mdns.Config{Hostname: d.net.Status().Hostname, Interfaces: d.opts.MDNSInterfaces,
		Clock: d.clk, Logger: d.ring.Logger("mdns")})
	if err != nil {
		return nil, fmt.Errorf("mdns: %w", err)
	}
	hw := d.sim.Hardware()
	info := mdns.DeviceInfo{Port: d.cfg.Int("httpd", "port"), Version: build.Version, App: build.App,
		Platform: build.PlatformVersion(), Target: hw.Chip, ID: hw.DeviceID()}
	if err := resp.Advertise(info); err != nil {
		_ = resp.Close()
		return nil, fmt.Errorf("mdns: %w", err)
	}
	if err := resp.Start(); err != nil {
		_ = resp.Close()
		return nil, fmt.Errorf("mdns: %w", err)
	}
	log := d.ring.Logger("mdns")
	d.cfg.OnChange(func(ns, key string) {
		if ns != "net" || key != "hostname" {
			return
		}
		// The host name and the services named after it say goodbye and probe again.
		if err := resp.SetHostname(d.net.Status().Hostname); err != nil {
			log.Warn("host name not advertised", "err", err)
		}
	})
	g.Go(func() error { <-ctx.Done(); return resp.Close() })
	return resp, nil
}

// pluginMDNS is the responder as plugins reach it (mdns_service); nil without mDNS, so the
// host function answers unavailable.
func (d *Device) pluginMDNS() plugin.MDNS {
	if d.mdns == nil {
		return nil
	}
	return appServices{d.mdns}
}

// appServices registers plugins' services in the responder's application slots and turns
// its errors into the ABI's.
type appServices struct{ r *mdns.Responder }

func (a appServices) Register(s abi.MDNSService) error {
	return abiErr(a.r.RegisterApp(mdns.Service{Instance: s.Instance, Type: s.Type, Proto: s.Proto, Port: int(s.Port), TXT: s.TXT}))
}

func (a appServices) UpdateTXT(instance, typ, proto string, txt []string) error {
	return abiErr(a.r.UpdateTXT(instance, typ, proto, txt))
}

func (a appServices) Unregister(instance, typ, proto string) error {
	return abiErr(a.r.Unregister(instance, typ, proto))
}

func abiErr(err error) error {
	var code abi.Errno
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mdns.ErrInvalid):
		code = abi.ErrInvalid
	case errors.Is(err, mdns.ErrNoSlot):
		code = abi.ErrLimit
	case errors.Is(err, mdns.ErrExists):
		code = abi.ErrConflict
	case errors.Is(err, mdns.ErrNotFound):
		code = abi.ErrNotFound
	case errors.Is(err, mdns.ErrClosed):
		code = abi.ErrState
	default:
		return err
	}
	return fmt.Errorf("%w: %w", code, err)
}
