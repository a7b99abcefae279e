package device

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"devhost/host/api"
	"devhost/host/board"
	"devhost/host/config"
	"devhost/host/wifi"
	"devhost/plugins/ble/gattprov"
	"devhost/plugins/ble/protocomm"
	"devhost/plugins/ble/prov"
	"devhost/plugins/ble/softap"
	"devhost/plugins/ble/softap/table"
)

// Provisioning's wiring: the flow (plugins/ble/prov) over the transport f_ble.prov_scheme
// names: BLE GATT (plugins/ble/gattprov) on the board's peripheral role, advertising the
// service name, or SoftAP (plugins/ble/softap) at the root of the setup portal's listener;
// the credentials into WiFi slot 0; GET /prov. The f_ble namespace (prov, prov_scheme) is
// registered here while the BLE plugin that will own it is not bundled.

// Files in the data directory: the device secret the PoP derives from (made on first boot)
// and the device label printed on the simulated board's case.
const (
	secretFile = "device-secret"
	labelFile  = "device-label.txt"
)

type provisioning struct {
	flow *prov.Flow
	sap  *softap.Server
	gatt *gattprov.Transport

	mu     sync.Mutex
	served bool // the GATT table and the advertisement are up
}

// bleNamespace is f_ble as far as provisioning reads it.
func bleNamespace() config.Namespace {
	return config.Namespace{Name: "f_ble", Version: 1, Title: "Bluetooth", Keys: []config.Key{
		{Name: "prov", Type: config.TypeBool, Default: true, Title: "Provisioning when no WiFi network is configured"},
		{Name: "prov_scheme", Type: config.TypeString, Default: prov.SchemeBLE, Enum: []string{prov.SchemeBLE, prov.SchemeSoftAP},
			Title: "Provisioning transport"},
		{Name: "gateway", Type: config.TypeBool, Default: false, Title: "BLE sensor gateway"},
		{Name: "sensors", Type: config.TypeString, Default: "[]", Title: "BLE sensors",
			X: &config.X{Format: config.FormatTable, Columns: []string{"address", "kind", "key", "prefix"}}},
	}}
}

// newProv builds the flow; it runs when started (no network configured, a button press).
func (d *Device) newProv() error {
	hw := d.sim.Hardware()
	secret, err := deviceSecret(d.opts.DataDir)
	if err != nil {
		return err
	}
	name, err := prov.ServiceName(hw.MAC)
	if err != nil {
		return err
	}
	pop := prov.PoPFromSecret(secret)
	label := fmt.Sprintf("device: dev-%s\nservice_name: %s\npop: %s\n", hw.DeviceID(), name, pop)
	if err := os.WriteFile(filepath.Join(d.opts.DataDir, labelFile), []byte(label), 0o600); err != nil {
		return fmt.Errorf("device label: %w", err)
	}
	if err := d.cfg.Register(bleNamespace()); err != nil {
		return fmt.Errorf("register f_ble: %w", err)
	}
	log := d.ring.Logger("prov")
	flow := prov.New(prov.Options{Clock: d.clk, ServiceName: name, PoP: pop, Security: protocomm.Sec1,
		SchemeOf: func() string { return d.cfg.String("f_ble", "prov_scheme") },
		Store:    d.storeCredentials,
		Scan:     d.provScan,
		Station:  func() prov.Station { return stationOf(d.wifi.Status()) },
		Changed: func(doc prov.Doc) {
			log.Info("provisioning", "active", doc.Active, "got_credentials", doc.GotCredentials, "scheme", doc.Scheme)
			d.provTransport(doc, name, log)
			if d.bleGW != nil {
				d.hub.Publish("ble", d.bleStatus())
			}
		}})
	running := func(scheme string) func() *protocomm.Handler {
		return func() *protocomm.Handler {
			if doc := flow.Doc(); !doc.Active || doc.Scheme != scheme {
				return nil
			}
			return flow.Handler()
		}
	}
	d.prov = &provisioning{flow: flow, sap: &softap.Server{Table: table.Table{Handler: running(prov.SchemeSoftAP)}},
		gatt: &gattprov.Transport{Handler: running(prov.SchemeBLE), Gone: flow.ClientGone}}
	d.cfg.OnChange(func(ns, key string) {
		if ns != "f_ble" || (key != "prov" && key != "prov_scheme") || !flow.Active() {
			return
		}
		// A new scheme restarts provisioning on it; prov off ends it.
		flow.Stop()
		if d.provWanted() {
			flow.Start()
		}
	})
	return nil
}

