package httpd

import (
	"net"
	"net/http"
	"testing"
)

// TestHostCheck is defect 8 (DNS rebinding), over the wire with the Host header as sent.
func TestHostCheck(t *testing.T) {
	s := New(Options{
		AllowedHosts: func() []string { return []string{"dev-abcd.local", "boat.example.org."} },
		AnyHost: func(r *http.Request) bool {
			a, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
			return a != nil && r.Header.Get("X-Test-Portal") == "1" // stands in for the portal address check
		},
		UI: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ui")) }),
	})
	base := serveOK(t, s)
	cases := []struct {
		name, host, path, extra string
		status                  int
	}{
		{"IPv4 literal with port", "127.0.0.1:8080", "/api/v1/thing", "", 200},
		{"IPv4 literal", "192.168.4.1", "/api/v1/thing", "", 200},
		{"IPv6 literal", "[::1]:80", "/api/v1/thing", "", 200},
		{"localhost", "localhost:8080", "/api/v1/thing", "", 200},
		{"hostname.local", "dev-abcd.local", "/api/v1/thing", "", 200},
		{"hostname.local, other case, trailing dot, port", "DEV-ABCD.local.:80", "/api/v1/thing", "", 200},
		{"configured name", "boat.example.org", "/api/v1/thing", "", 200},
		{"rebinding name on the API", "attacker.example.com", "/api/v1/thing", "", 421},
		{"rebinding name on the UI", "attacker.example.com:8080", "/", "", 421},
		{"another .local name", "other.local", "/api/v1/thing", "", 421},
		{"a name with an IP prefix", "127.0.0.1.nip.io", "/api/v1/thing", "", 421},
		{"portal network takes any name", "connectivitycheck.gstatic.com", "/api/v1/thing", "X-Test-Portal: 1\r\n", 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, b := rawExchange(t, base, "GET "+c.path+" HTTP/1.1\r\nHost: "+c.host+"\r\n"+c.extra+"\r\n")
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, b)
			}
			if c.status == 421 && resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
			}
		})
	}
	// HTTP/1.0 without Host cannot be a browser's rebinding request.
	resp, b := rawExchange(t, base, "GET /api/v1/thing HTTP/1.0\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("HTTP/1.0 without Host: %d %s", resp.StatusCode, b)
	}
}

func TestNoHostPolicyAcceptsAll(t *testing.T) {
	_, base := newTestServer(t, nil)
	resp, b := rawExchange(t, base, "GET /api/v1/thing HTTP/1.1\r\nHost: attacker.example.com\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// isIP decides as net.ParseIP does, which the rule was written against.
func TestIsIPMatchesParseIP(t *testing.T) {
	for _, h := range []string{"127.0.0.1", "10.0.0.256", "010.0.0.1", "::1", "fe80::1", "fe80::1%eth0",
		"::ffff:192.168.1.1", "1.2.3", "", "dev-1.local", "localhost", "1.2.3.4.", "[::1]", "0x7f.0.0.1"} {
		if got, want := isIP(h), net.ParseIP(h) != nil; got != want {
			t.Errorf("isIP(%q) = %v, net.ParseIP says %v", h, got, want)
		}
	}
}
