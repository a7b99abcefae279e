package config

import (
	"bytes"
	"os"
	"testing"
)

// keys.go is what KeyConstants makes of today's descriptors: a key added to builtin.go
// without `make generate` fails here.
func TestGeneratedKeysAreCurrent(t *testing.T) {
	want, err := KeyConstants()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("keys.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("keys.go is not what KeyConstants generates from builtin.go now: run make generate")
	}
	for in, want := range map[string]string{"batch_ms": "BatchMS", "ssid0": "SSID0", "connect_tmo_s": "ConnectTimeoutS",
		"api_key": "APIKey", "wifi": "WiFi", "tz": "TZ", "manifest_url": "ManifestURL"} {
		if got := goName(in); got != want {
			t.Errorf("goName(%q) = %q, want %q", in, got, want)
		}
	}
}
