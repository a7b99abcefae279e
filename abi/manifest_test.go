package abi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// testModule is the smallest valid Wasm module: magic and version.
var testModule = []byte("\x00asm\x01\x00\x00\x00")

func testManifest() Manifest {
	return Manifest{
		ID: "app", Name: "Switch bank", Version: "1.0.0", ABI: Version,
		Capabilities: []Capability{CapConfig, CapLog, CapHTTP},
		Routes:       []Route{{Method: "GET", Path: "/app/switches"}},
	}
}

func TestManifestValidate(t *testing.T) {
	ok := testManifest()
	cases := []struct {
		name string
		edit func(m *Manifest)
		want string // substring of the error; "" means valid
	}{
		{"valid", func(m *Manifest) {}, ""},
		{"id 12 chars", func(m *Manifest) { m.ID = "abcdefghijkl"; m.Routes = nil; m.Capabilities = nil }, ""},
		{"id 13 chars", func(m *Manifest) { m.ID = "abcdefghijklm" }, "must match"},
		{"id uppercase", func(m *Manifest) { m.ID = "App" }, "must match"},
		{"id leading digit", func(m *Manifest) { m.ID = "1app" }, "must match"},
		{"id leading underscore", func(m *Manifest) { m.ID = "_app" }, "must match"},
		{"id empty", func(m *Manifest) { m.ID = "" }, "must match"},
		{"id reserved core", func(m *Manifest) { m.ID = "config" }, "reserved"},
		{"id reserved host", func(m *Manifest) { m.ID = "keys" }, "reserved"},
		{"id reserved test", func(m *Manifest) { m.ID = "test" }, "reserved"},
		{"name missing", func(m *Manifest) { m.Name = " " }, "name is required"},
		{"name long", func(m *Manifest) { m.Name = strings.Repeat("n", 65) }, "name of 65"},
		{"name control", func(m *Manifest) { m.Name = "a\x00b" }, "control"},
		{"version prerelease", func(m *Manifest) { m.Version = "1.2.3-beta.1" }, ""},
		{"version empty", func(m *Manifest) { m.Version = "" }, "version"},
		{"version letters", func(m *Manifest) { m.Version = "v1" }, "version"},
		{"abi zero", func(m *Manifest) { m.ABI = 0 }, "abi 0"},
		{"abi minor negative", func(m *Manifest) { m.ABIMinor = -1 }, "abi_minor"},
		{"description long", func(m *Manifest) { m.Description = strings.Repeat("d", 513) }, "description of 513"},
		{"unknown capability", func(m *Manifest) { m.Capabilities = append(m.Capabilities, "filesystem") }, "unknown capability"},
		{"capability twice", func(m *Manifest) { m.Capabilities = append(m.Capabilities, CapLog) }, "twice"},
		{"reboot without health", func(m *Manifest) { m.Capabilities = append(m.Capabilities, CapHealthReboot) }, "needs health"},
		{"reboot with health", func(m *Manifest) { m.Capabilities = append(m.Capabilities, CapHealth, CapHealthReboot) }, ""},
		{"routes without http", func(m *Manifest) { m.Capabilities = []Capability{CapLog} }, "http capability"},
		{"events without events", func(m *Manifest) { m.Events = []string{"app"} }, "events capability"},
		{"route outside prefix", func(m *Manifest) { m.Routes[0].Path = "/health" }, "must be /app"},
		{"route prefix lookalike", func(m *Manifest) { m.Routes[0].Path = "/apple" }, "must be /app"},
		{"route prefix itself", func(m *Manifest) { m.Routes[0].Path = "/app" }, ""},
		{"route param", func(m *Manifest) { m.Routes[0].Path = "/app/switches/:name" }, ""},
		{"route catch-all", func(m *Manifest) { m.Routes[0].Path = "/app/*rest" }, "segment"},
		{"route empty segment", func(m *Manifest) { m.Routes[0].Path = "/app//x" }, "segment"},
		{"route trailing slash", func(m *Manifest) { m.Routes[0].Path = "/app/" }, "segment"},
		{"route dot dot", func(m *Manifest) { m.Routes[0].Path = "/app/.." }, "segment"},
		{"route method", func(m *Manifest) { m.Routes[0].Method = "get" }, "method"},
		{"route special prov", func(m *Manifest) { m.Routes[0] = Route{Method: "GET", Path: "/prov", Public: true} }, ""},
		{"route special ble", func(m *Manifest) { m.Routes[0] = Route{Method: "GET", Path: "/ble/status"} }, ""},
		{"route special wrong method", func(m *Manifest) { m.Routes[0] = Route{Method: "POST", Path: "/prov"} }, "must be /app"},
		{"route twice", func(m *Manifest) { m.Routes = append(m.Routes, m.Routes[0]) }, "twice"},
		{"route param conflict", func(m *Manifest) {
			m.Routes = []Route{{Method: "GET", Path: "/app/:name"}, {Method: "GET", Path: "/app/list"}}
		}, "overlap"},
		{"route param other method", func(m *Manifest) {
			m.Routes = []Route{{Method: "GET", Path: "/app/:name"}, {Method: "POST", Path: "/app/list"}}
		}, ""},
		{"route param twice", func(m *Manifest) { m.Routes[0].Path = "/app/:a/:a" }, "twice"},
		{"too many routes", func(m *Manifest) {
			m.Routes = nil
			for i := 0; i < 17; i++ {
				m.Routes = append(m.Routes, Route{Method: "GET", Path: "/app/r" + strings.Repeat("x", i)})
			}
		}, "17 routes"},
		{"event own", func(m *Manifest) {
			m.Capabilities = append(m.Capabilities, CapEvents)
			m.Events = []string{"app", "app_state"}
		}, ""},
		{"event special", func(m *Manifest) { m.Capabilities = append(m.Capabilities, CapEvents); m.Events = []string{"ble"} }, ""},
		{"event foreign", func(m *Manifest) { m.Capabilities = append(m.Capabilities, CapEvents); m.Events = []string{"wifi"} }, "must be app"},
		{"event core lookalike", func(m *Manifest) { m.Capabilities = append(m.Capabilities, CapEvents); m.Events = []string{"apple"} }, "must be app"},
		{"event twice", func(m *Manifest) {
			m.Capabilities = append(m.Capabilities, CapEvents)
			m.Events = []string{"app", "app"}
		}, "twice"},
		{"event bad name", func(m *Manifest) { m.Capabilities = append(m.Capabilities, CapEvents); m.Events = []string{"App"} }, "must match"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := ok
			m.Capabilities = append([]Capability(nil), ok.Capabilities...)
			m.Routes = append([]Route(nil), ok.Routes...)
			c.edit(&m)
			err := m.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("accepted, want error with %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("error %q, want %q", err, c.want)
			}
		})
	}
}

