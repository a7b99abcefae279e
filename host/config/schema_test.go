package config

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"testing"

	"devhost/host/signalk/sktest/testcert"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compileSchema compiles the generated schema. The compiler's default dialect is draft 4, so
// a 2020-12 result proves the document's $schema was honoured; compiling also validates the
// schema against the 2020-12 meta-schema. Content assertion is on so table keys are checked.
func compileSchema(t *testing.T, body []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	c.AssertContent()
	if err := c.AddResource("config.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("config.json")
	if err != nil {
		t.Fatalf("schema does not compile: %v", err)
	}
	if sch.DraftVersion != 2020 {
		t.Fatalf("schema compiled as draft %d, want 2020", sch.DraftVersion)
	}
	return sch
}

func validate(t *testing.T, sch *jsonschema.Schema, doc string) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(doc)))
	if err != nil {
		t.Fatalf("test document %s is not JSON: %v", doc, err)
	}
	return sch.Validate(v)
}

func TestSchemaValidatesDocuments(t *testing.T) {
	f := newFixture(t)
	body, _ := f.c.Schema()
	sch := compileSchema(t, body)
	var top map[string]any
	_ = json.Unmarshal(body, &top)
	if top["$schema"] != SchemaDraft || top["additionalProperties"] != false {
		t.Fatalf("schema head: $schema %v additionalProperties %v", top["$schema"], top["additionalProperties"])
	}

	doc, _ := f.c.Document("")
	if err := validate(t, sch, string(doc)); err != nil {
		t.Fatalf("default document does not validate: %v", err)
	}
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: testcert.NewCA(t, "Boat CA").Cert.Raw}))
	f.put(t, `{"httpd":{"api_key":"0123456789","port":8080},
		"net":{"hostname":"boat-1"},
		"wifi":{"ssid0":"boat","psk0":"password0","bssid0":"aa:bb:cc:dd:ee:ff","ip_mode":"static","ip":"192.168.1.20","netmask":"255.255.255.0","portal_psk":"portalpass"},
		"sk":{"ca_pem":"`+ca+`","scheme":"https"},
		"t":{"sec":"hunter22","secb":"AQID","blob":"AQIDBA==","s":"abcdefgh","f":-2,"tab":"[{\"name\":\"x\",\"value\":1.5}]"}}`)
	doc, _ = f.c.Document("")
	if err := validate(t, sch, string(doc)); err != nil {
		t.Fatalf("document with values set does not validate: %v\n%s", err, doc)
	}
	for _, ns := range f.c.Namespaces() {
		part, _ := f.c.Document(ns)
		if err := validate(t, sch, string(part)); err != nil {
			t.Fatalf("GET /config?ns=%s does not validate: %v", ns, err)
		}
	}
}

// TestSchemaRefusesBrokenDocuments: for every descriptor rule, a document that breaks it
// does not validate. device says whether PUT /config refuses it too (patterns are schema-only;
// null is a PUT-only reset).
func TestSchemaRefusesBrokenDocuments(t *testing.T) {
	f := newFixture(t)
	body, _ := f.c.Schema()
	sch := compileSchema(t, body)
	cases := []struct {
		name          string
		doc           string
		deviceRefuses bool
	}{
		{"document not an object", `[]`, true},
		{"unknown namespace", `{"nope":{}}`, true},
		{"namespace not an object", `{"t":5}`, true},
		{"unknown key", `{"t":{"zz":1}}`, true},
		{"reserved config_version", `{"t":{"config_version":1}}`, true},
		{"bool wrong type", `{"t":{"b":1}}`, true},
		{"int fraction", `{"t":{"i":5.5}}`, true},
		{"int above max", `{"t":{"i":11}}`, true},
		{"int below min", `{"t":{"i":-1}}`, true},
		{"int beyond 32 bits", `{"t":{"big":2147483648}}`, true},
		{"int as string", `{"t":{"i":"5"}}`, true},
		{"float above max", `{"t":{"f":2.6}}`, true},
		{"float below min", `{"t":{"f":-2.1}}`, true},
		{"float wrong type", `{"t":{"f":"1"}}`, true},
		{"string too long", `{"t":{"s":"abcdefghi"}}`, true},
		{"string wrong type", `{"t":{"s":1}}`, true},
		{"not in enum", `{"t":{"e":"d"}}`, true},
		{"blob not base64", `{"t":{"blob":"AQI"}}`, true},
		{"blob non-zero padding bits", `{"t":{"blob":"AR=="}}`, true},
		{"blob too long", `{"t":{"blob":"AQIDBAUG"}}`, true},
		{"blob wrong type", `{"t":{"blob":1}}`, true},
		{"secret too long", `{"t":{"sec":"12345678901234567"}}`, true},
		{"secret blob not base64", `{"t":{"secb":"*******"}}`, true},
		{"secret blob too long", `{"t":{"secb":"AQIDBAUGBwgJ"}}`, true},
		{"blob one byte over with two-byte tail", `{"t":{"blob":"AQIDBAU="}}`, true},
		{"table not an array", `{"t":{"tab":"{}"}}`, true},
		{"table not JSON", `{"t":{"tab":"[{"}}`, true},
		{"table row not an object", `{"t":{"tab":"[1]"}}`, true},
		{"table unknown column", `{"t":{"tab":"[{\"x\":1}]"}}`, true},
		{"table nested value", `{"t":{"tab":"[{\"name\":{}}]"}}`, true},
		{"httpd.port 0", `{"httpd":{"port":0}}`, true},
		{"sk.scheme outside enum", `{"sk":{"scheme":"ftp"}}`, true},
		{"power.interval_s below 10", `{"power":{"interval_s":5}}`, true},
		{"net.hostname too long", `{"net":{"hostname":"abcdefghijabcdefghijabcdefghijabc"}}`, true},
		{"pattern", `{"t":{"s":"ABC"}}`, false},
		{"net.hostname alphabet", `{"net":{"hostname":"bad name"}}`, true},
		{"httpd.api_key too short", `{"httpd":{"api_key":"short"}}`, true},
		{"wifi.psk0 too short", `{"wifi":{"psk0":"1234567"}}`, true},
		{"wifi.portal_psk too short", `{"wifi":{"portal_psk":"1"}}`, true},
		{"wifi.bssid0 shape", `{"wifi":{"bssid0":"zz:bb:cc:dd:ee:ff"}}`, true},
		{"wifi.ip shape", `{"wifi":{"ip":"1.2.3.256"}}`, false},
		{"null", `{"t":{"b":null}}`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := validate(t, sch, tc.doc); err == nil {
				t.Fatalf("%s validates against the schema", tc.doc)
			}
			_, err := f.c.Apply([]byte(tc.doc))
			if (err != nil) != tc.deviceRefuses {
				t.Fatalf("device refuses = %v (%v), want %v", err != nil, err, tc.deviceRefuses)
			}
		})
	}
}

