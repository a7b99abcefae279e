package device

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"devhost/host/api"
	"devhost/host/board"
	"devhost/host/events"
	"devhost/host/sk"
	"devhost/plugins/ble/gateway"
	"devhost/plugins/ble/prov"
)

// The BLE sensor gateway's wiring: while f_ble.gateway is on the board's scanner feeds
// plugins/ble/gateway, which publishes the configured sensors' values to Signal K; GET
// /ble/status and the `ble` event show scanning, the provisioning document and the devices
// heard. The decoders are plugins/ble/sensors, through gateway.Decode/Detect.

type bleGateway struct {
	gw *gateway.Gateway

	mu     sync.Mutex
	cancel func() // the scan running; nil when not scanning
}

// BLEStatus is the GET /ble/status document and the `ble` event.
type BLEStatus struct {
	Scanning bool             `json:"scanning"`
	Prov     prov.Doc         `json:"prov"`
	Devices  []gateway.Device `json:"devices"`
	Stats    gateway.Stats    `json:"stats"`
}

func (d *Device) newBLEGateway() {
	log := d.ring.Logger("ble")
	d.bleGW = &bleGateway{gw: gateway.New(gateway.Options{Now: d.clk.Now,
		Sensors: func() []gateway.Sensor {
			s, err := gateway.ParseSensors(d.cfg.String("f_ble", "sensors"))
			if err != nil {
				log.Warn("sensors table", "err", err)
			}
			return s
		},
		Publish: func(path string, v any) error {
			if d.sk == nil {
				return nil
			}
			return d.sk.Publish(sk.Value{Path: path, Value: skValue(v)})
		},
		Meta: func(path, units string) error {
			if d.sk == nil {
				return nil
			}
			meta, err := json.Marshal(map[string]string{"units": units})
			if err != nil {
				return fmt.Errorf("meta: %w", err)
			}
			return d.sk.DeclareMeta(path, meta, 0)
		}})}
	d.hub.OnConnect(func() []events.Event { return []events.Event{{Name: "ble", Data: d.bleStatus()}} })
	d.cfg.OnChange(func(ns, key string) {
		if ns == "f_ble" && key == "gateway" {
			d.bleScanFollow()
		}
	})
}

// skValue is a decoded value as the Signal K client takes it (numbers as float64).
func skValue(v any) any {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case uint8:
		return float64(x)
	case uint16:
		return float64(x)
	case uint32:
		return float64(x)
	case float32:
		return float64(x)
	}
	return v
}

// bleScanFollow starts or stops the scan as f_ble.gateway says.
func (d *Device) bleScanFollow() {
	g := d.bleGW
	want := d.cfg.Bool("f_ble", "gateway")
	g.mu.Lock()
	changed := want != (g.cancel != nil)
	switch {
	case want && g.cancel == nil:
		cancel, err := d.sim.BLEScan(func(a board.BLEAdvert) { g.gw.Advert(a.Address, a.RSSI, a.Data) })
		if err != nil {
			d.log.Warn("ble scan", "err", err)
			changed = false
		} else {
			g.cancel = cancel
		}
	case !want && g.cancel != nil:
		g.cancel()
		g.cancel = nil
	}
	g.mu.Unlock()
	if changed {
		d.hub.Publish("ble", d.bleStatus())
	}
}

func (d *Device) bleStatus() BLEStatus {
	g := d.bleGW
	g.mu.Lock()
	scanning := g.cancel != nil
	g.mu.Unlock()
	return BLEStatus{Scanning: scanning, Prov: d.prov.flow.Doc(), Devices: g.gw.Devices(), Stats: g.gw.Stats()}
}

// startBLE starts what f_ble asks for at boot: provisioning when unconfigured, the scan.
func (d *Device) startBLE() {
	d.startProvIfUnconfigured()
	d.bleScanFollow()
}

func (d *Device) bleRoutes() []api.Route {
	return []api.Route{{Method: http.MethodGet, Path: "/ble/status", Handler: func(w http.ResponseWriter, _ *http.Request) {
		api.WriteJSON(w, http.StatusOK, d.bleStatus())
	}, Doc: &api.Doc{Summary: "Bluetooth status",
		Description: "Whether the sensor scan runs, the provisioning document, the devices heard (newest first, at most 64) and the advert counters.",
		Response:    "{scanning, prov, devices: [{address, rssi, kind, decoded, last_seen_s}], stats: {heard, decoded, refused}}"}}}
}
