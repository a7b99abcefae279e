package auth

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"devhost/host/api"
)

func TestPortalExemption(t *testing.T) {
	cases := []struct {
		name     string
		key      string
		required bool
		window   bool
		portal   string // PortalIP(): "" while the portal is down
		local    string // the request's local address
		hdr      []string
		want     Method
		wantErr  int
	}{
		{"no key, portal", "", false, false, portalIP, portalIP, nil, MethodPortal, 0},
		{"no key, station", "", false, false, portalIP, stationIP, nil, MethodNone, 0},
		{"no key, portal down", "", false, false, "", portalIP, nil, MethodNone, 0},
		{"key, no window, portal", testKey, false, false, portalIP, portalIP, nil, "", 401},
		{"key, no window, portal with Bearer", testKey, false, false, portalIP, portalIP, bearerHdr(testKey), MethodBearer, 0},
		{"key, window, portal", testKey, false, true, portalIP, portalIP, nil, MethodPortal, 0},
		{"key, window, portal with wrong Bearer", testKey, false, true, portalIP, portalIP, bearerHdr("wrong wrong"), MethodPortal, 0},
		{"key, window, station", testKey, false, true, portalIP, stationIP, nil, "", 401},
		{"key, window, portal down", testKey, false, true, "", portalIP, nil, "", 401},
		{"key, window, no local address", testKey, false, true, portalIP, "", nil, "", 401},
		{"required, no key, station", "", true, false, portalIP, stationIP, nil, "", 403},
		{"required, no key, portal", "", true, false, portalIP, portalIP, nil, MethodPortal, 0},
		{"required, no key, portal down", "", true, false, "", portalIP, nil, "", 403},
		{"required, key, station Bearer", testKey, true, false, portalIP, stationIP, bearerHdr(testKey), MethodBearer, 0},
		{"required, key, station nothing", testKey, true, false, portalIP, stationIP, nil, "", 401},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, e := newAuth(t, tc.key, func(o *Options) { o.Required = tc.required })
			e.setPortal(tc.portal)
			if tc.window {
				a.OpenWindow(60)
			}
			m, err := a.Check(request(http.MethodPost, tc.local, "", tc.hdr...))
			st, code := errCode(t, err)
			if st != tc.wantErr || (err == nil && m != tc.want) {
				t.Fatalf("got %q, %v; want %q, %d", m, err, tc.want, tc.wantErr)
			}
			if st == 403 && code != api.CodeAuthUnconfigured {
				t.Fatalf("code %q, want auth_unconfigured", code)
			}
		})
	}
}

type strAddr string

func (s strAddr) Network() string { return "tcp" }
func (s strAddr) String() string  { return string(s) }

func TestPortalLocalAddressForms(t *testing.T) {
	a, _ := newAuth(t, "", nil)
	for _, tc := range []struct {
		addr net.Addr
		want Method
	}{
		{&net.TCPAddr{IP: net.ParseIP(portalIP).To16(), Port: 80}, MethodPortal},
		{&net.TCPAddr{IP: net.ParseIP(portalIP).To4(), Port: 8080}, MethodPortal},
		{strAddr(portalIP + ":80"), MethodPortal},
		{strAddr("127.4.1.2:80"), MethodNone},
		{strAddr("not an address"), MethodNone},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tc.addr))
		if m, err := a.Check(r); err != nil || m != tc.want {
			t.Errorf("%v: %q, %v; want %q", tc.addr, m, err, tc.want)
		}
	}
}

func statusOf(t *testing.T, a *Auth, r *http.Request) map[string]any {
	t.Helper()
	w := httptest.NewRecorder()
	a.handleStatus(w, r)
	if w.Code != http.StatusOK || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("status = %d, Cache-Control %q", w.Code, w.Header().Get("Cache-Control"))
	}
	var doc map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestStatusDocument(t *testing.T) {
	type doc = map[string]any
	cases := []struct {
		name     string
		key      string
		required bool
		window   bool
		local    string
		cred     string
		want     doc
	}{
		{"open, station", "", false, false, stationIP, "", doc{"required": false, "configured": false, "authenticated": false, "method": "none", "recovery_s": 0.0}},
		{"open, station with Bearer", "", false, false, stationIP, "bearer", doc{"required": false, "configured": false, "authenticated": false, "method": "none", "recovery_s": 0.0}},
		{"open, portal", "", false, false, portalIP, "", doc{"required": false, "configured": false, "authenticated": true, "method": "portal", "recovery_s": 0.0}},
		{"required, no key, station", "", true, false, stationIP, "", doc{"required": true, "configured": false, "authenticated": false, "method": "none", "recovery_s": 0.0}},
		{"key, nothing", testKey, false, false, stationIP, "", doc{"required": true, "configured": true, "authenticated": false, "method": "none", "recovery_s": 0.0}},
		{"key, Bearer", testKey, false, false, stationIP, "bearer", doc{"required": true, "configured": true, "authenticated": true, "method": "bearer", "recovery_s": 0.0}},
		{"key, wrong Bearer", testKey, false, false, stationIP, "wrong", doc{"required": true, "configured": true, "authenticated": false, "method": "none", "recovery_s": 0.0}},
		{"key, cookie", testKey, false, false, stationIP, "cookie", doc{"required": true, "configured": true, "authenticated": true, "method": "cookie", "recovery_s": 0.0}},
		{"key, stale cookie", testKey, false, false, stationIP, "stale", doc{"required": true, "configured": true, "authenticated": false, "method": "none", "recovery_s": 0.0}},
		{"key, window, portal", testKey, false, true, portalIP, "", doc{"required": true, "configured": true, "authenticated": true, "method": "portal", "recovery_s": 600.0}},
		{"key, window, station", testKey, false, true, stationIP, "", doc{"required": true, "configured": true, "authenticated": false, "method": "none", "recovery_s": 600.0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := newAuth(t, tc.key, func(o *Options) { o.Required = tc.required })
			if tc.window {
				a.OpenWindow(RecoveryWindowS)
			}
			var hdr []string
			switch tc.cred {
			case "bearer":
				hdr = bearerHdr(testKey)
			case "wrong":
				hdr = bearerHdr("wrong key!!")
			case "cookie":
				hdr = cookieHdr(mustLogin(t, a))
			case "stale":
				hdr = cookieHdr("0123456789abcdef0123456789abcdef")
			}
			got := statusOf(t, a, request(http.MethodGet, tc.local, "", hdr...))
			if len(got) != len(tc.want) {
				t.Fatalf("members %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s = %v, want %v", k, got[k], v)
				}
			}
		})
	}
}