func TestSchemaExtensions(t *testing.T) {
	f := newFixture(t)
	key := func(ns, k string) map[string]any {
		t.Helper()
		return schemaNS(t, f.c, ns)["properties"].(map[string]any)[k].(map[string]any)
	}
	cases := []struct {
		ns, key string
		want    map[string]any
		absent  []string
	}{
		{"httpd", "port", map[string]any{"type": "integer", "default": 80.0, "minimum": 1.0, "maximum": 65535.0, "x-dev-restartRequired": true}, nil},
		{"t", "i", map[string]any{"x-dev-unit": "s", "x-dev-group": "Numbers", "x-dev-restartRequired": true}, nil},
		{"t", "big", map[string]any{"minimum": -2147483648.0, "maximum": 2147483647.0}, []string{"x-dev-restartRequired", "x-dev-unit"}},
		{"t", "f", map[string]any{"type": "number", "default": 1.5,
			"x-dev-display": map[string]any{"displayMultiplier": 57.29577951308232, "displayOffset": 0.0}}, nil},
		{"t", "s", map[string]any{"maxLength": 8.0, "pattern": "^[a-z]*$", "default": "abc"}, nil},
		{"t", "e", map[string]any{"enum": []any{"a", "bb", "ccc"}, "maxLength": 3.0}, nil},
		{"t", "u", map[string]any{"maxLength": 256.0}, nil},
		{"t", "blob", map[string]any{"type": "string", "x-dev-type": "blob", "x-dev-maxBytes": 4.0, "maxLength": 8.0,
			"contentEncoding": "base64", "default": ""}, nil},
		{"sk", "ca_pem", map[string]any{"x-dev-type": "blob", "x-dev-maxBytes": 4096.0}, nil},
		{"t", "ro", map[string]any{"readOnly": true}, nil},
		{"t", "tab", map[string]any{"default": "[]", "maxLength": 3999.0, "contentMediaType": "application/json",
			"x-dev-display": map[string]any{"format": "table", "columns": []any{"name", "value"}}}, nil},
		{"t", "sec", map[string]any{"x-dev-secret": true, "writeOnly": true, "format": "password"}, []string{"default"}},
		{"wifi", "hostname", map[string]any{"deprecated": true, "x-dev-movesTo": "net.hostname"}, nil},
		{"sk", "scheme", map[string]any{"default": "auto"}, []string{"x-dev-restartRequired"}},
	}
	for _, tc := range cases {
		got := key(tc.ns, tc.key)
		for name, want := range tc.want {
			if g, _ := json.Marshal(got[name]); string(g) != string(mustJSON(want)) {
				t.Errorf("%s.%s %s = %s, want %s", tc.ns, tc.key, name, g, mustJSON(want))
			}
		}
		for _, name := range tc.absent {
			if _, has := got[name]; has {
				t.Errorf("%s.%s carries %s", tc.ns, tc.key, name)
			}
		}
	}
	for _, ns := range []string{"httpd", "net", "wifi", "ota", "power", "time"} {
		if v := schemaNS(t, f.c, ns)["x-dev-version"]; v != 1.0 {
			t.Errorf("%s x-dev-version = %v, want 1", ns, v)
		}
	}
	if v := schemaNS(t, f.c, "sk")["x-dev-version"]; v != 2.0 {
		t.Errorf("sk x-dev-version = %v, want 2", v)
	}
	if schemaNS(t, f.c, "t")["additionalProperties"] != false {
		t.Error("namespace schema allows additional properties")
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
