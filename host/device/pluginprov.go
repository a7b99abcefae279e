package device

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"devhost/abi"
	"devhost/host/board"
	"devhost/host/plugin"
	"devhost/host/wifi"
)

// What a provisioning plugin (the bundled ble) drives through ABI minor 2: the board's BLE
// peripheral role (simPeripheral), the station manager's slot 0, state and scan and the
// setup portal's hold (pluginWiFi), the provisioning button (pluginButton), the device's
// proof of possession, and the portal-root paths (portalRoot).

// Files in the data directory: the device secret the PoP derives from (made on first boot)
// and the device label printed on the simulated board's case.
const (
	secretFile = "device-secret"
	labelFile  = "device-label.txt"
)

// watchers is a set of callbacks told of a value, each until its cancel.
type watchers[T any] struct {
	mu  sync.Mutex
	fns []*func(T)
}

func (w *watchers[T]) add(fn func(T)) (cancel func()) {
	key := &fn
	w.mu.Lock()
	w.fns = append(w.fns, key)
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		w.fns = slices.DeleteFunc(w.fns, func(f *func(T)) bool { return f == key })
		w.mu.Unlock()
	}
}

func (w *watchers[T]) tell(v T) {
	w.mu.Lock()
	fns := slices.Clone(w.fns)
	w.mu.Unlock()
	for _, fn := range fns {
		(*fn)(v)
	}
}

// simPeripheral is the simulated board's GATT server role as plugins see it.
type simPeripheral struct{ s *board.Sim }

// SimPeripheral is sim's GATT server role as the plugin host takes it: the device wires it,
// and so do benchmarks that run a provisioning plugin on a simulated board of their own.
func SimPeripheral(sim *board.Sim) plugin.Peripheral { return simPeripheral{sim} }

func (p simPeripheral) Serve(svc *plugin.PeripheralService) error {
	if svc == nil {
		p.s.GATTServe(nil)
		return nil
	}
	out := &board.GATTService{UUID: svc.UUID, Connected: svc.Connected, MTU: svc.MTU, Disconnected: svc.Disconnected}
	for i, c := range svc.Chars {
		ch := board.GATTChar{UUID: c.UUID, Description: c.Description, Notify: c.Props&abi.GATTPropNotify != 0}
		if c.Props&abi.GATTPropRead != 0 {
			ch.Read = func(conn int) ([]byte, error) {
				v, err := svc.Read(conn, i)
				return v, boardATT(err)
			}
		}
		if c.Props&abi.GATTPropWrite != 0 {
			ch.Write = func(conn int, v []byte) error { return boardATT(svc.Write(conn, i, v)) }
		}
		out.Chars = append(out.Chars, ch)
	}
	p.s.GATTServe(out)
	return nil
}

// boardATT carries the plugin's ATT error code to the central.
func boardATT(err error) error {
	var a plugin.ATTError
	if errors.As(err, &a) {
		return &board.ATTError{Code: int(a)}
	}
	return err
}

func (p simPeripheral) Notify(char int, value []byte) (int, error) {
	n, err := p.s.GATTNotify(board.CharHandle(char), value)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", abi.ErrInvalid, err)
	}
	return n, nil
}

func (p simPeripheral) ScanResponse(data []byte) error { return p.s.BLEScanResponse(data) }

// pluginWiFi is the station manager as a provisioning plugin drives it.
type pluginWiFi struct{ d *Device }

func (w pluginWiFi) Provision(ssid, psk string) error { return w.d.storeCredentials(ssid, psk) }

func (w pluginWiFi) Status() abi.WiFiStatus { return w.d.wifiStatusABI(w.d.wifi.Status()) }

func (w pluginWiFi) Watch(fn func(abi.WiFiStatus)) func() { return w.d.wifiWatchers.add(fn) }

func (w pluginWiFi) Scan() ([]abi.WiFiAP, error) {
	res, err := w.d.sim.Scan()
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	out := make([]abi.WiFiAP, 0, len(res))
	for _, r := range res {
		out = append(out, abi.WiFiAP{SSID: r.SSID, BSSID: r.BSSID, Channel: r.Channel, RSSI: r.RSSI, Auth: r.Auth})
	}
	return out, nil
}

