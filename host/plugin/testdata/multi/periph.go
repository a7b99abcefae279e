//go:build wasip1

package main

import (
	"encoding/json"
	"strconv"

	"devhost/abi"
	"devhost/abi/hostcall"
)

// The periph part: a GATT service of two characteristics (0: read and write, answering a
// read with the last value written on that connection, reversed; 1: notify), the portal
// path /prov-session (echoing the body reversed, setting a cookie naming the connection
// when the client sent none), and the WiFi hand-off (credentials into slot 0, the status,
// a scan, the PoP, the portal hold), each call's answer logged.

const (
	periphSvc  = "021a9004-0382-4aea-bff4-6b3f1c5adfb4"
	periphRW   = "021aff51-0382-4aea-bff4-6b3f1c5adfb4"
	periphNote = "021aff52-0382-4aea-bff4-6b3f1c5adfb4"
)

var written = map[uint32][]byte{} // by connection

func rc(name string, v int32) { logf(name + " rc=" + strconv.Itoa(int(v))) }

func periphInit() {
	rc("gatt_serve", call(hostcall.GATTServe, abi.AppendGATTService(nil, abi.GATTService{UUID: periphSvc, Chars: []abi.GATTChar{
		{UUID: periphRW, Props: abi.GATTPropRead | abi.GATTPropWrite, Description: "prov-session"},
		{UUID: periphNote, Props: abi.GATTPropNotify, Description: "note"}}})))
	rc("ble_scan_response", call(hostcall.BLEScanResponse, []byte{5, 0x09, 'P', 'R', 'O', 'V'}))
	rc("portal_serve", call(hostcall.PortalServe, abi.AppendStrings(nil, []string{"/prov-session"})))
	rc("wifi_watch", hostcall.WiFiWatch(1))
	rc("button_watch", hostcall.ButtonWatch(1))
	rc("portal_hold", hostcall.PortalHold(1))
	rc("wifi_provision", call(hostcall.WiFiProvision, abi.AppendWiFiCredentials(nil, abi.WiFiCredentials{SSID: "boat", Passphrase: "longenough"})))
	rc("wifi_provision short", call(hostcall.WiFiProvision, abi.AppendWiFiCredentials(nil, abi.WiFiCredentials{SSID: "boat", Passphrase: "short"})))
	if b, n := read(hostcall.WiFiStatus); n >= 0 {
		var st abi.WiFiStatus
		if json.Unmarshal(b, &st) == nil {
			logf("wifi_status " + st.State + " configured=" + strconv.FormatBool(st.Configured) + " mac=" + st.MAC)
		}
	}
	if b, n := read(hostcall.WiFiScan); n >= 0 {
		var aps []abi.WiFiAP
		if json.Unmarshal(b, &aps) == nil && len(aps) > 0 {
			logf("wifi_scan " + aps[0].SSID + " " + aps[0].Auth)
		}
	}
	if b, n := read(hostcall.ProvPoP); n >= 0 {
		logf("prov_pop " + string(b))
	}
}

func reverse(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[len(b)-1-i] = c
	}
	return out
}

func periphEvent(e abi.Event) {
	switch e.Kind {
	case abi.EvGATT:
		g, err := abi.DecodeGATTEvent(e.Data)
		if err != nil {
			return
		}
		switch g.Op {
		case abi.GATTConnect, abi.GATTDisconnect, abi.GATTMTU:
			logf("gatt op=" + strconv.Itoa(int(g.Op)) + " conn=" + strconv.Itoa(int(g.Conn)) + " mtu=" + strconv.Itoa(int(g.MTU)))
			delete(written, g.Conn)
		case abi.GATTWrite:
			written[g.Conn] = append([]byte(nil), g.Value...)
			if string(g.Value) == "notify" {
				rc("gatt_notify", call(hostcall.GATTNotify, abi.AppendGATTNotification(nil, abi.GATTNotification{Char: 1, Value: []byte("hello")})))
			}
			var att uint8
			if string(g.Value) == "refuse" {
				att = 0x80
			}
			call(hostcall.GATTReply, abi.AppendGATTReply(nil, abi.GATTReply{ID: g.ID, ATT: att}))
		case abi.GATTRead:
			v, ok := written[g.Conn]
			if !ok {
				call(hostcall.GATTReply, abi.AppendGATTReply(nil, abi.GATTReply{ID: g.ID, ATT: 0x0e}))
				return
			}
			call(hostcall.GATTReply, abi.AppendGATTReply(nil, abi.GATTReply{ID: g.ID, Value: reverse(v)}))
		}
	case abi.EvPortal:
		p, err := abi.DecodePortalRequest(e.Data)
		if err != nil {
			return
		}
		resp := abi.PortalResponse{ID: p.ID, Status: 200, Body: reverse(p.Body)}
		if p.Cookie == "" {
			resp.SetCookie = "session=" + p.Conn + "; Path=/"
		}
		if string(p.Body) == "ignore" {
			return
		}
		call(hostcall.PortalReply, abi.AppendPortalResponse(nil, resp))
	case abi.EvWiFi:
		var st abi.WiFiStatus
		if json.Unmarshal(e.Data, &st) == nil {
			logf("wifi " + st.State + " failure=" + st.Failure)
			if st.State == "connected" {
				hostcall.PortalHold(0)
			}
		}
	case abi.EvButton:
		s, err := abi.DecodeButton(e.Data)
		if err == nil {
			logf("button " + strconv.Itoa(int(s)))
		}
	}
}
