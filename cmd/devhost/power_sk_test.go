package main_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"devhost/host/signalk/sktest/testcert"
)

// TestPowerCycleSignalK: the duty cycle against the real signalk-server serving https. The
// device is approved once and pins the server's CA on first use; then it sleeps and wakes
// several times. Each wake counts, streams again with the same token (no new access request)
// and the same pin; the deltas it had buffered while its stream was off before a sleep are
// gone after it (RAM, not RTC memory), while those buffered after the wake reach the server.
func TestPowerCycleSignalK(t *testing.T) {
	s, ca, _ := tlsSignalK(t)
	ctx := guardCtx(t, 2)

	d := newDev(t)
	d.putConfig(tofuConfig(s, ""))
	// get reads a document while the app is awake; a refused connection means it slept before
	// the test saw what it waits for.
	get := func(what, path string, v any) {
		t.Helper()
		r, err := d.try("GET", path, "")
		if err != nil {
			t.Fatalf("%s: the device went to sleep first: GET %s: %v", what, path, err)
		}
		if r.status != 200 || json.Unmarshal(r.body, v) != nil {
			t.Fatalf("%s: GET %s: %d %s", what, path, r.status, r.body)
		}
	}
	waitSK := func(what string, ok func(skStatus) bool) skStatus {
		t.Helper()
		return pollUntil(t, what, hangGuard, func() skStatus {
			var st skStatus
			get(what, "/api/v1/sk/status", &st)
			return st
		}, ok)
	}
	var buffered struct {
		WS struct {
			Connected bool
			Buffered  int
		}
	}
	write := func(method, path, body string) {
		t.Helper()
		r, err := d.try(method, path, body)
		if err != nil || r.status != 200 {
			t.Fatalf("%s %s: %v %d %s", method, path, err, r.status, r.body)
		}
	}

	// Approved once: the only access request of the test.
	clientID := d.approveSK(ctx, s).Token.ClientID
	waitSK("approved and streaming", skStreaming)
	var pin skTLSDoc
	get("pinned", "/api/v1/sk/tls", &pin)
	if pin.State != "trusted" || pin.Pinned == nil || pin.Pinned.SHA256 != testcert.Fingerprint(ca.Cert) {
		t.Fatalf("first use did not pin the CA: %+v", pin)
	}
	pinnedAt := pin.Pinned.PinnedAt

	// Offline before the first sleep: the stream is switched off and a notification waits in
	// the buffer.
	write("PUT", "/api/v1/config", `{"sk":{"ws_enabled":false}}`)
	waitSK("the stream closed", func(st skStatus) bool { return !st.WS.Connected })
	write("POST", "/api/v1/health/test", `{"key":"test.preSleep","state":"warn","ttl_s":300}`)
	for deadline := time.Now().Add(hangGuard); ; time.Sleep(50 * time.Millisecond) {
		get("buffered before the sleep", "/api/v1/sk/status", &buffered)
		if buffered.WS.Buffered > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing buffered while the stream is off: %+v", buffered)
		}
	}

	// Sleep 10 s after the 30 s window; each wake stays up to 30 s, and 5 s once streaming.
	write("PUT", "/api/v1/config", `{"power":{"mode":"cycle","interval_s":10,"window_s":30,"awake_max_s":30,"publish_ms":5000}}`)
	for wake := 1; wake <= 3; wake++ {
		d.waitBoot()
		what := fmt.Sprintf("wake %d", wake)
		if wake == 1 {
			// The stream is still off (publish_ms keeps the device up 5 s after the network):
			// buffer a second notification, then switch the stream on.
			write("POST", "/api/v1/health/test", `{"key":"test.afterWake","state":"warn","ttl_s":300}`)
			write("PUT", "/api/v1/config", `{"sk":{"ws_enabled":true}}`)
		}
		st := waitSK(what+": streaming", skStreaming)
		if st.Token.ClientID != clientID {
			t.Fatalf("%s: client id %q, was %q", what, st.Token.ClientID, clientID)
		}
		var p powerDoc
		get(what, "/api/v1/power", &p)
		if !p.TimerWake || p.WakeCount != wake || p.Mode != "cycle" {
			t.Fatalf("%s: power %+v", what, p)
		}
		var info struct {
			ResetReason string `json:"reset_reason"`
		}
		get(what, "/api/v1/system/info", &info)
		if info.ResetReason != "deepsleep" {
			t.Fatalf("%s: reset reason %q", what, info.ResetReason)
		}
		get(what, "/api/v1/sk/tls", &pin)
		if pin.State != "trusted" || pin.Pinned == nil || pin.Pinned.SHA256 != testcert.Fingerprint(ca.Cert) || !pin.Pinned.PinnedAt.Equal(pinnedAt) {
			t.Fatalf("%s: the pin did not survive the sleep: %+v", what, pin)
		}
		if wake == 1 {
			// The buffer drains oldest first: once the wake's notification is on the server,
			// one kept from before the sleep would be there too.
			if _, err := s.WaitValue(ctx, "notifications.dev.dev-abcd.test.afterWake", nil); err != nil {
				t.Fatalf("the notification buffered after the wake never arrived: %v", err)
			}
			if v, ok, err := s.Value(ctx, "notifications.dev.dev-abcd.test.preSleep"); err != nil || ok {
				t.Fatalf("a delta buffered before the sleep reached the server: %s %v", v, err)
			}
		}
	}
	noNewRequest(ctx, t, s, "after the sleeps", clientID)
}
