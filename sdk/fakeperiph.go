//go:build !wasip1

package sdk

import (
	"encoding/json"
	"fmt"
	"slices"

	"devhost/abi"
)

// FakePeriph is the fake host's side of ABI minor 2 (embedded in FakeHost): the GATT server
// role, the portal-root routes, the WiFi hand-off, the proof of possession and the button.
// Set WiFi, APs and PoP before or while the plugin runs; drive it with GATTEvent, Portal,
// WiFiChanged and Button, and read the other fields.
type FakePeriph struct {
	// NoPeripheral, NoWiFi, NoButton make the device lack them (ErrUnavailable).
	NoPeripheral, NoWiFi, NoButton bool

	GATT         *abi.GATTService       // the service served; nil: none
	ScanResponse []byte                 // the scan response data
	Notified     []abi.GATTNotification // notifications sent, in order
	PortalPaths  []string               // portal-root paths served
	Credentials  []abi.WiFiCredentials  // every wifi_provision, in order
	WiFi         abi.WiFiStatus         // what wifi_status answers
	APs          []abi.WiFiAP           // what wifi_scan answers
	WiFiWatching bool
	PortalHeld   bool
	PoP          string // what prov_pop answers; empty: ErrUnavailable
	ButtonWatch  bool

	gattReply   map[uint32]*abi.GATTReply
	portalReply map[uint32]*abi.PortalResponse
}

func (h *FakeHost) periphIn(fn string, b []byte) int32 {
	switch fn {
	case abi.FnGATTServe, abi.FnGATTNotify, abi.FnBLEScanResponse:
		return h.peripheral(fn, b)
	case abi.FnGATTReply:
		return fakeReply(b, abi.DecodeGATTReply, func(r abi.GATTReply) uint32 { return r.ID }, h.gattReply)
	case abi.FnPortalServe:
		paths, err := abi.DecodePortalPaths(b)
		if err == nil {
			h.PortalPaths = paths
			return 0
		}
		return int32(abi.ErrInvalid)
	case abi.FnPortalReply:
		return fakeReply(b, abi.DecodePortalResponse, func(r abi.PortalResponse) uint32 { return r.ID }, h.portalReply)
	case abi.FnWiFiProvision:
		c, err := abi.DecodeWiFiCredentials(b)
		switch {
		case h.NoWiFi:
			return int32(abi.ErrUnavailable)
		case err != nil:
			return int32(abi.ErrInvalid)
		}
		h.Credentials = append(h.Credentials, c)
		h.WiFi.Configured = true
	default:
		return int32(abi.ErrInternal)
	}
	return 0
}

// fakeReply records the plugin's reply to a request delivered in the call in progress:
// slots holds nil for each request awaiting its reply.
func fakeReply[T any](b []byte, decode func([]byte) (T, error), id func(T) uint32, slots map[uint32]*T) int32 {
	r, err := decode(b)
	if err != nil {
		return int32(abi.ErrInvalid)
	}
	slot, ok := slots[id(r)]
	if !ok || slot != nil {
		return int32(abi.ErrNotFound)
	}
	slots[id(r)] = &r
	return 0
}

func (h *FakeHost) peripheral(fn string, b []byte) int32 {
	if h.NoPeripheral {
		return int32(abi.ErrUnavailable)
	}
	switch fn {
	case abi.FnGATTServe:
		if len(b) == 0 {
			h.GATT = nil
			return 0
		}
		svc, err := abi.DecodeGATTService(b)
		if err != nil {
			return int32(abi.ErrInvalid)
		}
		h.GATT = &svc
	case abi.FnGATTNotify:
		n, err := abi.DecodeGATTNotification(b)
		if err != nil {
			return int32(abi.ErrInvalid)
		}
		if h.GATT == nil {
			return int32(abi.ErrState)
		}
		if int(n.Char) >= len(h.GATT.Chars) || h.GATT.Chars[n.Char].Props&abi.GATTPropNotify == 0 {
			return int32(abi.ErrInvalid)
		}
		n.Value = slices.Clone(n.Value)
		h.Notified = append(h.Notified, n)
	case abi.FnBLEScanResponse:
		if len(b) > abi.MaxBLEAdvertising {
			return int32(abi.ErrLimit)
		}
		h.ScanResponse = slices.Clone(b)
	}
	return 0
}

