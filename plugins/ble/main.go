// Command ble is the Bluetooth plugin: ESP-IDF's unified provisioning (package prov over
// the BLE GATT transport gattprov or the SoftAP session table softap/table) and the BLE
// sensor gateway (package gateway with the decoders of package sensors), on ABI 1.2. It is
// built as a WebAssembly plugin:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o ble.wasm ./plugins/ble
//
// Provisioning runs when no WiFi network is configured (and on a press of the provisioning
// button) while f_ble.prov is true, over f_ble.prov_scheme: "ble" serves ESP-IDF's
// provisioning service on the board's BLE peripheral (one characteristic per protocomm
// endpoint, named by its user description) and advertises it, the service name in the scan
// response; "softap" serves the endpoints at the root of the setup portal. The credentials
// go into WiFi slot 0; the plugin holds the portal up from then until provisioning ends.
// The gateway scans while f_ble.gateway is true and publishes the sensors of the
// f_ble.sensors table to Signal K.
//
// The firmware carries it (BUNDLED_PLUGINS): the device installs it on first boot.
//
// GET /api/v1/prov is the provisioning document {active, got_credentials, service_name,
// pop, scheme}; GET /api/v1/ble/status and the retained SSE event ble are {scanning, prov,
// devices, stats}.
package main

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o ble.wasm .

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/abi"
	"devhost/plugins/ble/gateway"
	"devhost/plugins/ble/gattprov"
	"devhost/plugins/ble/protocomm"
	"devhost/plugins/ble/prov"
	"devhost/plugins/ble/softap/table"
	"devhost/sdk"
)

func init() { sdk.Register(newPlugin().handlers()) }

func main() {}

const eventBLE = "ble"

// Timer ids: the flow's timers take ids timerFirst..timerLast; timerClock ticks the clock
// while the scan runs.
const (
	timerFirst = 1
	timerLast  = 31
	timerClock = 32
)

// descriptor is f_ble.
const descriptor = `{"namespace": "f_ble", "version": 1, "title": "Bluetooth", "keys": [
 {"name": "prov", "type": "bool", "default": true, "title": "Provisioning when no WiFi network is configured"},
 {"name": "prov_scheme", "type": "string", "default": "ble", "enum": ["ble", "softap"], "title": "Provisioning transport"},
 {"name": "gateway", "type": "bool", "default": false, "title": "BLE sensor gateway"},
 {"name": "sensors", "type": "string", "default": "[]", "title": "BLE sensors",
  "x": {"format": "table", "columns": ["address", "kind", "key", "prefix"]}}]}`

// Status is the GET /ble/status document and the ble event.
type Status struct {
	Scanning bool             `json:"scanning"`
	Prov     prov.Doc         `json:"prov"`
	Devices  []gateway.Device `json:"devices"`
	Stats    gateway.Stats    `json:"stats"`
}

type plugin struct {
	cfg      sdk.Config
	flow     *prov.Flow
	gatt     *gattprov.Transport
	sap      *table.Table
	gw       *gateway.Gateway
	sensors  []gateway.Sensor
	station  prov.Station
	scanning bool
	served   string        // the transport up: a scheme, or ""
	uptime   time.Duration // the clock as last read, while the scan runs (ticking)
	held     bool          // the portal hold
	// restarting is set while configure stops and starts provisioning on a new scheme: the
	// stop in between is no reason to sleep.
	restarting bool
	hasBtn     bool // the board has the button
	timers     map[uint32]func()
	log        func(string)
}

func newPlugin() *plugin {
	return &plugin{timers: map[uint32]func(){}, log: func(s string) { _ = sdk.Log(sdk.LevelWarn, s) }}
}

func (p *plugin) handlers() *sdk.Plugin {
	return &sdk.Plugin{OnInit: p.start, OnConfig: p.reconfigure, OnTimer: p.timer, OnHTTP: p.serve,
		OnBLE: p.advert, OnGATT: p.gattEvent, OnPortal: p.portal, OnWiFi: p.wifi, OnButton: p.button}
}

