package sdk

import (
	"encoding/json"
	"errors"
	"fmt"

	"devhost/abi"
)

// ABI minor 2: what a provisioning plugin needs: the GATT server role, routes at the root of
// the setup portal, the WiFi hand-off, the proof of possession and the provisioning button.

// GATTAnswer is an OnGATT handler's answer to a read or a write: ATT 0 with the read's
// Value, or the ATT error code the central gets.
type GATTAnswer struct {
	ATT   uint8
	Value []byte
}

// PortalResponse is an OnPortal handler's answer; Status 0 means 200.
type PortalResponse struct {
	Status      int
	ContentType string // empty: application/octet-stream
	SetCookie   string // a Set-Cookie header value; empty: none
	Body        []byte
}

// GATTServe serves the plugin's GATT service on the board's BLE peripheral (replacing the
// one it served); its events arrive at OnGATT. Needs ble.peripheral.
func GATTServe(svc abi.GATTService) error {
	return hostErr("gatt serve", callIn(abi.FnGATTServe, abi.AppendGATTService(nil, svc)))
}

// GATTWithdraw withdraws the service, disconnecting the centrals.
func GATTWithdraw() error { return hostErr("gatt serve", callIn(abi.FnGATTServe, nil)) }

// GATTNotify notifies a value of characteristic char (its index in the service) to the
// subscribed centrals; it returns how many got it.
func GATTNotify(char int, value []byte) (int, error) {
	rc := callIn(abi.FnGATTNotify, abi.AppendGATTNotification(nil, abi.GATTNotification{Char: uint32(char), Value: value}))
	return int(max(rc, 0)), hostErr("gatt notify", rc)
}

// BLEScanResponse sets the scan response data (≤ 31 bytes; empty clears it). Needs
// ble.peripheral.
func BLEScanResponse(data []byte) error {
	return hostErr("ble scan response", callIn(abi.FnBLEScanResponse, data))
}

// PortalServe serves paths (of abi.PortalPaths) at the root of the setup portal's listener;
// requests arrive at OnPortal. None withdraws them. Needs portal.
func PortalServe(paths ...string) error {
	return hostErr("portal serve", callIn(abi.FnPortalServe, abi.AppendStrings(nil, paths)))
}

// WiFiProvision puts credentials into WiFi slot 0. Needs wifi.prov.
func WiFiProvision(ssid, passphrase string) error {
	return hostErr("wifi provision", callIn(abi.FnWiFiProvision,
		abi.AppendWiFiCredentials(nil, abi.WiFiCredentials{SSID: ssid, Passphrase: passphrase})))
}

// WiFiStatusNow reads the station's state. Needs wifi.prov.
func WiFiStatusNow() (abi.WiFiStatus, error) {
	var st abi.WiFiStatus
	return st, readJSON(abi.FnWiFiStatus, "wifi status", &st)
}

// WiFiWatch starts (true) or stops the station's state changes arriving at OnWiFi. Needs
// wifi.prov.
func WiFiWatch(on bool) error { return hostErr("wifi watch", callArgs(abi.FnWiFiWatch, b2i(on), 0)) }

// WiFiScan scans for networks. Needs wifi.prov.
func WiFiScan() ([]abi.WiFiAP, error) {
	var aps []abi.WiFiAP
	return aps, readJSON(abi.FnWiFiScan, "wifi scan", &aps)
}

// HoldPortal keeps the setup portal up (true) even once the station connects, or releases
// it. Needs wifi.prov.
func HoldPortal(on bool) error { return hostErr("portal hold", callArgs(abi.FnPortalHold, b2i(on), 0)) }

// ProvPoP reads the device's proof of possession. Needs prov.pop.
func ProvPoP() (string, error) {
	b, err := readOut(abi.FnProvPoP, "prov pop", 64)
	return string(b), err
}

// ButtonWatch starts (true) or stops the provisioning button's presses arriving at
// OnButton. Needs button.
func ButtonWatch(on bool) error {
	return hostErr("button watch", callArgs(abi.FnButtonWatch, b2i(on), 0))
}

// readOut calls a read function, growing the buffer from size to what the host has.
func readOut(fn, what string, size int) ([]byte, error) {
	buf := make([]byte, size)
	for {
		rc := callOut(fn, buf)
		if rc < 0 {
			return nil, hostErr(what, rc)
		}
		if int(rc) <= len(buf) {
			return buf[:rc], nil
		}
		if rc > abi.MaxEventBatch {
			return nil, fmt.Errorf("sdk: %s: answer too large", what)
		}
		buf = make([]byte, rc)
	}
}

func readJSON(fn, what string, v any) error {
	b, err := readOut(fn, what, 1<<10)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("sdk: %s: %w", what, err)
	}
	return nil
}

// periphEvent handles the minor-2 event kinds, answering requests.
func periphEvent(p *Plugin, ev abi.Event) error {
	switch ev.Kind {
	case abi.EvGATT:
		e, err := abi.DecodeGATTEvent(ev.Data)
		if err != nil {
			return err
		}
		e.Value = append([]byte(nil), e.Value...)
		ans := GATTAnswer{ATT: 0x0e} // unlikely error: nobody handles it
		if p.OnGATT != nil {
			ans = p.OnGATT(e)
		}
		if e.ID == 0 {
			return nil
		}
		return hostErr("gatt reply", callIn(abi.FnGATTReply, abi.AppendGATTReply(nil, abi.GATTReply{ID: e.ID, ATT: ans.ATT, Value: ans.Value})))
	case abi.EvPortal:
		r, err := abi.DecodePortalRequest(ev.Data)
		if err != nil {
			return err
		}
		r.Body = append([]byte(nil), r.Body...)
		resp := PortalResponse{Status: 404}
		if p.OnPortal != nil {
			resp = p.OnPortal(r)
		}
		if resp.Status == 0 {
			resp.Status = 200
		}
		return hostErr("portal reply", callIn(abi.FnPortalReply, abi.AppendPortalResponse(nil, abi.PortalResponse{ID: r.ID,
			Status: uint32(resp.Status), ContentType: resp.ContentType, SetCookie: resp.SetCookie, Body: resp.Body})))
	case abi.EvWiFi:
		var st abi.WiFiStatus
		if err := json.Unmarshal(ev.Data, &st); err != nil {
			return errors.New("wifi status is not a JSON object")
		}
		if p.OnWiFi != nil {
			p.OnWiFi(st)
		}
	case abi.EvButton:
		s, err := abi.DecodeButton(ev.Data)
		if err == nil && p.OnButton != nil {
			p.OnButton(int(s))
		}
		return err
	}
	return nil
}
