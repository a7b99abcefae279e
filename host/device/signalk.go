package device

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"devhost/host/events"
	"devhost/host/netroute"
	"devhost/host/signalk"
	"devhost/host/skdiscovery"
	"devhost/host/skstream"
	"devhost/host/sktls"
)

// signalK builds the Signal K client from its parts (trust manager, stream, discovery, core)
// and starts what runs. The parts call each other through functions set here, after all of
// them exist.
func (d *Device) signalK(ctx context.Context, g *errgroup.Group) error {
	var client *signalk.Client
	gate := sktls.NewGate(sktls.GateOptions{Clock: d.clk, Memory: d.sim.Memory, Health: d.hlth, Logger: d.ring.Logger("tls")})
	trust, err := sktls.New(sktls.Options{Store: d.store, Config: d.cfg, Clock: d.clk, Logger: d.ring.Logger("tls"),
		Gate: gate, Publish: d.hub.Publish, OnRetry: func() { client.RetryNow() }})
	if err != nil {
		return fmt.Errorf("signal k trust: %w", err)
	}
	stream := skstream.New(skstream.Options{Clock: d.clk, Logger: d.ring.Logger("sk_ws"), Hostname: d.net.Status().Hostname,
		WallClock: d.clock.WallClock, Settings: d.streamSettings(),
		HTTP: func(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
			return client.HTTP(ctx, method, path, body)
		},
		OnStatus:       func(skstream.Status) { client.StreamStatus() },
		OnUnauthorized: func(skstream.Unauthorized) { client.StreamUnauthorized() },
		IsCertError:    sktls.IsCertError,
		OnCertError:    func(err error) { client.StreamCertError(err) },
	})
	d.cfg.OnChange(func(ns, key string) {
		if ns == "sk" || (ns == "wifi" && key == "backoff_max_s") {
			stream.SetSettings(d.streamSettings())
		}
	})

	netc := make(chan signalk.NetEvent, 16)
	var disc *skdiscovery.Discoverer
	opts := signalk.Options{Clock: d.clk, Logger: d.ring.Logger("sk"), Config: d.cfg, Store: d.store,
		Stream: signalk.StreamFrom(stream), TLS: signalk.TLSFrom(trust), Health: d.hlth, Events: d.hub,
		Time: d.clock, Net: netc, NetUp: d.net.Up,
		Hostname:  func() string { return d.net.Status().Hostname },
		Telemetry: d.telemetry, Snapshots: func() []events.Event { return []events.Event{trust.SnapshotEvent()} }}
	resp, err := d.startMDNS(ctx, g)
	if err != nil {
		return err
	}
	d.mdns = resp
	if resp != nil {
		adapter := signalk.NewDiscoveryAdapter()
		disc, err = skdiscovery.New(skdiscovery.Config{Browser: resp, LinkUp: d.net.Up, Clock: d.clk, Logger: d.ring.Logger("sk_disc"),
			Interval: func() time.Duration { return time.Duration(d.cfg.Int("sk", "discover_s")) * time.Second },
			OnChange: adapter.Notify})
		if err != nil {
			return fmt.Errorf("signal k discovery: %w", err)
		}
		adapter.D = disc
		opts.Discovery = adapter
		g.Go(func() error { return disc.Run(ctx) })
		cancel := d.net.Subscribe(func(e netroute.Edge) {
			if e == netroute.Down {
				resp.NetworkDown()
				return
			}
			_ = resp.NetworkChanged()
			disc.NetworkUp()
		})
		g.Go(func() error { <-ctx.Done(); cancel(); return nil })
	}
	client, err = signalk.New(opts)
	if err != nil {
		return fmt.Errorf("signal k client: %w", err)
	}
	d.sk = client
	d.skConnected = stream.Connected
	cancel := d.net.Subscribe(func(e netroute.Edge) {
		switch e {
		case netroute.Up:
			stream.NetworkUp()
			netc <- signalk.NetUp
		case netroute.Down:
			stream.NetworkDown()
			netc <- signalk.NetDown
		case netroute.Changed:
			stream.NetworkChanged()
			netc <- signalk.NetChanged
		}
	})
	g.Go(func() error { <-ctx.Done(); cancel(); return nil })
	if err := stream.Start(ctx); err != nil {
		return fmt.Errorf("signal k stream: %w", err)
	}
	g.Go(func() error { <-ctx.Done(); stream.Close(); return nil })
	g.Go(func() error { return client.Run(ctx) })
	if err := d.srv.HandleAll(client.Routes()); err != nil {
		return err
	}
	return d.srv.HandleAll(trust.Routes())
}

func (d *Device) streamSettings() skstream.Settings {
	return skstream.Settings{
		BatchMS: d.cfg.Int("sk", "batch_ms"), BufferMsgs: d.cfg.Int("sk", "buffer_msgs"),
		BufferKB: d.cfg.Int("sk", "buffer_kb"), DrainPerS: d.cfg.Int("sk", "drain_per_s"),
		WSEnabled: d.cfg.Bool("sk", "ws_enabled"), Timestamps: d.cfg.Bool("sk", "timestamps"),
		BackoffMaxS: d.cfg.Int("wifi", "backoff_max_s"),
	}
}

func (d *Device) telemetry() signalk.Telemetry {
	st := d.net.Status()
	return signalk.Telemetry{Uptime: d.sys.Uptime(), Memory: d.sim.Memory(), RSSI: st.RSSI,
		WiFiReconnects: max(d.wifi.Status().ConnectCount-1, 0), ResetReason: d.opts.Handoff.ResetReason}
}