// provTransport brings the running scheme's transport up or down with provisioning.
func (d *Device) provTransport(doc prov.Doc, name string, log *slog.Logger) {
	p := d.prov
	p.mu.Lock()
	defer p.mu.Unlock()
	want := doc.Active && doc.Scheme == prov.SchemeBLE
	if want == p.served {
		// A change within one provisioning (credentials arrived) keeps the connections.
		if !doc.Active {
			d.provStopped()
		}
		return
	}
	p.served = want
	if want {
		svc := &board.GATTService{UUID: gattprov.ServiceUUID, Disconnected: d.prov.gatt.Disconnected}
		for _, ep := range protocomm.Endpoints {
			svc.Chars = append(svc.Chars, board.GATTChar{UUID: gattprov.CharUUID(ep), Description: ep,
				Read:  func(conn int) ([]byte, error) { return d.prov.gatt.Read(conn, ep) },
				Write: func(conn int, v []byte) error { return d.prov.gatt.Write(conn, ep, v) }})
		}
		d.sim.GATTServe(svc)
		if err := d.sim.BLEAdvertise(gattprov.AdvertData(name)); err != nil {
			log.Warn("advertise", "err", err)
		}
		return
	}
	d.sim.GATTServe(nil)
	if err := d.sim.BLEStopAdvertising(); err != nil {
		log.Warn("stop advertising", "err", err)
	}
	if !doc.Active {
		d.provStopped()
	}
}

// provWanted is f_ble.prov.
func (d *Device) provWanted() bool { return d.cfg.Bool("f_ble", "prov") }

// startProvIfUnconfigured starts provisioning at boot when no WiFi network is configured.
func (d *Device) startProvIfUnconfigured() {
	if !d.provWanted() {
		return
	}
	if !d.wifiConfigured() {
		d.prov.flow.Start()
	}
}

// provRoot serves the provisioning endpoints at the root, on the portal network only;
// everything else goes to next.
func (d *Device) provRoot(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.prov != nil && softap.IsEndpoint(r.URL.Path) && d.ap.FromPortal(r) && d.prov.flow.Doc().Scheme == prov.SchemeSoftAP {
			d.prov.sap.ServeHTTP(w, r)
			return
		}
		// A plugin's portal routes (portal_serve), on the portal network only.
		if d.pm != nil && d.ap.FromPortal(r) && d.pm.ServePortal(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// provRoutes is GET /prov.
func (d *Device) provRoutes() []api.Route {
	return []api.Route{{Method: http.MethodGet, Path: "/prov", Handler: func(w http.ResponseWriter, _ *http.Request) {
		api.WriteJSON(w, http.StatusOK, d.prov.flow.Doc())
	}, Doc: &api.Doc{Summary: "Provisioning",
		Description: "Whether provisioning runs, whether credentials arrived, the service name, the proof of possession and the transport scheme.",
		Response:    "{active, got_credentials, service_name, pop, scheme}"}}}
}

// provHoldsPortal reports whether provisioning keeps the portal up: once the credentials
// arrived, the station manager takes the portal down as the station connects, and the app
// still has to read the outcome through it. Before that the manager's decision stands.
func (d *Device) provHoldsPortal() bool {
	if d.prov == nil {
		return false
	}
	doc := d.prov.flow.Doc()
	return (doc.Active && doc.GotCredentials) || len(d.portalHolds) > 0
}

// provStopped takes the portal down if the station manager wanted it down meanwhile.
func (d *Device) provStopped() {
	d.portalMu.Lock()
	down := d.portalDownHeld
	d.portalDownHeld = false
	d.portalMu.Unlock()
	if down {
		d.ap.Down()
	}
}

// provScan is prov-scan's scan on the board's radio.
func (d *Device) provScan() ([]protocomm.AP, error) {
	res, err := d.sim.Scan()
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	out := make([]protocomm.AP, 0, len(res))
	for _, r := range res {
		out = append(out, prov.AP(r.SSID, r.BSSID, r.Channel, r.RSSI, r.Auth))
	}
	return out, nil
}

func stationOf(st wifi.Status) prov.Station {
	out := prov.Station{State: st.State, Reason: st.Reason.Code}
	if st.IP != nil {
		out.IP = *st.IP
	}
	if st.SSID != nil {
		out.SSID = *st.SSID
	}
	if st.BSSID != nil {
		out.BSSID = *st.BSSID
	}
	if st.Channel != nil {
		out.Channel = *st.Channel
	}
	return out
}

// deviceSecret reads the device secret, making it on first boot (the factory's job on a
// real board).
func deviceSecret(dir string) ([]byte, error) {
	path := filepath.Join(dir, secretFile)
	b, err := os.ReadFile(path)
	if err == nil && len(b) == 32 {
		return b, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("device secret: %w", err)
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("device secret: %w", err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, fmt.Errorf("device secret: %w", err)
	}
	return b, nil
}

// provButton starts provisioning on a button press (the presence event).
func (d *Device) provButton(ev board.Event) {
	if ev.Presence > 0 && d.prov != nil && d.provWanted() {
		d.prov.flow.Start()
	}
}
