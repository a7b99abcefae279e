package device

import (
	"context"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"devhost/host/events"
	"devhost/host/wifi"
)

// wifiStation builds the WiFi station manager on the board's radio: it reports the station to
// the default route, publishes `wifi` and `wifi_scan`, and follows the wifi.* keys. The setup
// portal's network side (PortalLink) is wired in when host/portal provides it; without one
// the portal decision is still made and `portal.active` stays false.
func (d *Device) wifiStation(portal wifi.PortalLink) *wifi.Manager {
	hw := d.sim.Hardware()
	m := wifi.New(wifi.Options{Clock: d.clk, Logger: d.ring.Logger("wifi"), Radio: d.sim, Settings: d.wifiSettings,
		ID: hw.DeviceID(), Hostname: func() string { return d.cfg.String("net", "hostname") },
		Portal: portal, PortalIP: hw.PortalIP, Net: d.net.Report, Publish: d.wifiPublish})
	d.hub.OnConnect(func() []events.Event { name, st := m.OnConnect(); return []events.Event{{Name: name, Data: st}} })
	d.cfg.OnChange(func(ns, _ string) {
		if ns == "wifi" {
			m.ConfigChanged()
		}
	})
	return m
}

// runWiFi runs the station manager until ctx ends.
func runWiFi(ctx context.Context, g *errgroup.Group, m *wifi.Manager) {
	g.Go(func() error { return m.Run(ctx) })
}

// wifiSettings reads the wifi.* keys.
func (d *Device) wifiSettings() wifi.Settings {
	s := func(k string) string { return d.cfg.String("wifi", k) }
	secs := func(k string) time.Duration { return time.Duration(d.cfg.Int("wifi", k)) * time.Second }
	var nets [wifi.Slots]wifi.Network
	for i := range nets {
		n := strconv.Itoa(i)
		nets[i] = wifi.Network{SSID: s("ssid" + n), PSK: s("psk" + n), BSSID: s("bssid" + n)}
	}
	return wifi.Settings{Networks: nets, StaEnabled: d.cfg.Bool("wifi", "sta_enabled"),
		IPMode: s("ip_mode"), IP: s("ip"), Netmask: s("netmask"), Gateway: s("gateway"),
		PortalEnabled: d.cfg.Bool("wifi", "portal_enabled"), PortalSSID: s("portal_ssid"), PortalPSK: s("portal_psk"),
		PortalAfter: secs("portal_after_s"), BackoffMax: secs("backoff_max_s"),
		ConnectTimeout: secs("connect_tmo_s"), DHCPTimeout: secs("dhcp_tmo_s")}
}

// wifiPublish is the station manager's Publish: the `wifi` event also feeds the plugins
// watching the station (wifi_watch),
// and tells the firmware updater when the station has connected (a pending image marks
// itself valid then: spec "OTA image lifecycle").
func (d *Device) wifiPublish(name string, data any) {
	d.hub.Publish(name, data)
	st, ok := data.(wifi.Status)
	if !ok || name != "wifi" {
		return
	}
	d.wifiWatchers.tell(d.wifiStatusABI(st))
	if st.State == wifi.StateConnected && d.ota != nil {
		d.ota.StationConnected()
	}
}

// stationConfigured is the station as the firmware updater's confirmation rule sees it:
// enabled with at least one network.
type stationConfigured struct{ d *Device }

func (s stationConfigured) Configured() bool {
	st := s.d.wifiSettings()
	if !st.StaEnabled {
		return false
	}
	for _, n := range st.Networks {
		if n.SSID != "" {
			return true
		}
	}
	return false
}
