package config

import (
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"

	"devhost/host/api/apitest"
	"devhost/host/signalk/sktest/testcert"
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
	// A pin in another form stored before the check reads as no pin, as the spec's read
	// semantics treat a stored value of the wrong type.
	if err := f.st.Set(storeKey("wifi", "bssid1"), `"aa-bb-cc-dd-ee-ff"`); err != nil {
		t.Fatal(err)
	}
	if got := f.get(t, "wifi", "bssid1"); got != "" {
		t.Fatalf("stored malformed bssid1 reads %q, want empty", got)
	}
}

// TestCAPEMChecked: sk.ca_pem (a blob) must hold PEM CERTIFICATE blocks, as PUT /sk/tls/ca
// requires; anything else is 400 validation naming sk.ca_pem and saying what was wrong.
func TestCAPEMChecked(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	block := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	ca := testcert.NewCA(t, "Boat CA")
	good := block("CERTIFICATE", ca.Cert.Raw)
	refused := map[string]struct{ value, says string }{
		"not PEM":             {"just some text", "not PEM"},
		"PEM of a key":        {block("PRIVATE KEY", []byte{1, 2, 3}), `"PRIVATE KEY" is not a CERTIFICATE`},
		"certificate garbage": {block("CERTIFICATE", []byte{1, 2, 3}), "certificate 1"},
		"only whitespace":     {"\n \n", "no CERTIFICATE block"},
		"text after the CA":   {good + "trailing words\n", "text outside a PEM block"},
	}
	f := newFixture(t)
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			before := f.stored(t)
			_, err := f.c.Apply([]byte(`{"sk":{"ca_pem":"` + b64(tc.value) + `"}}`))
			if err == nil {
				t.Fatal("accepted")
			}
			e := apitest.Err(t, err)
			if e.Status != http.StatusBadRequest || e.Code != "validation" || pathOf(e) != "sk.ca_pem" {
				t.Fatalf("got %d %s path %q (%s), want 400 validation path sk.ca_pem", e.Status, e.Code, pathOf(e), e.Message)
			}
			if !strings.Contains(e.Message, tc.says) {
				t.Errorf("message %q does not say %q", e.Message, tc.says)
			}
			if !sameStore(before, f.stored(t)) {
				t.Fatal("the store changed")
			}
			if err := f.c.Set("sk", "ca_pem", []byte(tc.value)); err == nil {
				t.Fatal("Set accepted it")
			}
		})
	}
	for _, ok := range []string{good, good + block("CERTIFICATE", ca.Cert.Raw), ""} {
		if _, err := f.c.Apply([]byte(`{"sk":{"ca_pem":"` + b64(ok) + `"}}`)); err != nil {
			t.Fatalf("refused %q: %v", ok, err)
		}
		if got := f.get(t, "sk", "ca_pem"); string(got.([]byte)) != ok {
			t.Fatalf("sk.ca_pem = %q, want %q", got, ok)
		}
	}
}
