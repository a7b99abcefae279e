// Package gateway is the BLE sensor gateway's bookkeeping: every advertisement the scanner
// hears is listed (address, signal, kind, whether it decoded, age), newest first and
// bounded; an advertisement from a sensor configured in the f_ble sensors table is decoded
// by the sensor decoders (plugins/ble/sensors, reached through Decode) and its values
// published to Signal K at <prefix>.<path>, with the units declared once per path.
// Unknown advertisements are listed, never an error; a decode failure (bad length, bad
// MIC) is counted and the device is listed undecoded.
package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"devhost/plugins/ble/sensors"
)

// Value is one decoded reading.
type Value = sensors.Value

// Decode and Detect are the sensor decoders of plugins/ble/sensors; tests replace them to
// script a decoder's answers. While they are nil nothing decodes and every device is listed
// as heard.
var (
	Decode = func(kind, addr string, adv []byte, key string) ([]Value, error) {
		return sensors.Decode(sensors.Kind(kind), addr, adv, key)
	}
	Detect = func(adv []byte) string { return string(sensors.Detect(adv)) }
)

// ErrNoDecoder is a configured sensor while no decoders are linked in.
var ErrNoDecoder = errors.New("gateway: no sensor decoders in this build")

// Sensor is one row of the f_ble sensors table.
type Sensor struct {
	Address string `json:"address"`
	Kind    string `json:"kind"`
	Key     string `json:"key"`
	Prefix  string `json:"prefix"`
}

// ParseSensors reads the table key's JSON; rows are objects or arrays in column order
// (address, kind, key, prefix).
func ParseSensors(raw string) ([]Sensor, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, nil
	}
	var rows []json.RawMessage
	if err := json.Unmarshal([]byte(raw), &rows); err != nil {
		return nil, fmt.Errorf("gateway: sensors table: %w", err)
	}
	out := make([]Sensor, 0, len(rows))
	for i, r := range rows {
		var s Sensor
		if err := json.Unmarshal(r, &s); err != nil {
			var cols []string
			if err2 := json.Unmarshal(r, &cols); err2 != nil || len(cols) != 4 {
				return nil, fmt.Errorf("gateway: sensors row %d: want {address, kind, key, prefix}", i)
			}
			s = Sensor{Address: cols[0], Kind: cols[1], Key: cols[2], Prefix: cols[3]}
		}
		s.Address = strings.ToUpper(s.Address)
		if s.Address == "" || s.Prefix == "" {
			return nil, fmt.Errorf("gateway: sensors row %d: address and prefix are required", i)
		}
		out = append(out, s)
	}
	return out, nil
}

// MaxDevices bounds the devices listed.
const MaxDevices = 64

// Device is one entry of GET /ble/status `devices`.
type Device struct {
	Address   string `json:"address"`
	RSSI      int    `json:"rssi"`
	Kind      string `json:"kind"`
	Decoded   bool   `json:"decoded"`
	LastSeenS int64  `json:"last_seen_s"`

	seen time.Time
}

// Options wire a gateway.
type Options struct {
	Now     func() time.Time
	Sensors func() []Sensor
	// Publish sends values to Signal K; Meta declares a path's units (once per path).
	Publish func(path string, value any) error
	Meta    func(path, units string) error
}

// Stats counts adverts.
type Stats struct {
	Heard   uint64 `json:"heard"`
	Decoded uint64 `json:"decoded"`
	Refused uint64 `json:"refused"` // configured sensors whose advert did not decode
}

// Gateway is the list of devices heard. Its methods are safe for concurrent use.
type Gateway struct {
	opts Options

	mu      sync.Mutex
	devices []Device // newest first
	metaed  map[string]bool
	stats   Stats
}

// New builds a gateway.
func New(opts Options) *Gateway {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Gateway{opts: opts, metaed: map[string]bool{}}
}

// Advert handles one advertisement heard.
func (g *Gateway) Advert(addr string, rssi int, adv []byte) {
	addr = strings.ToUpper(addr)
	var sensor *Sensor
	if g.opts.Sensors != nil {
		for _, s := range g.opts.Sensors() {
			if s.Address == addr {
				sensor = &s
				break
			}
		}
	}
	kind := ""
	if sensor != nil && sensor.Kind != "" {
		kind = sensor.Kind
	} else if Detect != nil {
		kind = Detect(adv)
	}
	var values []Value
	decoded := false
	var err error
	if sensor != nil {
		if Decode == nil {
			err = ErrNoDecoder
		} else {
			values, err = Decode(kind, addr, adv, sensor.Key)
		}
		decoded = err == nil
	}
	g.mu.Lock()
	g.stats.Heard++
	switch {
	case decoded:
		g.stats.Decoded++
	case sensor != nil:
		g.stats.Refused++
	}
	g.listLocked(Device{Address: addr, RSSI: rssi, Kind: kind, Decoded: decoded, seen: g.opts.Now()})
	var metas []Value
	for _, v := range values {
		p := sensor.Prefix + "." + v.Path
		if v.Units != "" && !g.metaed[p] {
			g.metaed[p] = true
			metas = append(metas, Value{Path: p, Units: v.Units})
		}
	}
	g.mu.Unlock()
	for _, m := range metas {
		if g.opts.Meta != nil {
			_ = g.opts.Meta(m.Path, m.Units) // a refused declaration leaves the values flowing
		}
	}
	for _, v := range values {
		if g.opts.Publish != nil {
			_ = g.opts.Publish(sensor.Prefix+"."+v.Path, v.Value) // a stream down buffers or drops, its business
		}
	}
}

func (g *Gateway) listLocked(d Device) {
	g.devices = slices.DeleteFunc(g.devices, func(x Device) bool { return x.Address == d.Address })
	g.devices = slices.Insert(g.devices, 0, d)
	if len(g.devices) > MaxDevices {
		g.devices = g.devices[:MaxDevices]
	}
}

// Devices lists the devices heard, newest first, with their age.
func (g *Gateway) Devices() []Device {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.opts.Now()
	out := make([]Device, len(g.devices))
	for i, d := range g.devices {
		d.LastSeenS = int64(now.Sub(d.seen) / time.Second)
		out[i] = d
	}
	return out
}

// Stats returns the counters.
func (g *Gateway) Stats() Stats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats
}
