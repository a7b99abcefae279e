package clock

import (
	"net/http"
	"strings"
	"testing"

	"devhost/host/api/apitest"
	"devhost/host/httpd"
	"devhost/host/httpd/httpdtest"
)

// TestOutrankedOverTheWire is the Errors table's 409 `outranked` row through the device's
// real HTTP chain: with SNTP holding the clock, PUT /time `now` is refused and changes nothing.
func TestOutrankedOverTheWire(t *testing.T) {
	tz := &fakeTZ{tz: "UTC0"}
	c, fc := newTest(t, Options{TZ: tz})
	if err := c.Set(SourceSNTP, fc.Now().Add(20*365*24*3600e9)); err != nil {
		t.Fatal(err)
	}
	srv := httpd.New(httpd.Options{})
	if err := srv.HandleAll(c.Routes()); err != nil {
		t.Fatal(err)
	}
	base := httpdtest.Start(t, srv)

	req, _ := http.NewRequest("PUT", base+"/api/v1/time", strings.NewReader(`{"now":1748779300000,"tz":"CET-1"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if code := apitest.ResponseCode(t, resp); resp.StatusCode != 409 || code != "outranked" {
		t.Fatalf("%d %q, want 409 outranked", resp.StatusCode, code)
	}
	if _, src, _ := c.Now(); src != SourceSNTP || len(tz.writes) != 0 {
		t.Fatalf("an outranked PUT changed something: %s %v", src, tz.writes)
	}
}
