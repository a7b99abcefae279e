package config

import (
	"strings"
	"testing"
)

func oneKey(k Key) Namespace {
	return Namespace{Name: "d", Version: 1, Title: "D", Keys: []Key{k}}
}

// TestDescriptorRules: every rule of the descriptor table refuses a descriptor that breaks it.
func TestDescriptorRules(t *testing.T) {
	str := func(mod func(*Key)) Namespace {
		k := Key{Name: "k", Type: TypeString, Default: ""}
		mod(&k)
		return oneKey(k)
	}
	num := func(typ string, mod func(*Key)) Namespace {
		k := Key{Name: "k", Type: typ, Default: 1}
		mod(&k)
		return oneKey(k)
	}
	bad := []struct {
		name string
		ns   Namespace
	}{
		{"namespace uppercase", Namespace{Name: "Abc", Version: 1, Title: "x"}},
		{"namespace leading digit", Namespace{Name: "1abc", Version: 1, Title: "x"}},
		{"namespace leading underscore", Namespace{Name: "_abc", Version: 1, Title: "x"}},
		{"namespace 16 characters", Namespace{Name: "abcdefghijklmnop", Version: 1, Title: "x"}},
		{"namespace empty", Namespace{Name: "", Version: 1, Title: "x"}},
		{"namespace with dot", Namespace{Name: "a.b", Version: 1, Title: "x"}},
		{"version 0", Namespace{Name: "a", Version: 0, Title: "x"}},
		{"no title", Namespace{Name: "a", Version: 1}},
		{"step beyond version", Namespace{Name: "a", Version: 2, Title: "x", Steps: map[int]Step{3: nil}}},
		{"step to version 1", Namespace{Name: "a", Version: 2, Title: "x", Steps: map[int]Step{1: nil}}},
		{"key name 16 characters", str(func(k *Key) { k.Name = "abcdefghijklmnop" })},
		{"key name empty", str(func(k *Key) { k.Name = "" })},
		{"key name with dot", str(func(k *Key) { k.Name = "a.b" })},
		{"key config_version", str(func(k *Key) { k.Name = VersionKey })},
		{"duplicate key", Namespace{Name: "a", Version: 1, Title: "x", Keys: []Key{{Name: "k", Type: TypeBool, Default: true}, {Name: "k", Type: TypeBool, Default: true}}}},
		{"unknown type", str(func(k *Key) { k.Type = "uint" })},
		{"default missing", str(func(k *Key) { k.Default = nil })},
		{"bool default missing", num(TypeBool, func(k *Key) { k.Default = nil })},
		{"default wrong type", str(func(k *Key) { k.Default = 1 })},
		{"bool default wrong type", num(TypeBool, func(k *Key) { k.Default = "true" })},
		{"int default fraction", num(TypeInt, func(k *Key) { k.Default = 1.5 })},
		{"int default beyond 32 bits", num(TypeInt, func(k *Key) { k.Default = int64(1) << 31 })},
		{"int default below min", num(TypeInt, func(k *Key) { k.Min = Float(2) })},
		{"float default above max", num(TypeFloat, func(k *Key) { k.Max = Float(0.5) })},
		{"min above max", num(TypeInt, func(k *Key) { k.Min, k.Max = Float(3), Float(2) })},
		{"int min not integral", num(TypeInt, func(k *Key) { k.Min = Float(0.5) })},
		{"int max beyond 32 bits", num(TypeInt, func(k *Key) { k.Max = Float(1 << 32) })},
		{"min on a string", str(func(k *Key) { k.Min = Float(0) })},
		{"max on a bool", num(TypeBool, func(k *Key) { k.Default, k.Max = true, Float(1) })},
		{"maxLength on an int", num(TypeInt, func(k *Key) { k.MaxLength = 4 })},
		{"maxLength negative", str(func(k *Key) { k.MaxLength = -1 })},
		{"string maxLength 4000", str(func(k *Key) { k.MaxLength = 4000 })},
		{"blob maxLength 508001", oneKey(Key{Name: "k", Type: TypeBlob, MaxLength: 508001})},
		{"blob default not empty", oneKey(Key{Name: "k", Type: TypeBlob, Default: "AQ=="})},
		{"default too long", str(func(k *Key) { k.Default, k.MaxLength = "abcde", 4 })},
		{"enum on an int", num(TypeInt, func(k *Key) { k.Enum = []string{"1"} })},
		{"enum empty", str(func(k *Key) { k.Enum = []string{} })},
		{"enum repeated", str(func(k *Key) { k.Default, k.Enum = "a", []string{"a", "a"} })},
		{"default not in enum", str(func(k *Key) { k.Default, k.Enum = "c", []string{"a", "b"} })},
		{"enum longer than maxLength", str(func(k *Key) { k.Default, k.Enum, k.MaxLength = "a", []string{"a", "bbbb"}, 3 })},
		{"minLength on an int", num(TypeInt, func(k *Key) { k.MinLength = 1 })},
		{"minLength above maxLength", str(func(k *Key) { k.MinLength, k.MaxLength = 9, 8 })},
		{"minLength negative", str(func(k *Key) { k.MinLength = -1 })},
		{"secret minLength above the sentinel", str(func(k *Key) { k.Secret, k.MinLength = true, 9 })},
		{"default shorter than minLength", str(func(k *Key) { k.Default, k.MinLength = "ab", 3 })},
		{"pattern on an int", num(TypeInt, func(k *Key) { k.Pattern = "^1$" })},
		{"pattern does not compile", str(func(k *Key) { k.Pattern = "([" })},
		{"default does not match pattern", str(func(k *Key) { k.Default, k.Pattern = "A", "^[a-z]*$" })},
		{"secret on an int", num(TypeInt, func(k *Key) { k.Secret = true })},
		{"secret with a default", str(func(k *Key) { k.Default, k.Secret = "abcdefgh", true })},
		{"secret too short for the sentinel", str(func(k *Key) { k.Secret, k.MaxLength = true, 7 })},
		{"secret blob too short for the sentinel", oneKey(Key{Name: "k", Type: TypeBlob, Secret: true, MaxLength: 3})},
		{"group 25 characters", str(func(k *Key) { k.Group = strings.Repeat("g", 25) })},
		{"x on a bool", num(TypeBool, func(k *Key) { k.Default, k.X = true, &X{Format: "x"} })},
		{"x on a blob", oneKey(Key{Name: "k", Type: TypeBlob, X: &X{Format: "hex"}})},
		{"displayMultiplier zero", num(TypeFloat, func(k *Key) { k.X = &X{DisplayMultiplier: Float(0)} })},
		{"displayMultiplier on a string", str(func(k *Key) { k.X = &X{DisplayMultiplier: Float(2)} })},
		{"displayOffset on a string", str(func(k *Key) { k.X = &X{DisplayOffset: Float(2)} })},
		{"table on an int", num(TypeInt, func(k *Key) { k.X = &X{Format: FormatTable, Columns: []string{"a"}} })},
		{"table without columns", str(func(k *Key) { k.Default, k.X = nil, &X{Format: FormatTable} })},
		{"table with repeated columns", str(func(k *Key) { k.Default, k.X = nil, &X{Format: FormatTable, Columns: []string{"a", "a"}} })},
		{"columns without table", str(func(k *Key) { k.X = &X{Columns: []string{"a"}} })},
		{"table with enum", str(func(k *Key) {
			k.Default, k.Enum, k.X = "[]", []string{"[]"}, &X{Format: FormatTable, Columns: []string{"a"}}
		})},
		{"table default not a table", str(func(k *Key) { k.Default, k.X = "{}", &X{Format: FormatTable, Columns: []string{"a"}} })},
		{"table default unknown column", str(func(k *Key) { k.Default, k.X = `[{"b":1}]`, &X{Format: FormatTable, Columns: []string{"a"}} })},
		{"movesTo on an int", num(TypeInt, func(k *Key) { k.MovesTo = "a.b" })},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			if err := ValidateNamespace(tc.ns); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestDescriptorResolvedLimits: the defaults the descriptor table gives for omitted fields.
func TestDescriptorResolvedLimits(t *testing.T) {
	ns := Namespace{Name: "d", Version: 1, Title: "D", Keys: []Key{
		{Name: "s", Type: TypeString, Default: ""},
		{Name: "b", Type: TypeBlob},
		{Name: "e", Type: TypeString, Default: "a", Enum: []string{"a", "long_value", "mid"}},
		{Name: "tab", Type: TypeString, X: &X{Format: FormatTable, Columns: []string{"c"}}},
		{Name: "smax", Type: TypeString, Default: "", MaxLength: MaxStringBytes},
		{Name: "bmax", Type: TypeBlob, MaxLength: MaxBlobBytes},
		{Name: "i", Type: TypeInt, Default: int64(-3)},
		{Name: "f", Type: TypeFloat, Default: 2, X: &X{DisplayMultiplier: Float(-1), Format: "%.1f"}},
		{Name: "u", Type: TypeInt, Default: uint16(7), X: &X{DisplayOffset: Float(-273.15)}},
		{Name: "fmt", Type: TypeString, Default: "", X: &X{Format: "multiline"}},
	}}
	d, err := compile(ns)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		maxLen int
		def    string
	}{
		"s": {256, `""`}, "b": {1024, `""`}, "e": {10, `"a"`}, "tab": {3999, `"[]"`},
		"smax": {3999, `""`}, "bmax": {508000, `""`}, "i": {0, "-3"}, "f": {0, "2"}, "u": {0, "7"},
	}
	for name, w := range want {
		k := d.keys[name]
		if k.maxLen != w.maxLen || k.defJSON != w.def {
			t.Errorf("%s: maxLength %d default %s, want %d %s", name, k.maxLen, k.defJSON, w.maxLen, w.def)
		}
	}
}

// TestBuiltinKeys checks the built-in namespaces against the spec's "Known namespaces and
// keys" table: every key, its type, default, range, enum, restart flag and secrecy.
func TestBuiltinKeys(t *testing.T) {
	type spec struct {
		typ      string
		def      any
		min, max float64 // 0,0: not checked
		enum     string  // comma list
		restart  bool
		secret   bool
		maxLen   int
	}
	table := map[string]spec{
		"httpd.port":          {typ: TypeInt, def: 80, min: 1, max: 65535, restart: true},
		"httpd.api_key":       {typ: TypeString, def: "", secret: true, maxLen: 64},
		"httpd.session_ttl_s": {typ: TypeInt, def: 86400},
		"httpd.hosts":         {typ: TypeString, def: "", maxLen: MaxHostsLen},
		"net.hostname":        {typ: TypeString, def: "", restart: true, maxLen: 32},
		"wifi.sta_enabled":    {typ: TypeBool, def: true},
		"wifi.ip_mode":        {typ: TypeString, def: "dhcp", enum: "dhcp,static", restart: true},
		"wifi.ip":             {typ: TypeString, def: ""},
		"wifi.netmask":        {typ: TypeString, def: ""},
		"wifi.gateway":        {typ: TypeString, def: "", restart: true},
		"wifi.dns0":           {typ: TypeString, def: "", restart: true},
		"wifi.dns1":           {typ: TypeString, def: "", restart: true},
		"wifi.portal_enabled": {typ: TypeBool, def: true},
		"wifi.portal_ssid":    {typ: TypeString, def: ""},
		"wifi.portal_psk":     {typ: TypeString, def: "", secret: true, maxLen: 63},
		"wifi.portal_after_s": {typ: TypeInt, def: 90},
		"wifi.backoff_max_s":  {typ: TypeInt, def: 300},
		"wifi.hostname":       {typ: TypeString, def: "", maxLen: 32},
		"wifi.connect_tmo_s":  {typ: TypeInt, def: 15},
		"wifi.dhcp_tmo_s":     {typ: TypeInt, def: 30},
		"ota.manifest_src":    {typ: TypeString, def: "url", enum: "url,signalk"},
		"ota.manifest_url":    {typ: TypeString, def: ""},
		"ota.manifest_path":   {typ: TypeString, def: "/plugins/signalk-dev-updates/manifest.json"},
		"ota.channel":         {typ: TypeString, def: "stable"},
		"ota.auto_check":      {typ: TypeBool, def: true},
		"ota.check_h":         {typ: TypeInt, def: 24},
		"ota.auto_install":    {typ: TypeBool, def: false},
		"ota.allow_insecure":  {typ: TypeBool, def: false},
		"ota.confirm_tmo_s":   {typ: TypeInt, def: 600},
		"power.mode":          {typ: TypeString, def: "off", enum: "off,cycle"},
		"power.interval_s":    {typ: TypeInt, def: 300, min: 10, max: 86400},
		"power.window_s":      {typ: TypeInt, def: 300, min: 30, max: 86400},
		"power.awake_max_s":   {typ: TypeInt, def: 30, min: 5, max: 600},
		"power.publish_ms":    {typ: TypeInt, def: 1500, min: 0, max: 60000},
		"power.flush_ms":      {typ: TypeInt, def: 3000, min: 0, max: 30000},
		"time.sntp":           {typ: TypeBool, def: true, restart: true},
		"time.server0":        {typ: TypeString, def: "pool.ntp.org", restart: true},
		"time.server1":        {typ: TypeString, def: "", restart: true},
		"time.from_dhcp":      {typ: TypeBool, def: true, restart: true},
		"time.sk_fallback":    {typ: TypeBool, def: true},
		"time.tz":             {typ: TypeString, def: "UTC0"},
		"sk.server_host":      {typ: TypeString, def: ""},
		"sk.server_port":      {typ: TypeInt, def: 80},
		"sk.server_self":      {typ: TypeString, def: ""},
		"sk.server_pin":       {typ: TypeBool, def: false},
		"sk.permissions":      {typ: TypeString, def: "readwrite"},
		"sk.ws_enabled":       {typ: TypeBool, def: true},
		"sk.scheme":           {typ: TypeString, def: "auto", enum: "auto,http,https"},
		"sk.tls_trust":        {typ: TypeString, def: "tofu", enum: "tofu,ca,bundle"},
		"sk.ca_pem":           {typ: TypeBlob, def: []byte{}},
		"sk.batch_ms":         {typ: TypeInt, def: 100},
		"sk.buffer_msgs":      {typ: TypeInt, def: 128},
		"sk.buffer_kb":        {typ: TypeInt, def: 32},
		"sk.drain_per_s":      {typ: TypeInt, def: 20},
		"sk.health_s":         {typ: TypeInt, def: 10, min: 0},
		"sk.discover_s":       {typ: TypeInt, def: 60},
		"sk.check_s":          {typ: TypeInt, def: 3600},
		"sk.stall_s":          {typ: TypeInt, def: 300, min: 60},
		"sk.timestamps":       {typ: TypeBool, def: true},
	}
	for i := range 4 {
		n := string(rune('0' + i))
		table["wifi.ssid"+n] = spec{typ: TypeString, def: ""}
		table["wifi.psk"+n] = spec{typ: TypeString, def: "", secret: true, maxLen: 63}
		table["wifi.bssid"+n] = spec{typ: TypeString, def: "", maxLen: 17}
	}
	f := newFixture(t, Builtin()...)
	seen := map[string]bool{}
	for _, ns := range f.c.Namespaces() {
		for _, k := range f.c.nss[ns].order {
			path := k.path()
			seen[path] = true
			s, ok := table[path]
			if !ok {
				t.Errorf("%s is not in the spec table", path)
				continue
			}
			if k.Type != s.typ || k.RestartRequired != s.restart || k.Secret != s.secret {
				t.Errorf("%s: type %s restart %v secret %v, want %s %v %v", path, k.Type, k.RestartRequired, k.Secret, s.typ, s.restart, s.secret)
			}
			if got := f.get(t, k.ns, k.Name); canonical(internal(got)) != canonical(internal(s.def)) {
				t.Errorf("%s default %#v, want %#v", path, got, s.def)
			}
			if s.min != 0 || s.max != 0 {
				if k.min != s.min || (s.max != 0 && k.max != s.max) {
					t.Errorf("%s range %v..%v, want %v..%v", path, k.min, k.max, s.min, s.max)
				}
			}
			if s.enum != "" && strings.Join(k.Enum, ",") != s.enum {
				t.Errorf("%s enum %q, want %q", path, k.Enum, s.enum)
			}
			if s.maxLen != 0 && k.maxLen != s.maxLen {
				t.Errorf("%s maxLength %d, want %d", path, k.maxLen, s.maxLen)
			}
		}
	}
	for path := range table {
		if !seen[path] {
			t.Errorf("spec key %s missing", path)
		}
	}
	if f.c.nss["sk"].Version != 2 {
		t.Error("sk is not at version 2")
	}
}

func internal(v any) any {
	if n, ok := v.(int); ok {
		return int64(n)
	}
	return v
}

// TestPortalSSIDDefaultsToDeviceName: the spec's default of wifi.portal_ssid is dev-<id>.
func TestPortalSSIDDefaultsToDeviceName(t *testing.T) {
	f := newFixture(t, BuiltinFor("abcd")...)
	if got := f.c.String("wifi", "portal_ssid"); got != "dev-abcd" {
		t.Fatalf("wifi.portal_ssid = %q, want dev-abcd", got)
	}
}

func TestCheckTextToken(t *testing.T) {
	for s, ok := range map[string]bool{"UTC0": true, "CET-1CEST,M3.5.0,M10.5.0/3": true, "<+0330>-3:30": true,
		"": false, "CET -1": false, "CET\t-1": false, "été": false, "A\x7f": false} {
		if got := CheckText(TextToken, s) == ""; got != ok {
			t.Errorf("CheckText(token, %q) ok = %v, want %v", s, got, ok)
		}
	}
}

// BenchmarkNewBuiltin is the configuration's part of a boot: New over the device's built-in
// namespaces and a store holding their defaults, every key pattern compiled afresh (as in a
// new process). The schema is not built: no request at boot needs it.
func BenchmarkNewBuiltin(b *testing.B) {
	f := newFixture(b, BuiltinFor("abcd")...)
	b.ReportAllocs()
	for b.Loop() {
		patterns.Clear()
		if _, err := New(f.st, nil, BuiltinFor("abcd")...); err != nil {
			b.Fatal(err)
		}
	}
}

// A namespace registered or removed changes the schema's ETag, built when first asked for.
func TestSchemaBuiltOnDemand(t *testing.T) {
	f := newFixture(t, BuiltinFor("abcd")...)
	body, etag := f.c.Schema()
	if len(body) == 0 || etag == "" {
		t.Fatalf("schema %q, etag %q", body, etag)
	}
	if b2, e2 := f.c.Schema(); e2 != etag || string(b2) != string(body) {
		t.Fatalf("second read: etag %s, want %s", e2, etag)
	}
	if err := f.c.Register(Namespace{Name: "f_x", Title: "X", Version: 1, Keys: []Key{{Name: "a", Type: TypeBool, Default: false}}}); err != nil {
		t.Fatal(err)
	}
	if _, e3 := f.c.Schema(); e3 == etag {
		t.Fatalf("etag %s unchanged after a register", e3)
	}
}
