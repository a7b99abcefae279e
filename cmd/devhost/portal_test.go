package main_test

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The setup portal end to end: a device whose board puts the portal on a loopback address of
// its own, reached on that address (the portal network) and on 127.0.0.1 (the station side).

// withPortalBoard gives the device a board file with a portal address no other device uses.
func withPortalBoard(ip *string) devOpt {
	return func(d *dev) {
		*ip = fmt.Sprintf("127.%d.%d.1", 100+rand.IntN(100), rand.IntN(256))
		board := filepath.Join(d.data, "board.json")
		if err := os.WriteFile(board, []byte(fmt.Sprintf(`{"portal_ip":%q}`, *ip)), 0o644); err != nil {
			d.t.Fatal(err)
		}
		d.args = append(d.args, "--board", board)
	}
}

var noRedirect = &http.Client{Timeout: 10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// portalCall makes a request on the portal listener, with no credential unless hdr has one.
func portalCall(t *testing.T, base, method, path, body string, hdr ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if method != "GET" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, base, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

// waitPortal waits until the portal listener answers (up) or refuses connections (down).
func waitPortal(t *testing.T, base string, up bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
		if err == nil {
			c.Close()
			if up {
				return
			}
		} else if !up && errors.Is(err, syscall.ECONNREFUSED) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("portal listener at %s: up=%v never seen (last: %v)", base, up, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func authMethod(t *testing.T, r reply) string {
	t.Helper()
	m, _ := r.json(t)["method"].(string)
	return m
}

func TestPortalProbesExemptionAndRecovery(t *testing.T) {
	var ip string
	d := newDev(t, withPortalBoard(&ip))
	portal := fmt.Sprintf("http://%s:%d", ip, d.port)
	root := portal + "/"
	waitPortal(t, portal, true)

	// No key: the portal network is exempt, the station side open; probes redirect on both.
	if r := portalCall(t, portal, "GET", "/api/v1/auth/status", ""); r.status != 200 || authMethod(t, r) != "portal" {
		t.Fatalf("auth status on the portal: %d %s", r.status, r.body)
	}
	for _, base := range []string{portal, d.base} {
		for _, path := range []string{"/generate_204", "/hotspot-detect.html", "/api/v1/ncsi.txt"} {
			if r := portalCall(t, base, "GET", path, ""); r.status != 302 || r.header.Get("Location") != root {
				t.Fatalf("%s%s: %d %q, want 302 to %s", base, path, r.status, r.header.Get("Location"), root)
			}
		}
	}

	// A key set: the portal is like any other network, except for the probes.
	const key = "lost-key-123"
	d.putConfig(`{"httpd":{"api_key":"` + key + `"}}`)
	for _, base := range []string{portal, d.base} {
		if r := portalCall(t, base, "GET", "/api/v1/system/info", ""); r.status != 401 {
			t.Fatalf("%s info without key: %d", base, r.status)
		}
	}
	if r := portalCall(t, portal, "GET", "/generate_204", ""); r.status != 302 || r.header.Get("Location") != root {
		t.Fatalf("portal probe with a key set: %d", r.status)
	}
	if r := portalCall(t, d.base, "GET", "/generate_204", ""); r.status != 401 {
		t.Fatalf("station probe with a key set: %d", r.status)
	}
	if r := portalCall(t, d.base, "GET", "/generate_204", "", "Authorization", "Bearer "+key); r.status != 302 {
		t.Fatalf("station probe with the key: %d", r.status)
	}

	// Three real power cuts open the recovery window: the portal network is exempt, the
	// station side still needs the key.
	for i := 1; i <= 3; i++ {
		d.powerCut()
		d.powerOn()
		waitPortal(t, portal, true)
	}
	r := portalCall(t, portal, "GET", "/api/v1/auth/status", "")
	if rs, _ := r.json(t)["recovery_s"].(float64); rs <= 0 || authMethod(t, r) != "portal" {
		t.Fatalf("auth status on the portal after 3 power cuts: %s", r.body)
	}
	if r := portalCall(t, portal, "GET", "/api/v1/system/info", ""); r.status != 200 {
		t.Fatalf("portal info in the window: %d %s", r.status, r.body)
	}
	if r := portalCall(t, d.base, "GET", "/api/v1/system/info", ""); r.status != 401 {
		t.Fatalf("station info in the window without the key: %d", r.status)
	}
	// The owner sets a new key from the portal without the lost one.
	if r := portalCall(t, portal, "PUT", "/api/v1/config", `{"httpd":{"api_key":"found-key-456"}}`); r.status != 200 {
		t.Fatalf("new key from the portal: %d %s", r.status, r.body)
	}
	if r := portalCall(t, d.base, "GET", "/api/v1/system/info", "", "Authorization", "Bearer found-key-456"); r.status != 200 {
		t.Fatalf("station with the new key: %d", r.status)
	}

	// wifi.portal_enabled false takes the listener away; true brings it back.
	d.key = "found-key-456"
	d.putConfig(`{"wifi":{"portal_enabled":false}}`)
	waitPortal(t, portal, false)
	d.putConfig(`{"wifi":{"portal_enabled":true}}`)
	waitPortal(t, portal, true)
}

// Under HTTPD_AUTH_REQUIRED the first key can be set only from the portal.
func TestAuthRequiredFirstKeyFromPortal(t *testing.T) {
	var ip string
	d := newDev(t, withArgs("--auth-required"), withPortalBoard(&ip))
	portal := fmt.Sprintf("http://%s:%d", ip, d.port)
	waitPortal(t, portal, true)

	r := d.call("PUT", "/api/v1/config", `{"httpd":{"api_key":"first-key-1"}}`)
	if r.status != 403 || r.json(t)["error"] != "auth_unconfigured" {
		t.Fatalf("first key from the station: %d %s", r.status, r.body)
	}
	if r := portalCall(t, portal, "GET", "/api/v1/system/info", ""); r.status != 200 {
		t.Fatalf("info on the portal with no key: %d %s", r.status, r.body)
	}
	if r := portalCall(t, portal, "PUT", "/api/v1/config", `{"httpd":{"api_key":"first-key-1"}}`); r.status != 200 {
		t.Fatalf("first key from the portal: %d %s", r.status, r.body)
	}
	if r := d.call("GET", "/api/v1/system/info", "", "Authorization", "Bearer first-key-1"); r.status != 200 {
		t.Fatalf("station with the key: %d", r.status)
	}
	if r := portalCall(t, portal, "GET", "/api/v1/system/info", ""); r.status != 401 {
		t.Fatalf("portal without the key once one is set: %d", r.status)
	}
}
