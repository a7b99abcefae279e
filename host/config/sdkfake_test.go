package config_test

import (
	"errors"
	"strings"
	"testing"

	"devhost/abi"
	"devhost/host/config"
	"devhost/sdk"
)

// The SDK's fake host checks a plugin's namespace descriptor with a standard-library copy of
// the descriptor table's rules (plugin projects must not pull the device in); this test keeps
// that copy agreeing with the device's check on every rule, both ways.
func TestSDKFakeHostAgreesOnDescriptors(t *testing.T) {
	long := strings.Repeat("x", 300)
	cases := map[string]string{
		"minimal":            `{"version":1,"title":"T","keys":[]}`,
		"every type":         `{"version":2,"title":"T","keys":[{"name":"b","type":"bool","default":true},{"name":"i","type":"int","default":3,"min":0,"max":9},{"name":"f","type":"float","default":1.5},{"name":"s","type":"string","default":"a","maxLength":8,"enum":["a","bb"]},{"name":"bl","type":"blob","secret":true}]}`,
		"table":              `{"version":1,"title":"T","keys":[{"name":"t","type":"string","x":{"format":"table","columns":["a","b"]}}]}`,
		"display":            `{"version":1,"title":"T","keys":[{"name":"r","type":"float","default":0,"unit":"Hz","group":"G","x":{"displayMultiplier":60,"displayOffset":1}}]}`,
		"pattern":            `{"version":1,"title":"T","keys":[{"name":"p","type":"string","default":"ab","pattern":"^[a-z]+$"}]}`,
		"own name":           `{"namespace":"f_t","version":1,"title":"T","keys":[]}`,
		"no title":           `{"version":1,"keys":[]}`,
		"version 0":          `{"version":0,"title":"T","keys":[]}`,
		"unknown member":     `{"version":1,"title":"T","keys":[],"extra":1}`,
		"trailing":           `{"version":1,"title":"T","keys":[]} {}`,
		"bad key name":       `{"version":1,"title":"T","keys":[{"name":"bad name","type":"int","default":1}]}`,
		"reserved key":       `{"version":1,"title":"T","keys":[{"name":"config_version","type":"int","default":1}]}`,
		"duplicate key":      `{"version":1,"title":"T","keys":[{"name":"a","type":"int","default":1},{"name":"a","type":"int","default":1}]}`,
		"unknown type":       `{"version":1,"title":"T","keys":[{"name":"a","type":"date","default":1}]}`,
		"no default":         `{"version":1,"title":"T","keys":[{"name":"a","type":"int"}]}`,
		"default type":       `{"version":1,"title":"T","keys":[{"name":"a","type":"int","default":"1"}]}`,
		"fractional int":     `{"version":1,"title":"T","keys":[{"name":"a","type":"int","default":1.5}]}`,
		"default below min":  `{"version":1,"title":"T","keys":[{"name":"a","type":"int","default":1,"min":2}]}`,
		"min above max":      `{"version":1,"title":"T","keys":[{"name":"a","type":"float","default":1,"min":2,"max":1}]}`,
		"int bound too big":  `{"version":1,"title":"T","keys":[{"name":"a","type":"int","default":1,"max":3000000000}]}`,
		"min on string":      `{"version":1,"title":"T","keys":[{"name":"a","type":"string","default":"","min":1}]}`,
		"maxLength on bool":  `{"version":1,"title":"T","keys":[{"name":"a","type":"bool","default":true,"maxLength":3}]}`,
		"string too long":    `{"version":1,"title":"T","keys":[{"name":"a","type":"string","default":"` + long + `"}]}`,
		"maxLength too big":  `{"version":1,"title":"T","keys":[{"name":"a","type":"string","default":"","maxLength":4000}]}`,
		"enum miss":          `{"version":1,"title":"T","keys":[{"name":"a","type":"string","default":"c","enum":["a","b"]}]}`,
		"enum repeated":      `{"version":1,"title":"T","keys":[{"name":"a","type":"string","default":"a","enum":["a","a"]}]}`,
		"enum empty":         `{"version":1,"title":"T","keys":[{"name":"a","type":"string","default":"a","enum":[]}]}`,
		"enum on int":        `{"version":1,"title":"T","keys":[{"name":"a","type":"int","default":1,"enum":["1"]}]}`,
		"pattern miss":       `{"version":1,"title":"T","keys":[{"name":"a","type":"string","default":"A","pattern":"^[a-z]+$"}]}`,
		"pattern invalid":    `{"version":1,"title":"T","keys":[{"name":"a","type":"string","default":"a","pattern":"("}]}`,
		"secret default":     `{"version":1,"title":"T","keys":[{"name":"a","type":"string","default":"x","secret":true}]}`,
		"secret too short":   `{"version":1,"title":"T","keys":[{"name":"a","type":"string","default":"","secret":true,"maxLength":4}]}`,
		"secret int":         `{"version":1,"title":"T","keys":[{"name":"a","type":"int","default":0,"secret":true}]}`,
		"blob default":       `{"version":1,"title":"T","keys":[{"name":"a","type":"blob","default":"AA=="}]}`,
		"table no columns":   `{"version":1,"title":"T","keys":[{"name":"t","type":"string","x":{"format":"table"}}]}`,
		"table on int":       `{"version":1,"title":"T","keys":[{"name":"t","type":"int","default":0,"x":{"format":"table","columns":["a"]}}]}`,
		"columns no table":   `{"version":1,"title":"T","keys":[{"name":"t","type":"string","default":"","x":{"columns":["a"]}}]}`,
		"zero multiplier":    `{"version":1,"title":"T","keys":[{"name":"a","type":"float","default":0,"x":{"displayMultiplier":0}}]}`,
		"multiplier on text": `{"version":1,"title":"T","keys":[{"name":"a","type":"string","default":"","x":{"displayMultiplier":2}}]}`,
		"x on bool":          `{"version":1,"title":"T","keys":[{"name":"a","type":"bool","default":false,"x":{"format":"x"}}]}`,
		"long group":         `{"version":1,"title":"T","keys":[{"name":"a","type":"bool","default":false,"group":"` + strings.Repeat("g", 25) + `"}]}`,
	}
	m := abi.Manifest{ID: "t", Name: "Test", Version: "0.1.0", ABI: abi.Version, Capabilities: []abi.Capability{abi.CapConfig}}
	for name, d := range cases {
		t.Run(name, func(t *testing.T) {
			_, deviceErr := config.DecodeNamespace([]byte(d))
			if deviceErr == nil {
				ns, _ := config.DecodeNamespace([]byte(d))
				ns.Name = abi.Namespace(m.ID)
				deviceErr = config.ValidateNamespace(ns)
			}
			var fakeErr error
			h := &sdk.FakeHost{Manifest: m}
			if err := h.Start(&sdk.Plugin{OnInit: func(sdk.Info) error {
				fakeErr = sdk.RegisterNamespaceJSON([]byte(d))
				return nil
			}}); err != nil {
				t.Fatalf("start: %v", err)
			}
			if fakeErr != nil && !errors.Is(fakeErr, sdk.ErrInvalid) {
				t.Fatalf("fake host: %v, want nil or ErrInvalid", fakeErr)
			}
			if (deviceErr == nil) != (fakeErr == nil) {
				t.Fatalf("device: %v; fake host: %v", deviceErr, fakeErr)
			}
		})
	}
}
