package device

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"devhost/host/portal"
)

// The setup portal's wiring. The WiFi station manager decides when the portal is up and drives
// it through its PortalLink (Up, Down, Clients); until it is wired here, runPortal stands in for
// that decision with the one case a fresh device shows: the station has no network (or is
// disabled), so the portal is up from boot while wifi.portal_enabled allows it. Replacing
// runPortal by the manager's PortalLink is all the integration needs; newPortal, portalIP and
// probeAliases stay.

// newPortal builds the portal on the board's portal address. Call before the HTTP server takes
// its routes: the captive-portal probes are among them.
func (d *Device) newPortal() {
	hw := d.sim.Hardware()
	serve := func(ctx context.Context, ln net.Listener) error { return d.srv.Serve(ctx, ln) }
	if ip := net.ParseIP(d.opts.Listen); d.opts.Listen == "" || (ip != nil && ip.IsUnspecified()) {
		// The station listener holds the port on every address, the portal's included: a
		// listener of the portal's own cannot bind, and requests there already reach the
		// server (auth tells them apart by the local address while the portal is up).
		serve = nil
	}
	d.ap = portal.New(portal.Options{Clock: d.clk, Logger: d.ring.Logger("portal"), IP: hw.PortalIP,
		HTTPPort: func() int { return d.cfg.Int("httpd", "port") }, Serve: serve,
		Auth: authCheck{d.auth}, Health: healthReporter{d.hlth}})
}

// portalIP is auth's PortalIP: the portal address while the portal is up, "" otherwise.
func (d *Device) portalIP() string {
	if d.ap == nil {
		return ""
	}
	return d.ap.IP()
}

// probeAliases is the server's UI handler with the probes answered at the root too.
func (d *Device) probeAliases(ui http.Handler) http.Handler {
	return portal.RootProbes(func() http.Handler { return d.srv }, ui)
}

// portalWanted is the station's portal decision for a device without a station manager: up
// when no network has an SSID or the station is disabled, never when the portal is disabled.
func (d *Device) portalWanted() bool {
	if !d.cfg.Bool("wifi", "portal_enabled") {
		return false
	}
	if !d.cfg.Bool("wifi", "sta_enabled") {
		return true
	}
	for i := range 4 {
		if d.cfg.String("wifi", "ssid"+strconv.Itoa(i)) != "" {
			return false
		}
	}
	return true
}

// runPortal keeps the portal as portalWanted says, from boot until ctx ends; then it is down.
func (d *Device) runPortal(ctx context.Context) {
	changed := make(chan struct{}, 1)
	d.cfg.OnChange(func(ns, _ string) {
		if ns == "wifi" {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	})
	defer d.ap.Down()
	for {
		if d.portalWanted() {
			ssid := d.cfg.String("wifi", "portal_ssid")
			if ssid == "" {
				ssid = "dev-" + d.sim.Hardware().DeviceID()
			}
			up := d.ap.IP() != ""
			if err := d.ap.Up(ssid, d.cfg.String("wifi", "portal_psk")); err != nil {
				d.log.Warn("setup portal", "err", err)
			}
			if !up {
				fmt.Fprintf(d.opts.Stdout, "devhost: setup portal on %s\n", d.ap.RootURL())
			}
		} else {
			d.ap.Down()
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}
