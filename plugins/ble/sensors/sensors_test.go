package sensors

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

// valuesOf indexes decoded values by path.
func valuesOf(t *testing.T, vals []Value) map[string]Value {
	t.Helper()
	m := map[string]Value{}
	for _, v := range vals {
		if _, dup := m[v.Path]; dup {
			t.Fatalf("path %q twice in %v", v.Path, vals)
		}
		m[v.Path] = v
	}
	return m
}

// approx reports whether got is a number within 1e-9 relative of want (exactly want when
// that is zero).
func approx(got any, want float64) bool {
	g, ok := got.(float64)
	if !ok {
		return false
	}
	if want == 0 {
		return g == 0
	}
	return math.Abs(g-want) <= 1e-9*math.Abs(want)
}

// sameValue compares a decoded value with a wanted one (the reference's JSON value, say):
// numbers within 1e-9 relative (exactly when zero), objects deeply, strings and booleans
// exactly.
func sameValue(got, want any) bool {
	switch w := want.(type) {
	case float64:
		return approx(got, w)
	case map[string]any:
		g, ok := got.(map[string]any)
		return ok && reflect.DeepEqual(g, w)
	default:
		return got == want
	}
}

// wantValues reports an error unless vals, decoded from what, are exactly the paths of
// want with their values; it answers vals indexed by path.
func wantValues(t *testing.T, what string, vals []Value, want map[string]any) map[string]Value {
	t.Helper()
	m := valuesOf(t, vals)
	if len(m) != len(want) {
		t.Errorf("%s: %v, want %v", what, vals, want)
	}
	for p, w := range want {
		if v, ok := m[p]; !ok || !sameValue(v.Value, w) {
			t.Errorf("%s: %s = %#v, want %#v", what, p, v.Value, w)
		}
	}
	return m
}

// BTHome v2 objects: bytes in the style of the format documentation's examples and the value
// their id's type and factor give, converted to the published SI unit. Each is decoded alone
// in a plain advert.
func TestBTHomeObjectExamples(t *testing.T) {
	tests := []struct {
		obj   string
		path  string
		want  any
		units string
	}{
		{"0161", "battery.strength", 0.97, "ratio"},
		{"02ca09", "temperature", 298.21, "K"}, // 25.06 °C
		{"03bf13", "humidity", 0.51, "ratio"},  // 50.55 %, rounded as the reference does
		{"04138a01", "pressure", 100883.0, "Pa"},
		{"05138a14", "illuminance", 13460.67, "lx"},
		{"08ca06", "dewPointTemperature", 290.53, "K"},
		{"0960", "count", 96.0, ""},
		{"0a138a14", "energy", 1346.067 * 3.6e6, "J"},
		{"0b021b00", "power", 69.14, "W"},
		{"0c020c", "voltage", 3.074, "V"},
		{"12e204", "co2", 1250.0, "ppm"},
		{"14020c", "moisture", 0.3074, "ratio"},
		{"2101", "motion", true, ""},
		{"2d00", "window", false, ""},
		{"2e23", "humidity", 0.35, "ratio"},
		{"3a01", "button", "press", "enum"},
		{"3a80", "button", "hold_press", "enum"},
		{"3f020c", "rotation", 307.4, "deg"},
		{"400c00", "distance", 0.012, "m"},
		{"414e00", "distance", 7.8, "m"},
		{"424e3422", "duration", 2241.614, "s"},
		{"434e34", "current", 13.39, "A"},
		{"444e34", "speed", 133.9, "m/s"},
		{"451101", "temperature", 300.45, "K"}, // 27.3 °C
		{"4632", "uvIndex", 5.0, ""},
		{"4a020c", "voltage", 307.4, "V"},
		{"505d396164", "timestamp", 1684093277.0, "s"},
		{"530c48656c6c6f20576f726c6421", "text", "Hello World!", ""},
		{"5d4efe", "current", -0.434, "A"},
		{"57ea", "temperature", 251.15, "K"}, // -22 °C
	}
	for _, tc := range tests {
		vals, err := Decode(KindBTHome, testAddr, mustHex(t, bthomeAD("40"+tc.obj)), "")
		if err != nil {
			t.Errorf("%s: %v", tc.obj, err)
			continue
		}
		m := wantValues(t, tc.obj, vals, map[string]any{tc.path: tc.want})
		if u := m[tc.path].Units; u != tc.units {
			t.Errorf("%s: units %q, want %q", tc.obj, u, tc.units)
		}
	}
}

