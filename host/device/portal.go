package device

import (
	"context"
	"fmt"
	"net"
	"net/http"

	"devhost/host/portal"
)

// The setup portal's wiring. The WiFi station manager (host/wifi) decides when the portal is up
// and drives it through its PortalLink (Up, Down, Clients); host/portal is that link's network
// side: the listener on the portal address, DNS, DHCP and the captive-portal probes.

// newPortal builds the portal on the board's portal address (on its portal_iface when the
// board file names a real interface). Call before the HTTP server takes
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
	d.ap = portal.New(portal.Options{Clock: d.clk, Logger: d.ring.Logger("portal"), IP: hw.PortalIP, Iface: hw.PortalIface,
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

// announcedPortal is the portal as the station manager drives it: each time it comes up,
// the operator's console gets the address a phone on the portal network opens.
type announcedPortal struct{ d *Device }

func (p announcedPortal) Up(ssid, psk string) error {
	was := p.d.ap.IP() != ""
	if err := p.d.ap.Up(ssid, psk); err != nil {
		return err
	}
	if !was {
		fmt.Fprintf(p.d.opts.Stdout, "devhost: setup portal on %s\n", p.d.ap.RootURL())
	}
	return nil
}

// Down is called only once no plugin holds the portal (portal_hold, kept by the station
// manager, so that its status tells the truth while held).
func (p announcedPortal) Down() { p.d.ap.Down() }

func (p announcedPortal) Clients() int { return p.d.ap.Clients() }