func (h *FakeHost) periphOut(fn string) ([]byte, int32) {
	var v any
	switch fn {
	case abi.FnWiFiStatus:
		v = h.WiFi
	case abi.FnWiFiScan:
		v = h.APs
		if h.APs == nil {
			v = []abi.WiFiAP{}
		}
	case abi.FnProvPoP:
		if h.PoP == "" {
			return nil, int32(abi.ErrUnavailable)
		}
		return []byte(h.PoP), 0
	default:
		return nil, int32(abi.ErrInternal)
	}
	if h.NoWiFi {
		return nil, int32(abi.ErrUnavailable)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, int32(abi.ErrInternal)
	}
	return b, 0
}

func (h *FakeHost) periphArgs(fn string, a int32) int32 {
	if a != 0 && a != 1 {
		return int32(abi.ErrInvalid)
	}
	var missing bool // the device has no such peripheral
	var on *bool
	switch fn {
	case abi.FnWiFiWatch:
		missing, on = h.NoWiFi, &h.WiFiWatching
	case abi.FnPortalHold:
		missing, on = h.NoWiFi, &h.PortalHeld
	case abi.FnButtonWatch:
		missing, on = h.NoButton, &h.ButtonWatch
	default:
		return int32(abi.ErrInternal)
	}
	if missing {
		return int32(abi.ErrUnavailable)
	}
	*on = a == 1
	return 0
}

// GATTEvent delivers a GATT event for the served service. A read or a write (ev.ID is set
// by the fake host) returns the plugin's answer; an unanswered one is ATT 0x0e, as on the
// device.
func (h *FakeHost) GATTEvent(ev abi.GATTEvent) (abi.GATTReply, error) {
	if h.GATT == nil || !abi.HasCapability(h.Granted, abi.CapPeripheral) {
		return abi.GATTReply{}, fmt.Errorf("sdk: fake host: no GATT service served")
	}
	ev.ID = 0
	if ev.Op == abi.GATTRead || ev.Op == abi.GATTWrite {
		h.nextID++
		ev.ID = h.nextID
		h.gattReply[ev.ID] = nil
	}
	err := h.deliver(abi.Event{Kind: abi.EvGATT, Data: abi.AppendGATTEvent(nil, ev)})
	if ev.ID == 0 {
		return abi.GATTReply{}, err
	}
	r := h.gattReply[ev.ID]
	delete(h.gattReply, ev.ID)
	if r == nil {
		return abi.GATTReply{ID: ev.ID, ATT: 0x0e}, err
	}
	return *r, err
}

// Portal delivers a request to a portal-root path the plugin serves and returns its answer
// (404 for a path not served, 500 unanswered, as on the device).
func (h *FakeHost) Portal(req abi.PortalRequest) (abi.PortalResponse, error) {
	if !slices.Contains(h.PortalPaths, req.Path) || !abi.HasCapability(h.Granted, abi.CapPortal) {
		return abi.PortalResponse{Status: 404}, nil
	}
	h.nextID++
	req.ID = h.nextID
	h.portalReply[req.ID] = nil
	err := h.deliver(abi.Event{Kind: abi.EvPortal, Data: abi.AppendPortalRequest(nil, req)})
	r := h.portalReply[req.ID]
	delete(h.portalReply, req.ID)
	if r == nil {
		return abi.PortalResponse{ID: req.ID, Status: 500}, err
	}
	return *r, err
}

// WiFiChanged sets the station's state and delivers it while the plugin watches.
func (h *FakeHost) WiFiChanged(st abi.WiFiStatus) error {
	h.WiFi = st
	if !h.WiFiWatching || !abi.HasCapability(h.Granted, abi.CapWiFiProv) {
		return nil
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("sdk: fake host: %w", err)
	}
	return h.deliver(abi.Event{Kind: abi.EvWiFi, Data: b})
}

// Button delivers a press of the provisioning button while the plugin watches it.
func (h *FakeHost) Button(seconds int) error {
	if !h.ButtonWatch || !abi.HasCapability(h.Granted, abi.CapButton) {
		return nil
	}
	if h.Dormant != nil && h.Dormant.Button {
		h.Dormant = nil // a press wakes a plugin that sleeps until one
	}
	return h.deliver(abi.Event{Kind: abi.EvButton, Data: abi.AppendTimer(nil, uint32(seconds))})
}
