package sensors

import (
	"math"
	"testing"
)

// checkValues fails t when a decoded value could not be published: an empty path, a type
// other than float64, bool or string, or a number that is not finite.
func checkValues(t *testing.T, vals []Value) {
	t.Helper()
	for _, v := range vals {
		if v.Path == "" {
			t.Fatalf("empty path in %v", vals)
		}
		switch x := v.Value.(type) {
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("%s = %v", v.Path, x)
			}
		case bool, string:
		case map[string]any: // a Victron alarm
			if v.Path != "alarm" {
				t.Fatalf("%s is an object", v.Path)
			}
		default:
			t.Fatalf("%s has type %T", v.Path, v.Value)
		}
	}
}

// FuzzDecode feeds every kind arbitrary adverts, keys and addresses: an error or publishable
// values, never a panic. Seeds: testdata/fuzz/FuzzDecode (one per format, plus encrypted ones).
func FuzzDecode(f *testing.F) {
	f.Add(byte(0), mustHex(f, "020106"+bthomeAD("41a47266c95f730011223378237214")), "231d39c1d7cc1ab1aee224cd096db932", testAddr)
	f.Add(byte(2), mustHex(f, mfrAD("e102", "100289a302b040af925d09a4d89aa0128bdef48c6298a9")), "aff4d0995b7d1e176c0c33ecb9e70dcd", "")
	kinds := Kinds()
	f.Fuzz(func(t *testing.T, k byte, adv []byte, key, addr string) {
		kind := kinds[int(k)%len(kinds)]
		vals, err := Decode(kind, addr, adv, key)
		if err != nil {
			if vals != nil {
				t.Fatalf("values %v beside error %v", vals, err)
			}
			return
		}
		checkValues(t, vals)
	})
}

// FuzzDetect: Detect never panics, and whatever it names, Decode handles without a panic.
func FuzzDetect(f *testing.F) {
	f.Add(mustHex(f, "020106"+mfrAD("9904", "0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F")))
	f.Fuzz(func(t *testing.T, adv []byte) {
		kind := Detect(adv)
		if kind == "" {
			return
		}
		vals, err := Decode(kind, "AA:BB:CC:DD:EE:FF", adv, "")
		if err == nil {
			checkValues(t, vals)
		}
	})
}
