package device

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"devhost/host/clock"
	"devhost/host/netroute"
	"devhost/host/sntp"
)

// startSNTP builds the SNTP client over the device clock (source sntp) and runs it, polling
// from the first network-up. time.* SNTP keys are restart-required: read once here. The
// DHCP-offered server comes from the board when it reports its lease's NTP server
// (sntp.DHCPServer); a board without one offers none.
func (d *Device) startSNTP(ctx context.Context, g *errgroup.Group) error {
	cfg := sntp.Config{Enabled: d.cfg.Bool("time", "sntp"), FromDHCP: d.cfg.Bool("time", "from_dhcp"),
		Servers: []string{d.cfg.String("time", "server0"), d.cfg.String("time", "server1")}}
	dhcp, _ := any(d.sim).(sntp.DHCPServer)
	c, err := sntp.New(sntp.Options{Config: cfg, DHCP: dhcp, Clock: d.clk, Logger: d.ring.Logger("sntp"),
		Set: func(t time.Time) error { return d.clock.Set(clock.SourceSNTP, t) }})
	if err != nil {
		return fmt.Errorf("sntp: %w", err)
	}
	d.sntp = c
	cancel := d.net.Subscribe(func(e netroute.Edge) {
		if e == netroute.Down {
			c.NetworkDown()
			return
		}
		c.NetworkUp()
	})
	if d.net.Up() {
		c.NetworkUp()
	}
	g.Go(func() error { defer cancel(); return c.Run(ctx) })
	return nil
}
