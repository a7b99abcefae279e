package main_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"devhost/host/signalk/sktest"
)

// The device as a whole against the real signalk-server: it asks for access, is approved,
// streams its telemetry, and keeps its token across a power cut.
func TestSignalKEndToEnd(t *testing.T) {
	s := sktest.Require(t, sktest.Options{})
	d := newDev(t)
	evs := d.events()
	d.putConfig(fmt.Sprintf(`{"sk":{"server_host":%q,"server_port":%d,"health_s":1}}`, s.Host, s.Port))
	ctx := guardCtx(t, 1)
	clientID := d.approveSK(ctx, s).Token.ClientID
	d.waitSK("approved and streaming", skStreaming)
	if _, err := s.WaitValue(ctx, "dev.dev-abcd.uptime", func(v json.RawMessage) bool { return len(v) > 0 }); err != nil {
		t.Fatalf("telemetry on the server: %v", err)
	}
	checkSignalKSurface(t, d, evs)

	// The token is kept per server across a power cut: no new request, straight to streaming.
	d.powerCut()
	d.powerOn()
	d.waitSK("streaming again after the power cut", skStreaming)
	noNewRequest(ctx, t, s, "after the power cut", clientID)
}

// checkSignalKSurface drives the device's Signal K endpoints and events while it streams to the
// real server: the events that told the story so far, a PUT answered by the server, a refused
// token that leaves the approved one in place, the TLS and servers documents, and the stream
// following the network (a route change re-dials, a link loss and return reconnect).
func checkSignalKSurface(t *testing.T, d *dev, evs <-chan event) {
	t.Helper()
	decode := func(e event) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(e.data), &m); err != nil {
			t.Fatalf("%s event data %q: %v", e.name, e.data, err)
		}
		return m
	}
	waitEvent(t, evs, hangGuard, "sk event with the token approved", func(e event) bool {
		if e.name != "sk" {
			return false
		}
		tok, _ := decode(e)["token"].(map[string]any)
		return tok["state"] == "APPROVED"
	})
	wsEvent := func(what string, want bool) map[string]any {
		t.Helper()
		var st map[string]any
		waitEvent(t, evs, hangGuard, what, func(e event) bool {
			if e.name != "sk_ws" {
				return false
			}
			st = decode(e)
			return st["connected"] == want
		})
		return st
	}
	first := wsEvent("sk_ws connected", true)

	// An outbound PUT the server has no handler for: 202 at once, then the server's answer.
	if r := d.call("POST", "/api/v1/sk/put", `{"path":"electrical.switches.e2e.state","value":1}`); r.status != 202 || r.json(t)["state"] != "PENDING" {
		t.Fatalf("POST /sk/put: %d %s", r.status, r.body)
	}
	p := d.waitDoc("still pending", "/api/v1/sk/put", hangGuard, func(p map[string]any) bool { return p["state"] != "PENDING" })
	if code, _ := p["statusCode"].(float64); p["path"] != "electrical.switches.e2e.state" || (p["state"] != "COMPLETED" && p["state"] != "FAILED") || code < 400 {
		t.Fatalf("the server's answer to a PUT nobody handles: %v", p)
	}

	// A token the server refuses is rejected at once; the approved one stays in use.
	if r := d.call("POST", "/api/v1/sk/token", `{"token":"not.a.token"}`); r.status != 400 || r.json(t)["error"] != "validation" {
		t.Fatalf("POST /sk/token with a refused token: %d %s", r.status, r.body)
	}
	if st := d.sk(); !skStreaming(st) {
		t.Fatalf("status after a refused token: %+v", st)
	}
	if r := d.call("POST", "/api/v1/sk/token", `{"token":"two words"}`); r.status != 400 {
		t.Fatalf("POST /sk/token with a malformed token: %d %s", r.status, r.body)
	}

	if r := d.call("GET", "/api/v1/sk/tls", ""); r.status != 200 {
		t.Fatalf("GET /sk/tls: %d %s", r.status, r.body)
	}
	if r := d.call("GET", "/api/v1/sk/servers", ""); r.status != 200 || !strings.Contains(string(r.body), `"servers"`) {
		t.Fatalf("GET /sk/servers: %d %s", r.status, r.body)
	}

	// The route moves (CHANGED): the stream re-dials.
	d.boardCtl("PUT", "/net/route", `{"ip":"10.9.8.7"}`)
	wsEvent("sk_ws disconnected after the route changed", false)
	again := wsEvent("sk_ws connected again after the route changed", true)
	if again["reconnects"].(float64) <= first["reconnects"].(float64) {
		t.Fatalf("reconnects did not grow: %v then %v", first["reconnects"], again["reconnects"])
	}
	// The link goes down and comes back.
	d.boardCtl("POST", "/net/down", "")
	down := wsEvent("sk_ws disconnected with the link down", false)
	if down["state"] != "network_down" && down["state"] != "backoff" {
		t.Fatalf("stream state with the link down: %v", down["state"])
	}
	d.boardCtl("POST", "/net/up", "")
	wsEvent("sk_ws connected after the link came back", true)
}
