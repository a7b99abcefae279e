package config

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestReadSemantics writes raw values straight into the store, as old firmware, a changed
// descriptor or a bit flip could leave them: a value missing, of the wrong type, out of range
// or too long reads as the default.
func TestReadSemantics(t *testing.T) {
	cases := []struct {
		key  string
		raw  string // "" means absent
		want any
	}{
		{"b", "", false},
		{"b", "true", true},
		{"b", `"true"`, false},
		{"b", "1", false},
		{"b", "garbage", false},
		{"i", "3", 3},
		{"i", "11", 5},
		{"i", "-1", 5},
		{"i", "3.5", 5},
		{"i", `"3"`, 5},
		{"i", "3 4", 5},
		{"big", "2147483648", 0},
		{"f", "2.5", 2.5},
		{"f", "3", 1.5},
		{"f", "NaN", 1.5},
		{"f", "1e999", 1.5},
		{"s", `"abcdefgh"`, "abcdefgh"},
		{"s", `"abcdefghi"`, "abc"},
		{"s", `abc`, "abc"},
		{"s", `"abc`, "abc"},
		{"s", "5", "abc"},
		{"s", `"ABC"`, "ABC"}, // pattern is not a device check
		{"e", `"bb"`, "bb"},
		{"e", `"d"`, "a"},
		{"blob", `"AQID"`, []byte{1, 2, 3}},
		{"blob", `"AQIDBAU="`, []byte{}},
		{"blob", `"!!!"`, []byte{}},
		{"blob", `AQID`, []byte{}},
		{"sec", `"hunter22"`, "hunter22"},
		{"sec", `"` + strings.Repeat("x", 17) + `"`, ""},
		{"tab", `"[{\"name\":\"n\"}]"`, `[{"name":"n"}]`},
		{"tab", `"[{\"bad\":1}]"`, "[]"},
		{"tab", `"{}"`, "[]"},
		{"ro", "8", 8},
	}
	for _, tc := range cases {
		t.Run(tc.key+"="+tc.raw, func(t *testing.T) {
			f := newFixture(t)
			if tc.raw != "" {
				if err := f.st.Set(storeKey("t", tc.key), tc.raw); err != nil {
					t.Fatal(err)
				}
			}
			if got := f.get(t, "t", tc.key); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Get = %#v, want %#v", got, tc.want)
			}
			doc, err := f.c.Document("t")
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]map[string]any
			if err := json.Unmarshal(doc, &m); err != nil {
				t.Fatalf("document is not JSON: %v\n%s", err, doc)
			}
			shown := m["t"][tc.key]
			want := any(tc.want)
			switch w := tc.want.(type) {
			case int:
				want = float64(w)
			case []byte:
				want = b64(w)
			}
			if tc.key == "sec" && tc.want != "" {
				want = Sentinel
			}
			if !reflect.DeepEqual(shown, want) {
				t.Fatalf("document shows %#v, want %#v", shown, want)
			}
		})
	}
}

func b64(b []byte) string {
	s := canonical(b)
	return s[1 : len(s)-1]
}

// TestSecretsRedacted covers how secrets read back in GET /config and the schema.
func TestSecretsRedacted(t *testing.T) {
	f := newFixture(t)
	doc := func() map[string]map[string]any {
		t.Helper()
		b, _ := f.c.Document("")
		var m map[string]map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	secrets := []string{"httpd.api_key", "wifi.psk0", "wifi.psk1", "wifi.psk2", "wifi.psk3", "wifi.portal_psk", "t.sec", "t.secb"}
	for _, p := range secrets {
		ns, key, _ := strings.Cut(p, ".")
		if got := doc()[ns][key]; got != "" {
			t.Errorf("unset secret %s reads %#v, want \"\"", p, got)
		}
	}
	f.put(t, `{"httpd":{"api_key":"0123456789"},"wifi":{"psk0":"password0","psk1":"password1","psk2":"password2","psk3":"password3","portal_psk":"portalpass"},"t":{"sec":"hunter22","secb":"AQID"}}`)
	raw, _ := f.c.Document("")
	for _, s := range []string{"0123456789", "password", "portalpass", "hunter22", "AQID"} {
		if strings.Contains(string(raw), s) {
			t.Fatalf("GET /config leaks %q: %s", s, raw)
		}
	}
	for _, p := range secrets {
		ns, key, _ := strings.Cut(p, ".")
		if got := doc()[ns][key]; got != Sentinel {
			t.Errorf("set secret %s reads %#v, want the sentinel", p, got)
		}
	}
	if got := f.c.String("httpd", "api_key"); got != "0123456789" {
		t.Fatalf("device-internal read of the secret = %q", got)
	}
	var schema map[string]any
	body, _ := f.c.Schema()
	if err := json.Unmarshal(body, &schema); err != nil {
		t.Fatal(err)
	}
	for _, p := range secrets {
		ns, key, _ := strings.Cut(p, ".")
		ks := schema["properties"].(map[string]any)[ns].(map[string]any)["properties"].(map[string]any)[key].(map[string]any)
		if _, has := ks["default"]; has {
			t.Errorf("schema of secret %s carries a default", p)
		}
		if ks["x-dev-secret"] != true || ks["writeOnly"] != true || ks["format"] != "password" {
			t.Errorf("schema of secret %s lacks x-dev-secret/writeOnly/format: %v", p, ks)
		}
	}
	// Non-secrets are never marked.
	ks := schema["properties"].(map[string]any)["wifi"].(map[string]any)["properties"].(map[string]any)["ssid0"].(map[string]any)
	if _, has := ks["x-dev-secret"]; has {
		t.Error("wifi.ssid0 is marked secret")
	}
}

func TestOnChange(t *testing.T) {
	f := newFixture(t)
	var got []string
	f.c.OnChange(func(ns, key string) { got = append(got, ns+"."+key) })
	f.c.OnChange(func(ns, key string) { got = append(got, "2:"+ns+"."+key) })
	f.put(t, `{"t":{"i":3,"b":false}}`) // b unchanged
	f.put(t, `{"t":{"i":3}}`)           // no change
	f.put(t, `{"t":{"i":null}}`)        // reset: a change
	f.put(t, `{"t":{"i":null}}`)        // already default
	want := []string{"t.i", "2:t.i", "t.i", "2:t.i"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("OnChange calls %q, want %q", got, want)
	}
}