func (p *plugin) start(sdk.Info) error {
	pop, err := sdk.ProvPoP()
	if err != nil {
		return err
	}
	st, err := sdk.WiFiStatusNow()
	if err != nil {
		return err
	}
	if err := sdk.RegisterNamespaceJSON([]byte(descriptor)); err != nil {
		return err
	}
	var cfg sdk.Config
	if cfg, err = sdk.GetConfig(); err != nil {
		return err
	}
	p.cfg = cfg
	p.station = stationOf(st)
	name, err := prov.ServiceName(st.MAC)
	if err != nil {
		return err
	}
	p.flow = prov.New(prov.Options{Clock: p, ServiceName: name, PoP: pop, Security: protocomm.Sec1,
		SchemeOf: func() string { return p.cfg.String("prov_scheme") },
		Store:    sdk.WiFiProvision, Scan: scan,
		Station: func() prov.Station { return p.station },
		Changed: p.provChanged})
	running := func(scheme string) func() *protocomm.Handler {
		return func() *protocomm.Handler {
			if doc := p.flow.Doc(); !doc.Active || doc.Scheme != scheme {
				return nil
			}
			return p.flow.Handler()
		}
	}
	p.gatt = &gattprov.Transport{Handler: running(prov.SchemeBLE), Gone: p.flow.ClientGone}
	p.sap = &table.Table{Handler: running(prov.SchemeSoftAP), Now: p.Now}
	p.gw = gateway.New(gateway.Options{Now: p.Now, Sensors: func() []gateway.Sensor { return p.sensors },
		Publish: sdk.Publish,
		Meta:    func(path, units string) error { return sdk.DeclareMeta(path, map[string]string{"units": units}) }})
	if err := sdk.WiFiWatch(true); err != nil {
		return err
	}
	// A board without the button provisions at boot only.
	err = sdk.ButtonWatch(true)
	if err != nil && !errors.Is(err, sdk.ErrUnavailable) {
		return err
	}
	p.hasBtn = err == nil
	p.configure(cfg)
	if cfg.Bool("prov") && !st.Configured {
		p.flow.Start()
	}
	p.emit()
	p.sleepIfIdle()
	return nil
}

// sleepIfIdle asks the host to close the plugin while it has nothing to do: the gateway
// off and no provisioning running or run by this instance (its outcome stays readable in
// GET /prov until the next boot). A change of gateway or prov wakes it, and while prov is
// on so do a press of the button and the station losing all its networks: what would start
// provisioning.
func (p *plugin) sleepIfIdle() {
	doc := p.flow.Doc()
	if p.cfg.Bool("gateway") || doc.Active || doc.GotCredentials {
		return
	}
	on := p.cfg.Bool("prov")
	w := sdk.Wake{Config: map[string]json.RawMessage{"gateway": json.RawMessage("false"), "prov": json.RawMessage(strconv.FormatBool(on))},
		Button: on && p.hasBtn, WiFiUnconfigured: on}
	if err := sdk.Dormant(w); err != nil {
		p.log("dormant: " + err.Error())
	}
}

// reconfigure is OnConfig: configure, then sleep if there is nothing left to do.
func (p *plugin) reconfigure(cfg sdk.Config) {
	p.configure(cfg)
	p.sleepIfIdle()
}

// configure follows f_ble: the sensors table, the scan, provisioning's switch and scheme.
func (p *plugin) configure(cfg sdk.Config) {
	old := p.cfg
	p.cfg = cfg
	s, err := gateway.ParseSensors(cfg.String("sensors"))
	if err != nil {
		p.log("sensors table: " + err.Error())
	}
	p.sensors = s
	if want := cfg.Bool("gateway"); want != p.scanning {
		if err := sdk.BLEScan(want); err != nil {
			p.log("ble scan: " + err.Error())
		} else {
			p.scanning = want
			p.tick(want)
			p.emit()
		}
	}
	if p.flow.Active() && (old.Bool("prov") != cfg.Bool("prov") || old.String("prov_scheme") != cfg.String("prov_scheme")) {
		// A new scheme restarts provisioning on it; prov off ends it.
		p.restarting = cfg.Bool("prov")
		p.flow.Stop()
		if p.restarting {
			p.flow.Start()
			p.restarting = false
		}
	}
}