// The BTHome v2 encryption example: bind key, address and counter from the format
// documentation; the plaintext is temperature 25.06 °C and humidity 50.55 %.
func TestBTHomeEncryptedSpecExample(t *testing.T) {
	const key = "231d39c1d7cc1ab1aee224cd096db932"
	adv := mustHex(t, "020106"+bthomeAD("41a47266c95f730011223378237214"))
	vals, err := Decode(KindBTHome, testAddr, adv, key)
	if err != nil {
		t.Fatal(err)
	}
	wantValues(t, "encryption example", vals, map[string]any{"temperature": 298.21, "humidity": 0.51})

	tampered := append([]byte(nil), adv...)
	tampered[len(tampered)-1] ^= 0x01 // MIC
	flipped := append([]byte(nil), adv...)
	flipped[9] ^= 0x80 // ciphertext
	bad := []struct {
		name string
		adv  []byte
		addr string
		key  string
		want error
	}{
		{"wrong key", adv, testAddr, "231d39c1d7cc1ab1aee224cd096db933", ErrAuthentication},
		{"wrong address", adv, "54:48:E6:8F:80:A6", key, ErrAuthentication},
		{"bad MIC", tampered, testAddr, key, ErrAuthentication},
		{"flipped ciphertext", flipped, testAddr, key, ErrAuthentication},
		{"no key", adv, testAddr, "", ErrKeyNeeded},
		{"plain advert with a key", mustHex(t, bthomeAD("4002ca09")), testAddr, key, ErrNotEncrypted},
	}
	for _, tc := range bad {
		if _, err := Decode(KindBTHome, tc.addr, tc.adv, tc.key); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, k := range []string{"zz", "231d39", "231d39c1d7cc1ab1aee224cd096db93200"} {
		if _, err := Decode(KindBTHome, testAddr, adv, k); err == nil || !strings.Contains(err.Error(), "bind key") {
			t.Errorf("key %q: err %v, want a bind key error", k, err)
		}
	}
	if _, err := Decode(KindBTHome, "not-an-address", adv, key); err == nil {
		t.Error("a malformed address decoded")
	}
}

// Ruuvi RAWv2 "valid data" vector: 24.3 °C, 53.49 %, 100044 Pa, 2.977 V; the "invalid
// values" vector publishes nothing.
func TestRuuviSpecVectors(t *testing.T) {
	vals, err := Decode(KindRuuvi, "", mustHex(t, mfrAD("9904", "0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F")), "")
	if err != nil {
		t.Fatal(err)
	}
	wantValues(t, "valid data", vals, map[string]any{"temperature": 297.45, "humidity": 0.53, "pressure": 100044.0, "battery.voltage": 2.98})
	vals, err = Decode(KindRuuvi, "", mustHex(t, mfrAD("9904", "058000FFFFFFFF800080008000FFFFFFFFFFFFFFFFFFFFFF")), "")
	if err != nil || len(vals) != 0 {
		t.Errorf("invalid-values vector: %v, %v; want no values", vals, err)
	}
}

// Victron captures published with their keys and the values published beside them.
func TestVictronPublishedCaptures(t *testing.T) {
	tests := []struct {
		adv, key string
		want     map[string]any
	}{
		{mfrAD("e102", "100289a302b040af925d09a4d89aa0128bdef48c6298a9"), "aff4d0995b7d1e176c0c33ecb9e70dcd",
			map[string]any{"voltage": 12.53, "current": 0.0, "capacity.ampHoursConsumed": 50.0, "capacity.stateOfCharge": 0.5}},
		{mfrAD("e102", "100242a0016207adceb37b605d7e0ee21b24df5c"), "adeccb947395801a4dd45a2eaa44bf17",
			map[string]any{"state": "ABSORPTION", "error": "NO_ERROR", "dc.voltage": 13.88, "dc.current": 1.4, "yieldToday": 30.0, "panelPower": 19.0, "loadCurrent": 0.0}},
		{mfrAD("e102", "1000c0a304121d64ca8d442b90bbdf6a8cba"), "64ba49f1a8562e45197a8e1fe50d7658",
			map[string]any{"state": "OFF", "error": "NO_ERROR", "input.voltage": 13.15, "offReason": "ENGINE_SHUTDOWN"}},
	}
	for _, tc := range tests {
		vals, err := Decode(KindVictron, "", mustHex(t, tc.adv), tc.key)
		if err != nil {
			t.Errorf("%s: %v", tc.adv, err)
			continue
		}
		wantValues(t, tc.adv, vals, tc.want)
	}
	// The published key-mismatch capture: the key's first byte does not match the advert's.
	_, err := Decode(KindVictron, "", mustHex(t, mfrAD("e102", "100289a302bb01af129087600b9b97bc2c32867c8238da")), "ffffffffffffffffffffffffffffffff")
	if !errors.Is(err, ErrVictronKeyMismatch) {
		t.Errorf("key mismatch: %v", err)
	}
}

// Malformed adverts of every kind answer an error, never a panic or values.
func TestMalformedAdverts(t *testing.T) {
	const bmKey = "aff4d0995b7d1e176c0c33ecb9e70dcd"
	tests := []struct {
		name string
		kind Kind
		adv  string
		key  string
		want error // nil: any error
	}{
		{"empty", KindBTHome, "", "", errEmptyAdvert},
		{"AD past the end", KindRuuvi, "1bff9904051234", "", nil},
		{"unknown kind", "thermo", "020106", "", ErrUnknownKind},
		{"bthome missing", KindBTHome, "020106", "", ErrNoBTHome},
		{"bthome no info byte", KindBTHome, "0316d2fc", "", ErrTruncated},
		{"bthome version 1", KindBTHome, bthomeAD("2002ca09"), "", ErrBTHomeVersion},
		{"bthome unknown object", KindBTHome, bthomeAD("4002ca09ee01"), "", ErrUnknownObject},
		{"bthome truncated object", KindBTHome, bthomeAD("4002ca"), "", ErrTruncated},
		{"bthome truncated text", KindBTHome, bthomeAD("40530548656c"), "", ErrTruncated},
		{"bthome text without length", KindBTHome, bthomeAD("4053"), "", ErrTruncated},
		{"bthome encrypted too short", KindBTHome, bthomeAD("4101020304"), "231d39c1d7cc1ab1aee224cd096db932", ErrTruncated},
		{"ruuvi missing", KindRuuvi, "020106", "", nil},
		{"ruuvi format 3", KindRuuvi, mfrAD("9904", "03291A1ECE1E"), "", nil},
		{"ruuvi short", KindRuuvi, mfrAD("9904", "0512FC5394C37C0004"), "", ErrTruncated},
		{"victron missing", KindVictron, "020106", bmKey, nil},
		{"victron not a product advert", KindVictron, mfrAD("e102", "110289a302b040af925d09"), bmKey, nil},
		{"victron no key", KindVictron, mfrAD("e102", "100289a302b040af925d09a4d89aa0128bdef48c6298a9"), "", ErrKeyNeeded},
		{"victron key not hex", KindVictron, mfrAD("e102", "100289a302b040af925d09a4d89aa0128bdef48c6298a9"), "xyz", nil},
		{"victron short record", KindVictron, mfrAD("e102", "100289a302b040af925d09a4d8"), bmKey, ErrTruncated},
		{"victron unknown record", KindVictron, mfrAD("e102", "100289a309b040af925d09a4d89aa0128bdef48c6298a9"), bmKey, ErrVictronRecord},
		{"xiaomi missing", KindXiaomiATC, "020106", "", nil},
		{"xiaomi wrong length", KindXiaomiATC, serviceAD("1a18", "a4c1380a0b0c9c09c413"), "", nil},
		{"mopeka missing", KindMopeka, "020106", "", nil},
		{"mopeka wrong length", KindMopeka, mfrAD("5900", "03605a2c21aabbcc01"), "", nil},
	}
	for _, tc := range tests {
		vals, err := Decode(tc.kind, "AA:BB:CC:DD:EE:FF", mustHex(t, tc.adv), tc.key)
		if err == nil {
			t.Errorf("%s: no error, values %v", tc.name, vals)
			continue
		}
		if tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
		if vals != nil {
			t.Errorf("%s: values %v beside the error", tc.name, vals)
		}
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		adv  string
		want Kind
	}{
		{"020106" + bthomeAD("40016102ca09"), KindBTHome},
		{"020106" + mfrAD("9904", "0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F"), KindRuuvi},
		{mfrAD("9904", "03291A1ECE1E"), ""}, // Ruuvi format 3: not decoded
		{mfrAD("e102", "100289a302b040af925d09a4d89aa0128bdef48c6298a9"), KindVictron},
		{serviceAD("1a18", "a4c1380a0b0c9c09c4134d0c640204"), KindXiaomiATC},
		{serviceAD("1a18", "a4c1380c0b0a00e12f580b9a07"), KindXiaomiATC},
		{"0303e5fe" + mfrAD("5900", "03605a2c21aabbcc0102"), KindMopeka},
		{mfrAD("5900", "03605a2c21aabbcc0102"), ""},    // Nordic's company id without Mopeka's service
		{"020106" + mfrAD("4c00", "0215aabbccdd"), ""}, // an iBeacon
		{"020106", ""},
		{"", ""},
		{"ff", ""},
	}
	for _, tc := range tests {
		if got := Detect(mustHex(t, tc.adv)); got != tc.want {
			t.Errorf("Detect(%s) = %q, want %q", tc.adv, got, tc.want)
		}
	}
}

// AD parsing: a zero length ends the data (padding), names and UUID lists are read.
func TestParseAD(t *testing.T) {
	ad, err := parseAD(mustHex(t, "020106"+"0303e5fe"+"0409414243"+"0000000000"))
	if err != nil {
		t.Fatal(err)
	}
	if ad.name != "ABC" || !ad.uuids[uuidMopeka] {
		t.Fatalf("parsed %+v", ad)
	}
}
