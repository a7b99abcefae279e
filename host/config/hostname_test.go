package config

import (
	"net/http"
	"strings"
	"testing"

	"devhost/host/api/apitest"
)

// TestHostnameAlphabetRefused: net.hostname is a DNS label, so PUT /config refuses a value
// outside [A-Za-z0-9-], or beginning or ending with a hyphen, with nothing written, while schema-only pattern keys (wifi.ip) still take any string.
func TestHostnameAlphabetRefused(t *testing.T) {
	f := newFixture(t)
	for _, bad := range []string{"bad name", "boat.local", "bööt", "under_score", "semi;colon", "-boat", "boat-", "-", strings.Repeat("a", 33)} {
		before := f.stored(t)
		_, err := f.c.Apply([]byte(`{"net":{"hostname":"` + bad + `"}}`))
		if err == nil {
			t.Fatalf("hostname %q accepted", bad)
		}
		e := apitest.Err(t, err)
		if e.Status != http.StatusBadRequest || e.Code != "validation" || pathOf(e) != "net.hostname" {
			t.Fatalf("hostname %q: %d %s path %s", bad, e.Status, e.Code, pathOf(e))
		}
		if !sameStore(before, f.stored(t)) {
			t.Fatalf("hostname %q: the store changed", bad)
		}
	}
	if err := f.c.Set("net", "hostname", "bad name"); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("Set of a bad hostname: %v", err)
	}
	for _, good := range []string{"boat-1", "Sea-Dog", "a", "1", "a--b", strings.Repeat("a", 32), ""} {
		if _, err := f.c.Apply([]byte(`{"net":{"hostname":"` + good + `"}}`)); err != nil {
			t.Fatalf("hostname %q refused: %v", good, err)
		}
	}
	// A schema-only pattern still lets the device take the value (the UI checks it).
	f.put(t, `{"wifi":{"ip":"1.2.3.256"}}`)
}
