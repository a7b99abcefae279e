//go:build !wasip1

package sdk_test

import (
	"fmt"

	"devhost/abi"
	"devhost/sdk"
)

// A provisioning plugin serves a GATT service: a central writes a request to a
// characteristic and reads the answer back (ABI 1.2).
func ExampleGATTServe() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapPeripheral)}
	last := map[uint32][]byte{}
	_ = h.Start(&sdk.Plugin{
		OnInit: func(sdk.Info) error {
			return sdk.GATTServe(abi.GATTService{UUID: "021a9004-0382-4aea-bff4-6b3f1c5adfb4", Chars: []abi.GATTChar{
				{UUID: "021aff53-0382-4aea-bff4-6b3f1c5adfb4", Props: abi.GATTPropRead | abi.GATTPropWrite, Description: "proto-ver"}}})
		},
		OnGATT: func(ev abi.GATTEvent) sdk.GATTAnswer {
			switch ev.Op {
			case abi.GATTWrite:
				last[ev.Conn] = []byte(`{"prov":{"ver":"v1.1"}}`)
			case abi.GATTRead:
				v, ok := last[ev.Conn]
				if !ok {
					return sdk.GATTAnswer{ATT: 0x0e}
				}
				return sdk.GATTAnswer{Value: v}
			}
			return sdk.GATTAnswer{}
		},
	})
	fmt.Println(h.GATT.Chars[0].Description)
	_, _ = h.GATTEvent(abi.GATTEvent{Op: abi.GATTWrite, Conn: 1, Value: []byte("---")})
	r, _ := h.GATTEvent(abi.GATTEvent{Op: abi.GATTRead, Conn: 1})
	fmt.Println(r.ATT, string(r.Value))
	r, _ = h.GATTEvent(abi.GATTEvent{Op: abi.GATTRead, Conn: 2})
	fmt.Println(r.ATT)
	// Output:
	// proto-ver
	// 0 {"prov":{"ver":"v1.1"}}
	// 14
}

// SoftAP provisioning: the plugin serves protocomm paths at the root of the setup portal and
// keeps a session per connection or cookie; the credentials go into WiFi slot 0 and the
// station's state comes back as events (ABI 1.2).
func ExamplePortalServe() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapPortal, abi.CapWiFiProv, abi.CapProvPoP)}
	h.PoP = "abcd1234"
	_ = h.Start(&sdk.Plugin{
		OnInit: func(sdk.Info) error {
			if err := sdk.WiFiWatch(true); err != nil {
				return err
			}
			return sdk.PortalServe("/prov-session", "/prov-config")
		},
		OnPortal: func(req abi.PortalRequest) sdk.PortalResponse {
			if req.Path == "/prov-config" {
				if err := sdk.WiFiProvision("boat", "longenough"); err != nil {
					return sdk.PortalResponse{Status: 500}
				}
			}
			return sdk.PortalResponse{SetCookie: "session=" + req.Conn, Body: []byte("ok")}
		},
		OnWiFi: func(st abi.WiFiStatus) { fmt.Println("station", st.State, st.Failure) },
	})
	resp, _ := h.Portal(abi.PortalRequest{Method: "POST", Path: "/prov-config", Conn: "192.168.4.2:50000"})
	fmt.Println(resp.Status, resp.SetCookie, h.Credentials[0].SSID)
	_ = h.WiFiChanged(abi.WiFiStatus{State: "backoff", Reason: 202, Failure: "auth"})
	pop, err := sdk.ProvPoP()
	fmt.Println(pop, err)
	// Output:
	// 200 session=192.168.4.2:50000 boat
	// station backoff auth
	// abcd1234 <nil>
}
