package config

import (
	"net/http"
	"strings"
	"testing"

	"devhost/host/api/apitest"
)

// TestValidationMessages: a refused value is 400 validation whose path names the key and
// whose message says what the key allows, so an operator using curl can fix the value.
func TestValidationMessages(t *testing.T) {
	// Each row: the body, the path of the refusal, and what its message must say.
	type refusal struct {
		body, path string
		says       []string
	}
	cases := map[string]refusal{
		// The spec's key table: bssid is `aa:bb:cc:dd:ee:ff`.
		"bssid not hex":       {`{"wifi":{"bssid0":"zz:bb:cc:dd:ee:ff"}}`, "wifi.bssid0", []string{"aa:bb:cc:dd:ee:ff"}},
		"bssid words":         {`{"wifi":{"bssid1":"not-a-bssid"}}`, "wifi.bssid1", []string{"aa:bb:cc:dd:ee:ff"}},
		"bssid with dashes":   {`{"wifi":{"bssid2":"aa-bb-cc-dd-ee-ff"}}`, "wifi.bssid2", []string{"aa:bb:cc:dd:ee:ff"}},
		"bssid too short":     {`{"wifi":{"bssid3":"aa:bb:cc:dd:ee"}}`, "wifi.bssid3", []string{"aa:bb:cc:dd:ee:ff"}},
		"bssid single digits": {`{"wifi":{"bssid0":"a:b:c:d:e:f"}}`, "wifi.bssid0", []string{"aa:bb:cc:dd:ee:ff"}},

		// Ints: every refusal names the allowed range.
		"int far too large":    {`{"httpd":{"port":1e20}}`, "httpd.port", []string{"1e20", "1..65535"}},
		"int over 32 bits":     {`{"httpd":{"port":99999999999}}`, "httpd.port", []string{"99999999999", "1..65535"}},
		"int below minimum":    {`{"power":{"interval_s":-1}}`, "power.interval_s", []string{"-1", "10..86400"}},
		"int above maximum":    {`{"power":{"interval_s":86401}}`, "power.interval_s", []string{"86401", "10..86400"}},
		"int given a fraction": {`{"httpd":{"port":1.5}}`, "httpd.port", []string{"1.5", "integer", "1..65535"}},
		"int given a string":   {`{"httpd":{"port":"80"}}`, "httpd.port", []string{"integer", "1..65535"}},
		"int tiny exponent":    {`{"httpd":{"port":1e-9999999}}`, "httpd.port", []string{"integer", "1..65535"}},
		"int without a range":  {`{"t":{"big":2147483648}}`, "t.big", []string{"-2147483648..2147483647"}},
		"float far too large":  {`{"t":{"f":1e400}}`, "t.f", []string{"1e400", "-2..2.5"}},
		"float given a string": {`{"t":{"f":"1"}}`, "t.f", []string{"number", "-2..2.5"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			before := f.stored(t)
			_, err := f.c.Apply([]byte(tc.body))
			if err == nil {
				t.Fatalf("%s accepted", tc.body)
			}
			e := apitest.Err(t, err)
			if e.Status != http.StatusBadRequest || e.Code != "validation" || pathOf(e) != tc.path {
				t.Fatalf("got %d %s path %q (%s), want 400 validation path %q", e.Status, e.Code, pathOf(e), e.Message, tc.path)
			}
			for _, w := range tc.says {
				if !strings.Contains(e.Message, w) {
					t.Errorf("message %q does not say %q", e.Message, w)
				}
			}
			if !sameStore(before, f.stored(t)) {
				t.Fatal("the store changed")
			}
		})
	}
}

// TestBSSIDAccepted: the shapes the spec allows, either case, and empty (no pin).
func TestBSSIDAccepted(t *testing.T) {
	f := newFixture(t)
	for _, good := range []string{"aa:bb:cc:dd:ee:ff", "02:00:00:00:00:09", "AA:BB:CC:DD:EE:FF", ""} {
		if _, err := f.c.Apply([]byte(`{"wifi":{"bssid0":"` + good + `"}}`)); err != nil {
			t.Fatalf("bssid %q refused: %v", good, err)
		}
		if got := f.get(t, "wifi", "bssid0"); got != good {
			t.Fatalf("bssid0 = %v, want %q", got, good)
		}
	}
}
