package config

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"devhost/host/api"
	"devhost/host/api/apitest"
)

// TestApplyRules is the PUT /config semantics table, one row per rule.
func TestApplyRules(t *testing.T) {
	type want struct {
		after   map[string]any // "ns.key" -> effective value after the PUT
		changed []string
		restart bool
		path    string // set for a 400 validation row
	}
	cases := []struct {
		name  string
		setup string // applied first, must succeed
		body  string
		want  want
	}{
		// Values.
		{name: "bool written", body: `{"t":{"b":true}}`,
			want: want{after: map[string]any{"t.b": true}, changed: []string{"t.b"}}},
		{name: "int written, restart flagged", body: `{"t":{"i":7}}`,
			want: want{after: map[string]any{"t.i": 7}, changed: []string{"t.i"}, restart: true}},
		{name: "int given as integral fraction", body: `{"t":{"i":7.0}}`,
			want: want{after: map[string]any{"t.i": 7}, changed: []string{"t.i"}, restart: true}},
		{name: "int given with exponent", body: `{"t":{"i":1e1}}`,
			want: want{after: map[string]any{"t.i": 10}, changed: []string{"t.i"}, restart: true}},
		{name: "int at min", body: `{"t":{"i":0}}`, want: want{after: map[string]any{"t.i": 0}, changed: []string{"t.i"}, restart: true}},
		{name: "int at 32-bit max", body: `{"t":{"big":2147483647}}`, want: want{after: map[string]any{"t.big": 2147483647}, changed: []string{"t.big"}}},
		{name: "int at 32-bit min", body: `{"t":{"big":-2147483648}}`, want: want{after: map[string]any{"t.big": -2147483648}, changed: []string{"t.big"}}},
		{name: "float written", body: `{"t":{"f":-1.25}}`, want: want{after: map[string]any{"t.f": -1.25}, changed: []string{"t.f"}}},
		{name: "float given as int", body: `{"t":{"f":2}}`, want: want{after: map[string]any{"t.f": 2.0}, changed: []string{"t.f"}}},
		{name: "string written", body: `{"t":{"s":"abcdefgh"}}`, want: want{after: map[string]any{"t.s": "abcdefgh"}, changed: []string{"t.s"}}},
		{name: "string at byte limit with multibyte", body: `{"t":{"s":"éééé"}}`, want: want{after: map[string]any{"t.s": "éééé"}, changed: []string{"t.s"}}},
		{name: "pattern is schema only", body: `{"t":{"s":"UPPER"}}`, want: want{after: map[string]any{"t.s": "UPPER"}, changed: []string{"t.s"}}},
		{name: "enum member", body: `{"t":{"e":"ccc"}}`, want: want{after: map[string]any{"t.e": "ccc"}, changed: []string{"t.e"}}},
		{name: "secret blob at its limit", body: `{"t":{"secb":"AQIDBAUGBwg="}}`, want: want{after: map[string]any{"t.secb": []byte{1, 2, 3, 4, 5, 6, 7, 8}}, changed: []string{"t.secb"}}},
		{name: "blob written", body: `{"t":{"blob":"AQIDBA=="}}`, want: want{after: map[string]any{"t.blob": []byte{1, 2, 3, 4}}, changed: []string{"t.blob"}}},
		{name: "blob empty equals default", body: `{"t":{"blob":""}}`, want: want{after: map[string]any{"t.blob": []byte{}}, changed: []string{}}},
		{name: "table written", body: `{"t":{"tab":"[{\"name\":\"a\",\"value\":1},{\"name\":\"b\"}]"}}`,
			want: want{after: map[string]any{"t.tab": `[{"name":"a","value":1},{"name":"b"}]`}, changed: []string{"t.tab"}}},
		{name: "several keys and namespaces in document order", body: `{"t":{"u":"x","b":true},"httpd":{"port":8080}}`,
			want: want{after: map[string]any{"t.u": "x", "t.b": true, "httpd.port": 8080}, changed: []string{"t.u", "t.b", "httpd.port"}, restart: true}},
		{name: "empty document", body: `{}`, want: want{changed: []string{}}},
		{name: "empty namespace", body: `{"t":{}}`, want: want{changed: []string{}}},

		// Current values, null, absent.
		{name: "current value is not a change", body: `{"t":{"i":5,"s":"abc"}}`, want: want{after: map[string]any{"t.i": 5}, changed: []string{}}},
		{name: "rewriting a stored value is not a change", setup: `{"t":{"i":3}}`, body: `{"t":{"i":3}}`,
			want: want{after: map[string]any{"t.i": 3}, changed: []string{}}},
		{name: "null resets to default", setup: `{"t":{"i":3}}`, body: `{"t":{"i":null}}`,
			want: want{after: map[string]any{"t.i": 5}, changed: []string{"t.i"}, restart: true}},
		{name: "null on a default is not a change", body: `{"t":{"i":null}}`, want: want{after: map[string]any{"t.i": 5}, changed: []string{}}},
		{name: "absent key untouched", setup: `{"t":{"i":3,"b":true}}`, body: `{"t":{"b":false}}`,
			want: want{after: map[string]any{"t.i": 3, "t.b": false}, changed: []string{"t.b"}}},

		// Secrets and readOnly.
		{name: "secret written", body: `{"t":{"sec":"hunter22"}}`, want: want{after: map[string]any{"t.sec": "hunter22"}, changed: []string{"t.sec"}}},
		{name: "secret sentinel untouched", setup: `{"t":{"sec":"hunter22"}}`, body: `{"t":{"sec":"********"}}`,
			want: want{after: map[string]any{"t.sec": "hunter22"}, changed: []string{}}},
		{name: "secret sentinel on an unset secret stays unset", body: `{"t":{"sec":"********","secb":"********"}}`,
			want: want{after: map[string]any{"t.sec": "", "t.secb": []byte{}}, changed: []string{}}},
		{name: "api key of 8 bytes", body: `{"httpd":{"api_key":"12345678"}}`, want: want{after: map[string]any{"httpd.api_key": "12345678"}, changed: []string{"httpd.api_key"}}},
		{name: "api key with inner spaces", body: `{"httpd":{"api_key":"my boat key"}}`, want: want{after: map[string]any{"httpd.api_key": "my boat key"}, changed: []string{"httpd.api_key"}}},
		{name: "api key cleared", setup: `{"httpd":{"api_key":"12345678"}}`, body: `{"httpd":{"api_key":""}}`, want: want{after: map[string]any{"httpd.api_key": ""}, changed: []string{"httpd.api_key"}}},
		{name: "secret cleared with empty string", setup: `{"t":{"sec":"hunter22"}}`, body: `{"t":{"sec":""}}`,
			want: want{after: map[string]any{"t.sec": ""}, changed: []string{"t.sec"}}},
		{name: "sentinel on a plain string is a value", body: `{"t":{"s":"********"}}`, want: want{after: map[string]any{"t.s": "********"}, changed: []string{"t.s"}}},
		{name: "readOnly member ignored", body: `{"t":{"ro":99}}`, want: want{after: map[string]any{"t.ro": 7}, changed: []string{}}},
		{name: "readOnly member ignored whatever its type", body: `{"t":{"ro":"x","b":true}}`,
			want: want{after: map[string]any{"t.ro": 7, "t.b": true}, changed: []string{"t.b"}}},

		// Refusals: nothing written.
		{name: "unknown namespace", body: `{"nope":{"a":1}}`, want: want{path: "nope"}},
		{name: "over-long namespace", body: `{"abcdefghijklmnop":{}}`, want: want{path: "abcdefghijklmnop"}},
		{name: "unknown key", body: `{"t":{"zz":1}}`, want: want{path: "t.zz"}},
		{name: "reserved config_version", body: `{"t":{"config_version":1}}`, want: want{path: "t.config_version"}},
		{name: "bool wrong type", body: `{"t":{"b":1}}`, want: want{path: "t.b"}},
		{name: "bool as string", body: `{"t":{"b":"true"}}`, want: want{path: "t.b"}},
		{name: "int fraction", body: `{"t":{"i":5.5}}`, want: want{path: "t.i"}},
		{name: "int tiny fraction", body: `{"t":{"i":5.0000000000000000001}}`, want: want{path: "t.i"}},
		{name: "int above max", body: `{"t":{"i":11}}`, want: want{path: "t.i"}},
		{name: "int below min", body: `{"t":{"i":-1}}`, want: want{path: "t.i"}},
		{name: "int beyond 32 bits", body: `{"t":{"big":2147483648}}`, want: want{path: "t.big"}},
		{name: "int beyond 32 bits negative", body: `{"t":{"big":-2147483649}}`, want: want{path: "t.big"}},
		{name: "int huge exponent", body: `{"t":{"big":1e999999999}}`, want: want{path: "t.big"}},
		{name: "int as string", body: `{"t":{"i":"5"}}`, want: want{path: "t.i"}},
		{name: "float above max", body: `{"t":{"f":2.6}}`, want: want{path: "t.f"}},
		{name: "float overflow", body: `{"t":{"f":1e400}}`, want: want{path: "t.f"}},
		{name: "float wrong type", body: `{"t":{"f":true}}`, want: want{path: "t.f"}},
		{name: "string too long", body: `{"t":{"s":"abcdefghi"}}`, want: want{path: "t.s"}},
		{name: "string too long in bytes", body: `{"t":{"s":"ééééé"}}`, want: want{path: "t.s"}},
		{name: "string wrong type", body: `{"t":{"s":5}}`, want: want{path: "t.s"}},
		{name: "not in enum", body: `{"t":{"e":"d"}}`, want: want{path: "t.e"}},
		{name: "blob too long", body: `{"t":{"blob":"AQIDBAU="}}`, want: want{path: "t.blob"}},
		{name: "blob unpadded", body: `{"t":{"blob":"AQI"}}`, want: want{path: "t.blob"}},
		{name: "blob with line break", body: `{"t":{"blob":"AQ==\nAQ=="}}`, want: want{path: "t.blob"}},
		{name: "blob non-zero padding bits", body: `{"t":{"blob":"AR=="}}`, want: want{path: "t.blob"}},
		{name: "blob url alphabet", body: `{"t":{"blob":"-_8="}}`, want: want{path: "t.blob"}},
		{name: "blob wrong type", body: `{"t":{"blob":[1]}}`, want: want{path: "t.blob"}},
		{name: "api key too short", body: `{"httpd":{"api_key":"short"}}`, want: want{path: "httpd.api_key"}},
		{name: "api key of spaces", body: `{"httpd":{"api_key":"        "}}`, want: want{path: "httpd.api_key"}},
		{name: "api key ending in a space", body: `{"httpd":{"api_key":"boat key "}}`, want: want{path: "httpd.api_key"}},
		{name: "api key beginning with a tab", body: `{"httpd":{"api_key":"\tboat key"}}`, want: want{path: "httpd.api_key"}},
		{name: "api key with a newline", body: `{"httpd":{"api_key":"boat\nkey1"}}`, want: want{path: "httpd.api_key"}},
		{name: "wifi password too short", body: `{"wifi":{"psk2":"1234567"}}`, want: want{path: "wifi.psk2"}},
		{name: "portal password too short", body: `{"wifi":{"portal_psk":"a"}}`, want: want{path: "wifi.portal_psk"}},
		{name: "secret too long", body: `{"t":{"sec":"12345678901234567"}}`, want: want{path: "t.sec"}},
		{name: "table not an array", body: `{"t":{"tab":"{}"}}`, want: want{path: "t.tab"}},
		{name: "table not JSON", body: `{"t":{"tab":"[{"}}`, want: want{path: "t.tab"}},
		{name: "table row not an object", body: `{"t":{"tab":"[1]"}}`, want: want{path: "t.tab"}},
		{name: "table unknown column", body: `{"t":{"tab":"[{\"x\":1}]"}}`, want: want{path: "t.tab"}},
		{name: "table nested value", body: `{"t":{"tab":"[{\"name\":[1]}]"}}`, want: want{path: "t.tab"}},
		{name: "table trailing data", body: `{"t":{"tab":"[] []"}}`, want: want{path: "t.tab"}},
		{name: "duplicate key", body: `{"t":{"b":true,"b":false}}`, want: want{path: "t.b"}},
		{name: "tz with a space and a line break", body: `{"time":{"tz":"été A\nB"}}`, want: want{path: "time.tz"}},
		{name: "tz empty", body: `{"time":{"tz":""}}`, want: want{path: "time.tz"}},
		{name: "invalid UTF-8 in a value", body: "{\"net\":{\"hostname\":\"a\xffb\"}}", want: want{path: ""}},
		{name: "lone surrogate in a value", body: `{"t":{"u":"\udc00"}}`, want: want{path: ""}},
		{name: "duplicate namespace", body: `{"t":{},"t":{}}`, want: want{path: "t"}},
		{name: "namespace not an object", body: `{"t":5}`, want: want{path: "t"}},
		{name: "namespace null", body: `{"t":null}`, want: want{path: "t"}},
		{name: "namespace array", body: `{"t":[]}`, want: want{path: "t"}},
		{name: "document an array", body: `[]`, want: want{path: ""}},
		{name: "document a string", body: `"x"`, want: want{path: ""}},
		{name: "document null", body: `null`, want: want{path: ""}},
		{name: "empty body", body: ``, want: want{path: ""}},
		{name: "malformed JSON", body: `{"t":{"b":tru}}`, want: want{path: ""}},
		{name: "trailing data", body: `{"t":{"b":true}} x`, want: want{path: ""}},
		{name: "second document", body: `{"t":{"b":true}}{}`, want: want{path: ""}},
		{name: "whole document checked before writing", body: `{"t":{"b":true,"u":"x"},"httpd":{"port":0}}`, want: want{path: "httpd.port"}},
		{name: "first error in document order", body: `{"t":{"i":99,"zz":1}}`, want: want{path: "t.i"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.setup != "" {
				f.put(t, tc.setup)
			}
			before := f.stored(t)
			var notified []string
			f.c.OnChange(func(ns, key string) { notified = append(notified, ns+"."+key) })
			res, err := f.c.Apply([]byte(tc.body))
			if tc.want.path != "" || (err != nil && tc.want.changed == nil) {
				if err == nil {
					t.Fatalf("accepted, want 400 at %q", tc.want.path)
				}
				e := apitest.Err(t, err)
				if e.Status != http.StatusBadRequest || e.Code != api.CodeValidation || pathOf(e) != tc.want.path {
					t.Fatalf("got %d %s path %q (%s), want 400 validation path %q", e.Status, e.Code, pathOf(e), e.Message, tc.want.path)
				}
				if after := f.stored(t); !sameStore(before, after) {
					t.Fatalf("refused document wrote to the store:\nbefore %q\nafter  %q", before, after)
				}
				if len(notified) != 0 {
					t.Fatalf("refused document notified %q", notified)
				}
				return
			}
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if !reflect.DeepEqual(res.Changed, tc.want.changed) || res.RestartRequired != tc.want.restart {
				t.Fatalf("result %+v, want changed %q restart %v", res, tc.want.changed, tc.want.restart)
			}
			if !reflect.DeepEqual(notified, nilIfEmpty(tc.want.changed)) {
				t.Fatalf("OnChange saw %q, want %q", notified, tc.want.changed)
			}
			for path, want := range tc.want.after {
				ns, key, _ := strings.Cut(path, ".")
				if got := f.get(t, ns, key); !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %#v, want %#v", path, got, want)
				}
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// TestApplyStoresNothingForUnchanged checks that writing current values leaves the store as
// it was (no pinned defaults).
func TestApplyStoresNothingForUnchanged(t *testing.T) {
	f := newFixture(t)
	before := f.stored(t)
	doc, _ := f.c.Document("")
	res := f.put(t, string(doc))
	if len(res.Changed) != 0 {
		t.Fatalf("re-importing the exported document changed %q", res.Changed)
	}
	if after := f.stored(t); !sameStore(before, after) {
		t.Fatalf("re-import wrote: %q", after)
	}
}

// TestExportImportRoundTrip: an exported document (secrets as the sentinel) imports into a
// device with the same secrets unchanged.
func TestExportImportRoundTrip(t *testing.T) {
	f := newFixture(t)
	f.put(t, `{"t":{"sec":"hunter22","i":2,"blob":"AQ=="},"wifi":{"ssid0":"boat","psk0":"password1"}}`)
	doc, _ := f.c.Document("")
	if strings.Contains(string(doc), "hunter22") || strings.Contains(string(doc), "password1") {
		t.Fatalf("export leaks a secret: %s", doc)
	}
	res := f.put(t, string(doc))
	if len(res.Changed) != 0 {
		t.Fatalf("re-import changed %q", res.Changed)
	}
	if got := f.c.String("wifi", "psk0"); got != "password1" {
		t.Fatalf("psk0 = %q after re-import", got)
	}
}

func TestApplyWriteFailed(t *testing.T) {
	f := newFixture(t)
	var notified []string
	f.c.OnChange(func(ns, key string) { notified = append(notified, ns+"."+key) })
	f.st.FailWritesForTest(errors.New("flash gone"))
	_, err := f.c.Apply([]byte(`{"t":{"b":true,"i":3}}`))
	e := apitest.Err(t, err)
	if e.Status != http.StatusInternalServerError || e.Code != api.CodeWriteFailed {
		t.Fatalf("got %d %s, want 500 write_failed", e.Status, e.Code)
	}
	if len(notified) != 0 {
		t.Fatalf("failed write notified %q", notified)
	}
	if err := f.c.Set("t", "b", true); apitest.Err(t, err).Code != api.CodeWriteFailed {
		t.Fatalf("Set during a storage failure: %v", err)
	}
	f.st.FailWritesForTest(nil)
	if f.c.Bool("t", "b") {
		t.Fatal("t.b changed although the write failed")
	}
	// A validation error still wins over the storage state.
	f.st.FailWritesForTest(errors.New("flash gone"))
	_, err = f.c.Apply([]byte(`{"t":{"zz":1}}`))
	if e := apitest.Err(t, err); e.Code != api.CodeValidation {
		t.Fatalf("got %s, want validation", e.Code)
	}
}

func TestSet(t *testing.T) {
	f := newFixture(t)
	var notified []string
	f.c.OnChange(func(ns, key string) { notified = append(notified, ns+"."+key) })
	ok := []struct {
		key  string
		v    any
		want any
	}{
		{"b", true, true},
		{"i", int64(3), 3},
		{"i", uint8(4), 4},
		{"i", 6.0, 6},
		{"f", float32(0.5), 0.5},
		{"s", "xyz", "xyz"},
		{"blob", []byte{9, 8}, []byte{9, 8}},
		{"blob", "AQ==", []byte{1}},
		{"ro", 42, 42}, // the device itself writes readOnly keys
		{"sec", "hunter22", "hunter22"},
		{"sec", Sentinel, "hunter22"},
		{"i", nil, 5},
	}
	for _, tc := range ok {
		if err := f.c.Set("t", tc.key, tc.v); err != nil {
			t.Fatalf("Set(%s, %#v): %v", tc.key, tc.v, err)
		}
		if got := f.get(t, "t", tc.key); !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("after Set(%s, %#v) = %#v, want %#v", tc.key, tc.v, got, tc.want)
		}
	}
	wantNotified := []string{"t.b", "t.i", "t.i", "t.i", "t.f", "t.s", "t.blob", "t.blob", "t.ro", "t.sec", "t.i"}
	if !reflect.DeepEqual(notified, wantNotified) {
		t.Fatalf("notified %q, want %q", notified, wantNotified)
	}
	bad := []struct {
		ns, key string
		v       any
	}{
		{"t", "i", 11}, {"t", "i", 2.5}, {"t", "i", "3"}, {"t", "b", 1}, {"t", "s", "too long string"},
		{"t", "e", "zz"}, {"t", "f", 1e300}, {"t", "blob", []byte{1, 2, 3, 4, 5}}, {"t", "f", struct{}{}},
		{"t", "zz", 1}, {"nope", "x", 1},
	}
	for _, tc := range bad {
		err := f.c.Set(tc.ns, tc.key, tc.v)
		if e := apitest.Err(t, err); e.Code != api.CodeValidation || pathOf(e) != tc.ns+"."+tc.key {
			t.Errorf("Set(%s.%s, %#v) = %v, want validation at its path", tc.ns, tc.key, tc.v, err)
		}
	}
}

func TestGettersReturnDefaultsOnProblems(t *testing.T) {
	f := newFixture(t)
	if f.c.Int("httpd", "port") != 80 || f.c.Bool("wifi", "sta_enabled") != true ||
		f.c.String("time", "server0") != "pool.ntp.org" || f.c.Float("t", "f") != 1.5 || f.c.Blob("t", "blob") == nil {
		t.Fatal("getters do not return the defaults")
	}
	if f.c.Int("nope", "x") != 0 || f.c.String("t", "i") != "" || f.c.Blob("t", "zz") != nil {
		t.Fatal("getters on an unknown or mistyped key are not the zero value")
	}
	if _, err := f.c.Get("t", "zz"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("Get unknown key: %v", err)
	}
	if _, err := f.c.Get("nope", "zz"); !errors.Is(err, ErrUnknownNamespace) {
		t.Fatalf("Get unknown namespace: %v", err)
	}
}