func scan() ([]protocomm.AP, error) {
	aps, err := sdk.WiFiScan()
	if err != nil {
		return nil, err
	}
	out := make([]protocomm.AP, 0, len(aps))
	for _, a := range aps {
		out = append(out, prov.AP(a.SSID, a.BSSID, a.Channel, a.RSSI, a.Auth))
	}
	return out, nil
}

func stationOf(st abi.WiFiStatus) prov.Station {
	return prov.Station{State: st.State, Reason: st.Reason, IP: st.IP, SSID: st.SSID, BSSID: st.BSSID, Channel: st.Channel}
}

func (p *plugin) wifi(st abi.WiFiStatus) {
	p.station = stationOf(st)
	p.flow.StationChanged(p.station)
}

func (p *plugin) button(int) {
	if p.cfg.Bool("prov") {
		p.flow.Start()
	}
}

// provChanged brings the running scheme's transport up or down and holds the portal while
// the app has still to read the outcome through it.
func (p *plugin) provChanged(doc prov.Doc) {
	want := ""
	if doc.Active {
		want = doc.Scheme
	}
	if want != p.served {
		p.transport(p.served, false, doc.ServiceName)
		p.transport(want, true, doc.ServiceName)
		p.served = want
	}
	if hold := doc.Active && doc.GotCredentials; hold != p.held {
		if err := sdk.HoldPortal(hold); err != nil {
			p.log("portal hold: " + err.Error())
		}
		p.held = hold
	}
	p.emit()
	if !doc.Active && !p.restarting {
		p.sleepIfIdle()
	}
}

// transport brings one scheme's transport up or down.
func (p *plugin) transport(scheme string, up bool, name string) {
	var errs []error
	switch {
	case scheme == prov.SchemeBLE && up:
		svc := abi.GATTService{UUID: gattprov.ServiceUUID}
		for _, ep := range protocomm.Endpoints {
			svc.Chars = append(svc.Chars, abi.GATTChar{UUID: gattprov.CharUUID(ep), Props: abi.GATTPropRead | abi.GATTPropWrite, Description: ep})
		}
		errs = append(errs, sdk.GATTServe(svc), sdk.BLEAdvertise(gattprov.AdvertServiceData()),
			sdk.BLEScanResponse(gattprov.ScanResponseData(name)))
	case scheme == prov.SchemeBLE:
		errs = append(errs, sdk.GATTWithdraw(), sdk.BLEAdvertise(nil), sdk.BLEScanResponse(nil))
	case scheme == prov.SchemeSoftAP && up:
		errs = append(errs, sdk.PortalServe(abi.PortalPaths...))
	case scheme == prov.SchemeSoftAP:
		errs = append(errs, sdk.PortalServe())
	}
	if err := errors.Join(errs...); err != nil {
		p.log("provisioning transport " + scheme + ": " + err.Error())
	}
}

// gattEvent is the BLE transport: a request written to an endpoint's characteristic, its
// answer read back; the session ends with the connection.
func (p *plugin) gattEvent(ev abi.GATTEvent) sdk.GATTAnswer {
	ep := ""
	if int(ev.Char) < len(protocomm.Endpoints) {
		ep = protocomm.Endpoints[ev.Char]
	}
	switch ev.Op {
	case abi.GATTWrite:
		if ep == "" || p.gatt.Write(int(ev.Conn), ep, ev.Value) != nil {
			return sdk.GATTAnswer{ATT: attUnlikely}
		}
	case abi.GATTRead:
		v, err := p.gatt.Read(int(ev.Conn), ep)
		if ep == "" || err != nil {
			return sdk.GATTAnswer{ATT: attUnlikely}
		}
		return sdk.GATTAnswer{Value: v}
	case abi.GATTDisconnect:
		p.gatt.Disconnected(int(ev.Conn))
	}
	return sdk.GATTAnswer{}
}

// attUnlikely is the ATT error of a refused protocomm message.
const attUnlikely = 0x0e