// HoldPortal is the station manager's hold: it keeps the portal up, and GET /wifi/status
// `portal.active` true, until released.
func (w pluginWiFi) HoldPortal(id string, on bool) { w.d.wifi.HoldPortal(id, on) }

// portalRoot serves the paths plugins serve at the root (portal_serve), on the portal
// network only; everything else goes to next.
func (d *Device) portalRoot(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.pm != nil && d.ap.FromPortal(r) && d.pm.ServePortal(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// storeCredentials puts credentials into WiFi slot 0. The password first: the station reacts
// to each change, and the new SSID with the old password would be a wasted attempt.
func (d *Device) storeCredentials(ssid, psk string) error {
	if err := d.cfg.Set("wifi", "psk0", psk); err != nil {
		return fmt.Errorf("wifi.psk0: %w", err)
	}
	if err := d.cfg.Set("wifi", "ssid0", ssid); err != nil {
		return fmt.Errorf("wifi.ssid0: %w", err)
	}
	return nil
}

// wifiStatusABI is the station's state as a provisioning plugin reads it.
func (d *Device) wifiStatusABI(st wifi.Status) abi.WiFiStatus {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	out := abi.WiFiStatus{Configured: d.wifiConfigured(), State: st.State, Reason: st.Reason.Code, ReasonText: st.Reason.Text,
		SSID: str(st.SSID), BSSID: str(st.BSSID), IP: str(st.IP), MAC: d.sim.Hardware().MAC}
	if st.Channel != nil {
		out.Channel = *st.Channel
	}
	if st.State != wifi.StateConnected {
		out.Failure = failureOf(st.Reason.Code)
	}
	return out
}

// failureOf is what a disconnect reason means to a provisioning client: ESP-IDF's
// NO_AP_FOUND (201) is a network not found; AUTH_EXPIRE (2), 4WAY_HANDSHAKE_TIMEOUT (15),
// AUTH_FAIL (202) and HANDSHAKE_TIMEOUT (204) a wrong passphrase. Others the station retries
// through.
func failureOf(code int) string {
	switch code {
	case 201:
		return "not_found"
	case 2, 15, 202, 204:
		return "auth"
	}
	return ""
}

// wifiConfigured reports whether some WiFi slot holds a network.
func (d *Device) wifiConfigured() bool {
	for _, n := range d.wifiSettings().Networks {
		if n.SSID != "" {
			return true
		}
	}
	return false
}

// pluginButton is the provisioning button (the board's presence event) as plugins see it.
type pluginButton struct{ d *Device }

func (b pluginButton) Watch(fn func(seconds int)) func() { return b.d.buttonWatchers.add(fn) }

// provPoP is the device's proof of possession, derived from its secret.
func (d *Device) provPoP() (string, error) {
	secret, err := deviceSecret(d.opts.DataDir)
	if err != nil {
		return "", err
	}
	return popFromSecret(secret), nil
}

// popFromSecret derives the proof of possession: 8 hex characters of
// HMAC-SHA256(secret, "prov-pop"), short enough to type from a label, per device, and not
// guessable from anything the device broadcasts.
func popFromSecret(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("prov-pop"))
	return hex.EncodeToString(m.Sum(nil)[:4])
}

// writeLabel writes the simulated board's device label: the device, the provisioning
// service name (PROV_ and the last 3 bytes of the base MAC, as the ble plugin advertises it)
// and the PoP.
func (d *Device) writeLabel() error {
	hw := d.sim.Hardware()
	mac, err := net.ParseMAC(hw.MAC)
	if err != nil || len(mac) != 6 {
		return fmt.Errorf("device label: base MAC %q: not a 6-byte address", hw.MAC)
	}
	pop, err := d.provPoP()
	if err != nil {
		return err
	}
	label := fmt.Sprintf("device: dev-%s\nservice_name: PROV_%s\npop: %s\n", hw.DeviceID(), strings.ToUpper(hex.EncodeToString(mac[3:])), pop)
	if err := os.WriteFile(filepath.Join(d.opts.DataDir, labelFile), []byte(label), 0o600); err != nil {
		return fmt.Errorf("device label: %w", err)
	}
	return nil
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
