package config

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"devhost/host/api"
	"devhost/host/api/apitest"
)

const plugDescriptor = `{
  "namespace": "f_demo", "version": 2, "title": "Demo", "description": "A plugin's settings.",
  "keys": [
    {"name": "rate", "type": "float", "default": 1, "min": 0, "max": 10, "unit": "Hz", "group": "Sampling",
     "x": {"displayMultiplier": 60, "displayOffset": 0}},
    {"name": "count", "type": "int", "default": 3, "min": 1, "max": 9, "restart_required": true},
    {"name": "on", "type": "bool", "default": true, "readOnly": true},
    {"name": "mode", "type": "string", "default": "a", "enum": ["a", "bb"]},
    {"name": "token", "type": "string", "default": "", "maxLength": 64, "secret": true, "pattern": "^[a-z]*$"},
    {"name": "blob", "type": "blob", "maxLength": 16, "title": "Raw", "description": "bytes"},
    {"name": "rows", "type": "string", "x": {"format": "table", "columns": ["name", "value"]}}
  ]
}`

func plugGo() Namespace {
	return Namespace{Name: "f_demo", Version: 2, Title: "Demo", Description: "A plugin's settings.", Keys: []Key{
		{Name: "rate", Type: TypeFloat, Default: 1.0, Min: Float(0), Max: Float(10), Unit: "Hz", Group: "Sampling",
			X: &X{DisplayMultiplier: Float(60), DisplayOffset: Float(0)}},
		{Name: "count", Type: TypeInt, Default: 3, Min: Float(1), Max: Float(9), RestartRequired: true},
		{Name: "on", Type: TypeBool, Default: true, ReadOnly: true},
		{Name: "mode", Type: TypeString, Default: "a", Enum: []string{"a", "bb"}},
		{Name: "token", Type: TypeString, Default: "", MaxLength: 64, Secret: true, Pattern: "^[a-z]*$"},
		{Name: "blob", Type: TypeBlob, MaxLength: 16, Title: "Raw", Description: "bytes"},
		{Name: "rows", Type: TypeString, X: &X{Format: FormatTable, Columns: []string{"name", "value"}}},
	}}
}

// TestParseNamespaceMatchesGo: a JSON descriptor yields the same schema as the same
// descriptor written in Go.
func TestParseNamespaceMatchesGo(t *testing.T) {
	ns, err := ParseNamespace([]byte(plugDescriptor))
	if err != nil {
		t.Fatal(err)
	}
	a, b := newFixture(t, ns), newFixture(t, plugGo())
	sa, _ := a.c.Schema()
	sb, _ := b.c.Schema()
	if !bytes.Equal(sa, sb) {
		t.Fatalf("schemas differ:\nJSON %s\nGo   %s", sa, sb)
	}
	compileSchema(t, sa)
}

