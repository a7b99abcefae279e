package main

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"devhost/abi"
	"devhost/host/plugin"
	"devhost/plugins"
)

// BenchmarkBLEAdvertsSandbox is the sensor gateway's throughput through the Wasm sandbox:
// BTHome adverts of a configured sensor, heard by the board's scan, decoded by the ble
// plugin and published, in adverts per CPU second of the whole process (the plugin host's
// queueing and the Signal K hand-off included; the start left out). Goal: at least 20,000/s.
func BenchmarkBLEAdvertsSandbox(b *testing.B) {
	radio, router := &scanRadio{}, &captureRouter{}
	opts, bundle := bleHostOptions(b, `{"prov":false,"prov_scheme":"ble","gateway":true,`+
		`"sensors":"[{\"address\":\"A4:C1:38:00:00:01\",\"kind\":\"bthome\",\"key\":\"\",\"prefix\":\"environment.cabin\"}]"}`)
	opts.Router, opts.BLE, opts.WiFi = router, radio, benchWiFi{}
	m := runHost(b, opts, bundle)

	heard := func() (uint64, bool) {
		h := router.handler("GET", "/ble/status")
		if h == nil {
			return 0, false
		}
		rec := httptest.NewRecorder()
		h(rec, httptest.NewRequest("GET", "/api/v1/ble/status", nil))
		var st struct {
			Stats struct{ Heard, Decoded uint64 } `json:"stats"`
		}
		if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &st) != nil {
			return 0, false
		}
		return st.Stats.Decoded, true
	}
	waitFor := func(want uint64) {
		deadline := time.Now().Add(5 * time.Minute)
		for {
			if n, ok := heard(); ok && n >= want && radio.scanning() {
				return
			}
			if s, ok := m.Status("ble"); ok && (s.State == plugin.StateFailed || s.State == plugin.StateDisabled) {
				b.Fatalf("plugin %s: %v", s.State, s.LastError)
			}
			if time.Now().After(deadline) {
				b.Fatal("the plugin did not take the adverts")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(0)
	// BTHome v2: temperature 25.00 °C and humidity 50.55 %.
	adv := []byte{0x02, 0x01, 0x06, 0x0a, 0x16, 0xd2, 0xfc, 0x40, 0x02, 0xc4, 0x09, 0x03, 0xbf, 0x13}
	const chunk = 2000
	b.ResetTimer()
	cpu0 := processCPU()
	sent := uint64(0)
	for i := 0; i < b.N; i++ {
		for j := 0; j < chunk; j++ {
			radio.deliver(plugin.BLEAdvert{Address: "A4:C1:38:00:00:01", RSSI: -60, Data: adv})
		}
		sent += chunk
		waitFor(sent)
	}
	cpu := processCPU() - cpu0
	b.ReportMetric(float64(sent)/cpu.Seconds(), "adverts/cpu-s")
}

// bleHostOptions is a plugin host's options for the bundled ble plugin with config, and the
// plugin's bundle, built and signed with a key made for the run (which the host trusts).
func bleHostOptions(b *testing.B, config string) (plugin.Options, []byte) {
	dir := b.TempDir()
	wasmPath := filepath.Join(dir, "ble.wasm")
	if err := plugins.Build(context.Background(), "ble", wasmPath); err != nil {
		b.Fatal(err)
	}
	wasm, err := os.ReadFile(wasmPath)
	if err != nil {
		b.Fatal(err)
	}
	bundle, key, err := packFresh("ble", wasm)
	if err != nil {
		b.Fatal(err)
	}
	return plugin.Options{
		Dir: filepath.Join(dir, "plugins"), TrustedKeys: []*rsa.PublicKey{&key.PublicKey},
		Logger: slog.New(slog.DiscardHandler), Publish: func(string, any) {}, DeviceID: "bench",
		Config:    &fixedConfig{values: json.RawMessage(config)},
		WallClock: func() (time.Time, string, bool) { return time.Now(), "manual", true },
		SignalK:   discardSK{},
		PoP:       func() (string, error) { return "abcd1234", nil },
		Router:    &captureRouter{}, CallTimeout: 30 * time.Second,
	}, bundle
}

// runHost starts a plugin host with bundle installed, until the benchmark ends.
func runHost(b *testing.B, opts plugin.Options, bundle []byte) *plugin.Manager {
	m, err := plugin.New(opts)
	if err == nil {
		_, err = m.Install(bundle, nil)
	}
	if err != nil {
		b.Fatal(err)
	}
	runUntilCleanup(b, m.Run)
	return m
}

// packFresh packs plugin id's module with a key made for the run.
func packFresh(id string, wasm []byte) ([]byte, *rsa.PrivateKey, error) {
	key, err := abi.GenerateKey()
	if err != nil {
		return nil, nil, err
	}
	_, man, err := plugins.Manifest(id)
	if err != nil {
		return nil, nil, err
	}
	bundle, err := abi.Pack(man, wasm, key)
	return bundle, key, err
}

// scanRadio is the board's BLE radio: the scan the plugin starts, fed by the benchmark.
type scanRadio struct {
	fn atomic.Pointer[func(plugin.BLEAdvert)]
}

func (r *scanRadio) Advertise([]byte) error { return nil }
func (r *scanRadio) StopAdvertising() error { return nil }

func (r *scanRadio) Scan(fn func(plugin.BLEAdvert)) (func(), error) {
	r.fn.Store(&fn)
	return func() { r.fn.Store(nil) }, nil
}

func (r *scanRadio) scanning() bool { return r.fn.Load() != nil }

// deliver is an advert heard; the scan's function only queues it for the plugin.
func (r *scanRadio) deliver(a plugin.BLEAdvert) {
	if fn := r.fn.Load(); fn != nil {
		(*fn)(a)
	}
}

// benchWiFi is a station with a network configured: the plugin does not provision.
type benchWiFi struct{}

func (benchWiFi) Provision(string, string) error { return errNoStation }

var errNoStation = errors.New("bench: no station")

func (benchWiFi) Status() abi.WiFiStatus {
	return abi.WiFiStatus{Configured: true, State: "connected", MAC: "02:00:00:0a:0b:0c"}
}
func (benchWiFi) Watch(func(abi.WiFiStatus)) func() { return func() {} }
func (benchWiFi) Scan() ([]abi.WiFiAP, error)       { return nil, nil }
func (benchWiFi) HoldPortal(string, bool)           {}