func TestParseManifestStrict(t *testing.T) {
	good := `{"id":"app","name":"A","version":"1.0.0","abi":1,"capabilities":["log"]}`
	if _, err := ParseManifest([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]string{
		"unknown member":     `{"id":"app","name":"A","version":"1.0.0","abi":1,"capabilities":[],"memory":9}`,
		"duplicate member":   `{"id":"app","name":"A","version":"1.0.0","abi":1,"capabilities":[],"id":"cfg"}`,
		"duplicate in route": `{"id":"app","name":"A","version":"1.0.0","abi":1,"capabilities":["http"],"routes":[{"method":"GET","path":"/app","path":"/x"}]}`,
		"trailing":           good + ` {}`,
		"not an object":      `[]`,
		"wrong type":         `{"id":"app","name":"A","version":"1.0.0","abi":"1","capabilities":[]}`,
		"too large":          `{"description":"` + strings.Repeat("x", MaxManifest) + `"}`,
	} {
		if _, err := ParseManifest([]byte(in)); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	// Nested arrays and objects do not confuse the duplicate check.
	nested := `{"id":"app","name":"A","version":"1.0.0","abi":1,"capabilities":["http"],` +
		`"routes":[{"method":"GET","path":"/app/a"},{"method":"GET","path":"/app/b"}]}`
	if _, err := ParseManifest([]byte(nested)); err != nil {
		t.Fatalf("nested: %v", err)
	}
}

func TestCheckVersion(t *testing.T) {
	for _, c := range []struct {
		major, minor int
		ok           bool
		msg          string
	}{
		{Version, 0, true, ""},
		{Version, Minor, true, ""},
		{Version, Minor + 1, false, fmt.Sprintf("needs ABI 1.%d, this host provides ABI 1.%d", Minor+1, Minor)},
		{Version + 1, 0, false, "speaks ABI 2, this host speaks ABI 1"},
		{0, 0, false, "speaks ABI 0"},
		{Version, -1, false, "needs"},
	} {
		err := CheckVersion(c.major, c.minor)
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), c.msg)) {
			t.Errorf("CheckVersion(%d,%d) = %v", c.major, c.minor, err)
		}
	}
}

func TestCapabilityTables(t *testing.T) {
	if len(Capabilities) != 24 {
		t.Fatalf("%d capabilities", len(Capabilities))
	}
	if Capability("fs").Known() || !CapGPIO.Known() {
		t.Fatal("Known")
	}
	for fn, c := range FunctionCapability {
		if fn != FnEventRead && fn != FnDormant && !c.Known() {
			t.Errorf("%s needs unknown capability %q", fn, c)
		}
	}
	if len(FunctionCapability) != 46 {
		t.Fatalf("%d host functions in the table", len(FunctionCapability))
	}
}

func FuzzManifest(f *testing.F) {
	f.Add([]byte(`{"id":"app","name":"A","version":"1.0.0","abi":1,"capabilities":["log"]}`))
	f.Add([]byte(`{"id":"app","name":"Switch","version":"1.0.0-rc.1","abi":1,"abi_minor":0,"description":"d",` +
		`"capabilities":["http","events","health","health.reboot"],"routes":[{"method":"GET","path":"/app/:x","public":true},` +
		`{"method":"GET","path":"/prov"}],"events":["app","ble"]}`))
	f.Add([]byte(`{"id":"app","id":"app"}`))
	f.Add([]byte(`{"routes":[{"method":"GET","path":"/app/a"},{"method":"GET","path":"/app/:b"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest(b)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("parsed manifest fails Validate: %v", err)
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := ParseManifest(again)
		if err != nil {
			t.Fatalf("re-encoded manifest refused: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed the manifest: %+v vs %+v", m, m2)
		}
	})
}

func TestSignaturesCoverEveryFunction(t *testing.T) {
	if len(Signatures) != len(FunctionCapability) {
		t.Fatalf("%d signatures, %d functions", len(Signatures), len(FunctionCapability))
	}
	for fn := range FunctionCapability {
		s, ok := Signatures[fn]
		if !ok || len(s.Results) != 1 || s.Results[0] != I32 {
			t.Errorf("%s: signature %+v", fn, s)
		}
	}
}
