package mdns

import "fmt"

// DeviceInfo is what the device's own DNS-SD records carry (spec "mDNS records").
type DeviceInfo struct {
	Port     int    // httpd.port
	Version  string // app version
	App      string // app name
	Platform string // platform version
	Target   string // chip
	ID       string // device id
}

// DeviceServices are the device's own services: `_http._tcp` with `path=/` and `_dev._tcp`
// with every key of the spec's table, both on the HTTP port and named after the host (an
// empty instance). `auth=0` is fixed by the spec: /system/ping is the live answer.
func DeviceServices(info DeviceInfo) []Service {
	return []Service{
		{Type: "_http", Proto: "_tcp", Port: info.Port, TXT: []string{"path=/"}},
		{Type: "_dev", Proto: "_tcp", Port: info.Port, TXT: []string{
			"v=" + info.Version, "app=" + info.App, "dev=" + info.Platform, "target=" + info.Target,
			"id=" + info.ID, "api=/api/v1", "auth=0",
		}},
	}
}

// Advertise registers the device's own services; they take no application slot.
func (r *Responder) Advertise(info DeviceInfo) error {
	for _, s := range DeviceServices(info) {
		if err := r.Register(s); err != nil {
			return fmt.Errorf("advertise %s.%s on port %d: %w", s.Type, s.Proto, info.Port, err)
		}
	}
	return nil
}
