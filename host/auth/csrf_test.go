package auth

import (
	"net/http"
	"testing"

	"devhost/host/api"
)

func TestOriginCheck(t *testing.T) {
	cases := []struct {
		name    string
		method  string
		host    string
		cred    string // "cookie", "bearer", "stale"
		origin  string
		referer string
		want    int // 0 = let through
	}{
		{"POST matching Origin", "POST", "dev.local", "cookie", "http://dev.local", "", 0},
		{"PUT matching Origin", "PUT", "dev.local", "cookie", "http://dev.local", "", 0},
		{"DELETE matching Origin", "DELETE", "dev.local", "cookie", "http://dev.local", "", 0},
		{"POST Origin other host", "POST", "dev.local", "cookie", "http://evil.example", "", 403},
		{"PUT Origin other host", "PUT", "dev.local", "cookie", "http://evil.example", "", 403},
		{"DELETE Origin other host", "DELETE", "dev.local", "cookie", "http://evil.example", "", 403},
		{"PATCH Origin other host", "PATCH", "dev.local", "cookie", "http://evil.example", "", 403},
		{"no Origin, Referer matching", "POST", "dev.local", "cookie", "", "http://dev.local/ui/config?x=1", 0},
		{"no Origin, Referer other", "POST", "dev.local", "cookie", "", "http://evil.example/dev.local", 403},
		{"neither", "POST", "dev.local", "cookie", "", "", 403},
		{"Origin wins over Referer", "POST", "dev.local", "cookie", "http://evil.example", "http://dev.local/", 403},
		{"Origin null", "POST", "dev.local", "cookie", "null", "http://dev.local/", 403},
		{"Origin garbage", "POST", "dev.local", "cookie", "dev.local", "", 403},
		{"Origin with userinfo", "POST", "dev.local", "cookie", "http://dev.local@evil.example", "", 403},
		{"Origin host case", "POST", "dev.local", "cookie", "http://DEV.Local", "", 0},
		{"Origin https same host", "POST", "dev.local", "cookie", "https://dev.local", "", 0},
		{"same non-default port", "POST", "dev.local:8080", "cookie", "http://dev.local:8080", "", 0},
		{"Origin port, Host none", "POST", "dev.local", "cookie", "http://dev.local:8080", "", 403},
		{"Origin none, Host port", "POST", "dev.local:8080", "cookie", "http://dev.local", "", 403},
		{"explicit :80 not normalised", "POST", "dev.local", "cookie", "http://dev.local:80", "", 403},
		{"different port", "POST", "dev.local:8080", "cookie", "http://dev.local:8081", "", 403},
		{"IPv6 literal", "POST", "[::1]:8080", "cookie", "http://[::1]:8080", "", 0},
		{"IP host", "POST", "192.168.4.1", "cookie", "http://192.168.4.1", "", 0},
		{"Bearer without Origin", "POST", "dev.local", "bearer", "", "", 0},
		{"Bearer with other Origin", "DELETE", "dev.local", "bearer", "http://evil.example", "", 0},
		{"GET cookie no Origin", "GET", "dev.local", "cookie", "", "", 0},
		{"HEAD cookie other Origin", "HEAD", "dev.local", "cookie", "http://evil.example", "", 0},
		{"stale cookie no Origin is 401", "POST", "dev.local", "stale", "", "", 401},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := newAuth(t, testKey, nil)
			var hdr []string
			switch tc.cred {
			case "cookie":
				hdr = cookieHdr(mustLogin(t, a))
			case "bearer":
				hdr = bearerHdr(testKey)
			case "stale":
				hdr = cookieHdr("0123456789abcdef0123456789abcdef")
			}
			if tc.origin != "" {
				hdr = append(hdr, "Origin", tc.origin)
			}
			if tc.referer != "" {
				hdr = append(hdr, "Referer", tc.referer)
			}
			r := request(tc.method, stationIP, "", hdr...)
			r.Host = tc.host
			_, err := a.Check(r)
			st, code := errCode(t, err)
			if st != tc.want {
				t.Fatalf("status %d (%v), want %d", st, err, tc.want)
			}
			if st == 403 && code != api.CodeForbidden {
				t.Fatalf("code %q, want forbidden", code)
			}
		})
	}
}

func TestRefusedCrossOriginDoesNotTouchSession(t *testing.T) {
	a, e := newAuth(t, testKey, nil)
	first := mustLogin(t, a)
	e.clock.Advance(1)
	others := []string{mustLogin(t, a), mustLogin(t, a), mustLogin(t, a)}
	e.clock.Advance(1)
	_, err := a.Check(request(http.MethodPost, stationIP, "", append(cookieHdr(first), "Origin", "http://evil.example")...))
	if st, _ := errCode(t, err); st != http.StatusForbidden {
		t.Fatalf("cross-origin POST = %d", st)
	}
	mustLogin(t, a) // evicts the idle-longest: still first, the refused request was no use
	if cookieOK(t, a, first) {
		t.Fatal("a refused request counted as a use of the session")
	}
	for _, id := range others {
		if !cookieOK(t, a, id) {
			t.Fatal("wrong session evicted")
		}
	}
}
