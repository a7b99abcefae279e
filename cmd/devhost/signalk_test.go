package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"devhost/host/signalk/sktest"
)

// The device as a whole against the real signalk-server: it asks for access, is approved,
// streams its telemetry, and keeps its token across a power cut.
func TestSignalKEndToEnd(t *testing.T) {
	s := sktest.Require(t, sktest.Options{})
	d := newDev(t)
	if r := d.call("PUT", "/api/v1/config", fmt.Sprintf(`{"sk":{"server_host":%q,"server_port":%d,"health_s":1}}`, s.Host, s.Port)); r.status != 200 {
		t.Fatalf("configure: %d %s", r.status, r.body)
	}
	status := func() map[string]any { return d.call("GET", "/api/v1/sk/status", "").json(t) }
	waitFor := func(what string, ok func(map[string]any) bool) map[string]any {
		t.Helper()
		deadline := time.Now().Add(45 * time.Second)
		for {
			st := status()
			if ok(st) {
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: status %v", what, st)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	tokenState := func(st map[string]any) string { return st["token"].(map[string]any)["state"].(string) }
	st := waitFor("access requested", func(st map[string]any) bool { return tokenState(st) == "REQUESTED" })
	clientID, _ := st["token"].(map[string]any)["client_id"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := s.WaitRequest(ctx, clientID); err != nil {
		t.Fatalf("the server never saw the request of %q: %v", clientID, err)
	}
	if err := s.Approve(ctx, clientID, "readwrite"); err != nil {
		t.Fatal(err)
	}
	connected := func(st map[string]any) bool {
		ws, _ := st["ws"].(map[string]any)
		return tokenState(st) == "APPROVED" && ws != nil && ws["connected"] == true
	}
	waitFor("approved and streaming", connected)
	if _, err := s.WaitValue(ctx, "dev.dev-abcd.uptime", func(v json.RawMessage) bool { return len(v) > 0 }); err != nil {
		t.Fatalf("telemetry on the server: %v", err)
	}

	// The token is kept per server across a power cut: no new request, straight to streaming.
	d.powerCut()
	d.powerOn()
	waitFor("streaming again after the power cut", connected)
	reqs, err := s.Requests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if r.ClientID == clientID {
			t.Fatalf("the device asked for access again after the power cut: %+v", r)
		}
	}
}
