package device

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"devhost/abi"
	"devhost/host/board"
	"devhost/host/plugin"
	"devhost/host/wifi"
	"devhost/plugins/ble/prov"
)

// What a provisioning plugin drives through ABI minor 2: the board's BLE peripheral role
// (simPeripheral), the station manager's slot 0, state and scan and the setup portal's hold
// (pluginWiFi), the provisioning button (pluginButton) and the device's proof of possession.

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

func (w pluginWiFi) HoldPortal(id string, on bool) {
	d := w.d
	d.portalMu.Lock()
	if on {
		d.portalHolds[id] = true
	} else {
		delete(d.portalHolds, id)
	}
	released := !on && len(d.portalHolds) == 0
	d.portalMu.Unlock()
	if released {
		d.provStopped()
	}
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
	s := stationOf(st)
	out := abi.WiFiStatus{Configured: d.wifiConfigured(), State: st.State, Reason: st.Reason.Code, ReasonText: st.Reason.Text,
		SSID: s.SSID, BSSID: s.BSSID, Channel: s.Channel, IP: s.IP, MAC: d.sim.Hardware().MAC}
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
	return prov.PoPFromSecret(secret), nil
}
