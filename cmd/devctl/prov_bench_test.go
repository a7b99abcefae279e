package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"devhost/abi"
	"devhost/host/board"
	"devhost/host/device"
	"devhost/host/plugin"
	"devhost/plugins/ble/protocomm"
	"devhost/plugins/ble/prov"
	"devhost/plugins/ble/provclient"
	"devhost/plugins/ble/softap"
	"devhost/plugins/ble/softap/table"
)

// BenchmarkProvHandshakeSandbox is the provisioning handshake as a phone app sees it, the
// bundled ble plugin answering in the plugin host: per op a fresh client opens a session —
// proto-ver, then security 1's two exchanges (X25519 on both sides, PoP mixed in,
// AES-256-CTR set up) — and reads prov-config's status through it, the first encrypted
// exchange. softap posts to the plugin's portal-root routes over loopback HTTP (a new
// keep-alive connection and cookie jar per op); ble is the simulated board's central driven
// through its control channel as devctl prov drives it: connect, MTU exchange, discovery,
// the endpoints' user descriptions read, the exchanges as GATT writes and reads, disconnect.
// softap-native is softap's baseline: the plugin's own provisioning packages compiled into
// the benchmark and served natively, outside the sandbox. Reported per session in wall-clock
// ns/op and in process CPU ms (both sides of the exchange run in the process).
func BenchmarkProvHandshakeSandbox(b *testing.B) {
	for _, sub := range []string{"softap", "softap-native", "ble"} {
		b.Run(sub, func(b *testing.B) {
			host := func(scheme string) (plugin.Options, []byte) {
				opts, bundle := bleHostOptions(b, `{"prov":true,"prov_scheme":"`+scheme+`","gateway":false,"sensors":"[]"}`)
				opts.WiFi = provWiFi{}
				return opts, bundle
			}
			var open func() (protocomm.Exchange, func(), error)
			switch sub {
			case "softap":
				opts, bundle := host("softap")
				m := runHost(b, opts, bundle)
				open = softapSessions(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if !m.ServePortal(w, r) {
						http.NotFound(w, r)
					}
				}))
			case "softap-native":
				flow := prov.New(prov.Options{Scheme: prov.SchemeSoftAP, ServiceName: "PROV_0a0b0c", PoP: "abcd1234",
					Security: protocomm.Sec1, Store: func(string, string) error { return errNoStation },
					Station: func() prov.Station { return prov.Station{} }})
				flow.Start()
				b.Cleanup(flow.Stop)
				open = softapSessions(b, &softap.Server{Table: table.Table{Handler: flow.Handler}})
			case "ble":
				sim, err := board.NewSim(board.DefaultFile())
				if err != nil {
					b.Fatal(err)
				}
				opts, bundle := host("ble")
				opts.Peripheral = device.SimPeripheral(sim)
				runHost(b, opts, bundle)
				open = bleSessions(b, sim)
			}
			session := func() error {
				x, closeFn, err := open()
				if err != nil {
					return err
				}
				defer closeFn()
				c := &provclient.Client{X: x, Sec: protocomm.Sec1, PoP: []byte("abcd1234")}
				if _, err := c.Version(); err != nil {
					return err
				}
				if err := c.Handshake(); err != nil {
					return err
				}
				_, err = c.Status()
				return err
			}
			// The plugin starts provisioning once it has run its start: wait for a session.
			deadline := time.Now().Add(5 * time.Minute)
			for err := session(); err != nil; err = session() {
				if time.Now().After(deadline) {
					b.Fatalf("no provisioning session: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			n, cpu0 := 0, processCPU()
			for b.Loop() {
				if err := session(); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1e3/float64(n), "cpu-ms/session")
		})
	}
}

// softapSessions serves the provisioning endpoints h answers on a loopback listener, as the
// device's setup portal does, and opens each session as a fresh app client.
func softapSessions(b *testing.B, h http.Handler) func() (protocomm.Exchange, func(), error) {
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return func() (protocomm.Exchange, func(), error) {
		jar, err := cookiejar.New(nil)
		if err != nil {
			return nil, nil, fmt.Errorf("cookie jar: %w", err)
		}
		tr := &http.Transport{}
		return softap.Exchange(&http.Client{Jar: jar, Transport: tr, Timeout: 30 * time.Second}, srv.URL),
			tr.CloseIdleConnections, nil
	}
}

// bleSessions serves sim's control channel and opens each session as devctl prov does.
func bleSessions(b *testing.B, sim *board.Sim) func() (protocomm.Exchange, func(), error) {
	dir, err := os.MkdirTemp("", "provbench")
	if err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(dir, "board.sock")
	ln, err := board.Listen(sock)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	ctx := runUntilCleanup(b, func(ctx context.Context) error { return sim.ServeListener(ctx, ln) })
	c := board.Dial(sock)
	return func() (protocomm.Exchange, func(), error) { return bleExchange(ctx, c) }
}

// provWiFi is a station with no network configured, so the plugin provisions.
type provWiFi struct{}

func (provWiFi) Provision(string, string) error { return errNoStation }

func (provWiFi) Status() abi.WiFiStatus {
	return abi.WiFiStatus{State: "idle", MAC: "02:00:00:0a:0b:0c"}
}
func (provWiFi) Watch(func(abi.WiFiStatus)) func() { return func() {} }
func (provWiFi) Scan() ([]abi.WiFiAP, error)       { return nil, nil }
func (provWiFi) HoldPortal(string, bool)           {}