func TestParseNamespaceRefusals(t *testing.T) {
	cases := []struct{ name, doc string }{
		{"not JSON", `{`},
		{"not an object", `[]`},
		{"trailing data", `{"namespace":"a","version":1,"title":"A","keys":[]} {}`},
		{"unknown member", `{"namespace":"a","version":1,"title":"A","keys":[],"extra":1}`},
		{"unknown key member", `{"namespace":"a","version":1,"title":"A","keys":[{"name":"k","type":"bool","default":true,"restartRequired":true}]}`},
		{"snake-case readOnly", `{"namespace":"a","version":1,"title":"A","keys":[{"name":"k","type":"bool","default":true,"read_only":true}]}`},
		{"int default as string", `{"namespace":"a","version":1,"title":"A","keys":[{"name":"k","type":"int","default":"1"}]}`},
		{"bool default as number", `{"namespace":"a","version":1,"title":"A","keys":[{"name":"k","type":"bool","default":1}]}`},
		{"string default as number", `{"namespace":"a","version":1,"title":"A","keys":[{"name":"k","type":"string","default":1}]}`},
		{"default missing", `{"namespace":"a","version":1,"title":"A","keys":[{"name":"k","type":"int"}]}`},
		{"default null", `{"namespace":"a","version":1,"title":"A","keys":[{"name":"k","type":"int","default":null}]}`},
		{"bad type", `{"namespace":"a","version":1,"title":"A","keys":[{"name":"k","type":"uint","default":1}]}`},
		{"bad namespace", `{"namespace":"A","version":1,"title":"A","keys":[]}`},
		{"version missing", `{"namespace":"a","title":"A","keys":[]}`},
		{"version fraction", `{"namespace":"a","version":1.5,"title":"A","keys":[]}`},
		{"maxLength fraction", `{"namespace":"a","version":1,"title":"A","keys":[{"name":"k","type":"string","default":"","maxLength":1.5}]}`},
		{"displayMultiplier zero", `{"namespace":"a","version":1,"title":"A","keys":[{"name":"k","type":"float","default":1,"x":{"displayMultiplier":0}}]}`},
		{"too large", `{"namespace":"a","version":1,"title":"` + strings.Repeat("x", maxDescriptorBytes) + `","keys":[]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseNamespace([]byte(tc.doc)); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func FuzzParseNamespace(f *testing.F) {
	f.Add([]byte(plugDescriptor))
	f.Add([]byte(`{"namespace":"a","version":1,"title":"A","keys":[{"name":"k","type":"int","default":1e1}]}`))
	f.Add([]byte(`{"namespace":"a","version":1,"title":"A","keys":[{"name":"k","type":"string","default":"","pattern":"^(a|b)*$"}]}`))
	f.Add([]byte(`{"namespace":"a","version":1,"title":"A","keys":[{"name":"k","type":"blob","default":"","secret":true,"maxLength":4}]}`))
	f.Add([]byte(`{"namespace":"a","version":1,"title":"A","keys":[{"name":"k","type":"string","default":"[{\"c\":1}]","x":{"format":"table","columns":["c"]}}]}`))
	fx := newFixture(f, testNS())
	f.Fuzz(func(t *testing.T, doc []byte) {
		ns, err := ParseNamespace(doc)
		if err != nil {
			return
		}
		// Whatever is accepted registers, yields a schema that compiles, and its defaults
		// validate against it.
		if ns.Name == "t" {
			return
		}
		if err := fx.c.Register(ns); err != nil {
			t.Fatalf("accepted descriptor does not register: %v", err)
		}
		defer func() {
			_ = fx.c.Unregister(ns.Name)
			_ = fx.c.Purge(ns.Name)
		}()
		body, _ := fx.c.Schema()
		sch := compileSchema(t, body)
		part, _ := fx.c.Document(ns.Name)
		if err := validate(t, sch, string(part)); err != nil {
			t.Fatalf("defaults of %s do not validate: %v", doc, err)
		}
	})
}

// FuzzApply feeds arbitrary bodies to PUT /config: never a panic; a refusal is a 400 with a
// path and writes nothing; an accepted document leaves a document that re-imports without
// changes.
func FuzzApply(f *testing.F) {
	for _, s := range []string{
		`{"t":{"b":true,"i":7,"f":-1.5,"s":"abc","e":"bb","blob":"AQID","sec":"hunter22","tab":"[]"}}`,
		`{"t":{"i":null,"sec":"********","ro":3}}`,
		`{"httpd":{"port":8080},"wifi":{"ssid0":"boat","psk0":"password0"}}`,
		`{"t":{"big":2147483648}}`,
		`{"t":{"i":1e1,"f":1e400}}`,
		`{"t":{"b":true,"b":false}}`,
		`{"t":5}`, `[]`, `{} x`, ``,
	} {
		f.Add([]byte(s))
	}
	fx := newFixture(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		before := fx.stored(t)
		_, err := fx.c.Apply(body)
		if err != nil {
			e := apitest.Err(t, err)
			if e.Status != http.StatusBadRequest || e.Code != api.CodeValidation || e.Path == nil {
				t.Fatalf("refusal %d %s path %v", e.Status, e.Code, e.Path)
			}
			if after := fx.stored(t); !sameStore(before, after) {
				t.Fatalf("refused %q but wrote", body)
			}
			return
		}
		doc, err := fx.c.Document("")
		if err != nil || !json.Valid(doc) {
			t.Fatalf("document after %q: %v", body, err)
		}
		res, err := fx.c.Apply(doc)
		if err != nil || len(res.Changed) != 0 {
			t.Fatalf("re-import after %q: %v %v", body, res.Changed, err)
		}
	})
}

func TestErrorsAreTyped(t *testing.T) {
	f := newFixture(t)
	_, err := f.c.Apply([]byte(`{"t":{"i":"x"}}`))
	if e := apitest.Err(t, err); *e.Path != "t.i" || e.Message == "" {
		t.Fatalf("validation error %v carries no path or message", err)
	}
}