// portal is the SoftAP transport.
func (p *plugin) portal(req abi.PortalRequest) sdk.PortalResponse {
	if req.Method != "POST" {
		return sdk.PortalResponse{Status: 405}
	}
	a, err := p.sap.Exchange(req.Conn, table.Cookie(req.Cookie), strings.TrimPrefix(req.Path, "/"), req.Body)
	if err != nil {
		return sdk.PortalResponse{Status: 404, ContentType: "text/plain; charset=utf-8", Body: []byte("404 page not found\n")}
	}
	resp := sdk.PortalResponse{Status: a.Status, Body: a.Body}
	if a.Status != 200 {
		resp.ContentType = "text/plain; charset=utf-8"
	}
	if a.SetCookie != "" {
		resp.SetCookie = table.CookieName + "=" + a.SetCookie + "; Path=/; HttpOnly"
	}
	return resp
}

func (p *plugin) advert(a abi.BLEAdvert) { p.gw.Advert(a.Addr, int(a.RSSI), a.Data) }

func (p *plugin) status() Status {
	return Status{Scanning: p.scanning, Prov: p.flow.Doc(), Devices: p.gw.Devices(), Stats: p.gw.Stats()}
}

// emit publishes the ble event, retained for new clients.
func (p *plugin) emit() {
	if err := sdk.Emit(eventBLE, p.status(), true); err != nil {
		p.log("ble event: " + err.Error())
	}
}

func (p *plugin) serve(req *sdk.Request) sdk.Response {
	switch req.Route {
	case "/prov":
		return sdk.JSONResponse(200, p.flow.Doc())
	case "/ble/status":
		return sdk.JSONResponse(200, p.status())
	}
	return sdk.ErrorResponse(404, "not_found")
}

// The flow's clock: the device's uptime, and the plugin's timers (the runtime offers no
// real sleep; a timer event runs the function).

// Now is the device's uptime as a time (monotonic, which is all the flow and the gateway
// compare). While the scan runs it is the clock read by the last tick, a second at most
// behind: the gateway stamps every advert, and a host call per advert would cost more than
// decoding it.
func (p *plugin) Now() time.Time {
	if p.scanning {
		return time.Unix(0, 0).Add(p.uptime)
	}
	return time.Unix(0, 0).Add(readUptime())
}

func readUptime() time.Duration {
	c, err := sdk.Now()
	if err != nil {
		return 0
	}
	return c.Uptime
}

// tick starts (on) or stops the clock's tick.
func (p *plugin) tick(on bool) {
	if !on {
		_ = sdk.CancelTimer(timerClock)
		return
	}
	p.uptime = readUptime()
	if err := sdk.SetTimer(timerClock, time.Second, time.Second); err != nil {
		p.log("clock tick: " + err.Error())
	}
}

// Since is the uptime elapsed since t.
func (p *plugin) Since(t time.Time) time.Duration { return p.Now().Sub(t) }

// AfterFunc runs f after d from a timer event.
func (p *plugin) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	t := &flowTimer{p: p, f: f}
	for id := uint32(timerFirst); id <= timerLast; id++ {
		if p.timers[id] == nil {
			t.id = id
			break
		}
	}
	t.Reset(d)
	return t
}

func (p *plugin) timer(id uint32) {
	if id == timerClock {
		p.uptime = readUptime()
		return
	}
	if f := p.timers[id]; f != nil {
		delete(p.timers, id)
		f()
	}
}

// flowTimer is one of the flow's timers; it has no channel (nothing waits on one here).
type flowTimer struct {
	p  *plugin
	id uint32 // 0: none free, the timer never fires
	f  func()
}

func (t *flowTimer) Chan() <-chan time.Time { return nil }

func (t *flowTimer) Reset(d time.Duration) bool {
	if t.id == 0 {
		t.p.log("no timer free for the provisioning flow")
		return false
	}
	_, was := t.p.timers[t.id]
	if err := sdk.SetTimer(t.id, d, 0); err != nil {
		t.p.log("timer: " + err.Error())
		return was
	}
	t.p.timers[t.id] = t.f
	return was
}

func (t *flowTimer) Stop() bool {
	if _, ok := t.p.timers[t.id]; !ok || t.id == 0 {
		return false
	}
	delete(t.p.timers, t.id)
	_ = sdk.CancelTimer(t.id)
	return true
}
