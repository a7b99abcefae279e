package device

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"devhost/host/build"
	"devhost/host/events"
	"devhost/host/netroute"
	"devhost/host/ota"
	"devhost/host/ota/image"
	"devhost/host/signalk"
	"devhost/host/wifi"
)

// otaUpdater builds the firmware updater, registers its routes and event, feeds it the
// network edges and starts it. A pending image confirms when the WiFi station connects
// (wifiPublish), or after 60 s of uptime when no station is configured or enabled.
func (d *Device) otaUpdater(ctx context.Context, g *errgroup.Group, started time.Time) error {
	keys := func() ([]*rsa.PublicKey, error) {
		key, err := image.DeviceKey()
		if err != nil {
			return nil, fmt.Errorf("firmware key: %w", err)
		}
		return []*rsa.PublicKey{key}, nil
	}
	var src ota.ManifestSource
	if d.sk != nil {
		src = skManifest{d.sk}
	}
	u, err := ota.New(ota.Options{Clock: d.clk, Logger: d.ring.Logger("ota"), DataDir: d.opts.DataDir,
		Slot: d.opts.Handoff.Slot, Project: build.App, Version: build.Version, Target: d.sim.Hardware().Chip,
		Keys: keys, Config: d.cfg, SignalK: src, Publish: d.hub.Publish, Station: stationConfigured{d},
		Restart:       func(delay time.Duration) { d.restartAfter(ExitReboot, false, delay) },
		Uptime:        func() time.Duration { return d.clk.Since(started) },
		ConfirmUptime: d.opts.OTAConfirmUptime})
	if err != nil {
		return err
	}
	d.ota = u
	d.hub.OnConnect(func() []events.Event { name, st := u.OnConnect(); return []events.Event{{Name: name, Data: st}} })
	if err := d.srv.HandleAll(u.Routes()); err != nil {
		return fmt.Errorf("routes: %w", err)
	}
	if d.net.Up() {
		u.NetworkUp()
	}
	if d.wifi.Status().State == wifi.StateConnected {
		u.StationConnected()
	}
	cancel := d.net.Subscribe(func(e netroute.Edge) {
		switch e {
		case netroute.Up, netroute.Changed:
			u.NetworkUp()
		case netroute.Down:
			u.NetworkDown()
		}
	})
	g.Go(func() error { defer cancel(); u.Run(ctx); return nil })
	return nil
}

// skManifest fetches the OTA manifest from the Signal K server through the client's HTTP
// helper (its token, limits and TLS trust).
type skManifest struct{ c *signalk.Client }

func (s skManifest) FetchManifest(ctx context.Context, path string) ([]byte, string, error) {
	srv := s.c.Server()
	if srv == nil {
		return nil, "", errors.New("no Signal K server")
	}
	status, body, err := s.c.HTTP(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, "", fmt.Errorf("signal k manifest: %w", err)
	}
	if status != http.StatusOK {
		return nil, "", fmt.Errorf("signal k manifest: HTTP %d", status)
	}
	scheme := srv.Scheme
	if scheme == "" {
		scheme = "http"
	}
	return body, scheme + "://" + net.JoinHostPort(srv.Host, strconv.Itoa(srv.Port)) + path, nil
}
