//go:build !wasip1

// The reference runs node through os/exec, which a wasip1 test binary cannot.

package sensors

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"devhost/host/signalk/sktest"
	"devhost/plugins"
)

// The reference: npm bt-sensors-plugin-sk at this version, installed by `make bt-sensors-ref`
// (or by this test when missing) into <module root>/.cache/bt-sensors, git-ignored.
const refVersion = "1.3.7"

// refCase is one advertisement decoded by both Decode and the reference's class.
type refCase struct {
	name   string
	source string // where the payload comes from
	kind   Kind
	addr   string
	adv    string // whole advertising data, hex
	key    string
	class  string         // the reference's sensor class
	config map[string]any // the reference class's settings
	refAdv string         // what the reference decodes when it differs from adv (it cannot decrypt BTHome)
	extra  []string       // paths Decode publishes that the reference class does not read
}

const (
	srcBTHome   = "objects in the style of the BTHome v2 format documentation (bthome.io)"
	srcRuuvi    = "Ruuvi data format 5 (RAWv2) specification, test vectors"
	srcVictronC = "Victron Instant Readout captures published with keys (victron-ble project tests)"
	srcVictronR = "records of the victron-ble project's tests, encrypted here with the capture's key"
	srcFormat   = "built from the sensor's published field layout"
)

// victronClass is one of the reference's Victron classes: the record type it reads and the
// key of the cases' adverts for it.
type victronClass struct {
	class  string
	record byte
	key    string
}

// capture is a case of an advert captured from a device.
func (v victronClass) capture(name, adv string) refCase {
	return refCase{name: name, source: srcVictronC, kind: KindVictron, class: v.class, key: v.key, adv: adv}
}

// sealed is a case of a decrypted record, encrypted here into an Instant Readout advert with
// the AES-CTR counter starting at iv.
func (v victronClass) sealed(t testing.TB, name, source string, iv uint16, record string) refCase {
	t.Helper()
	k := mustHex(t, v.key)
	block, err := aes.NewCipher(k)
	if err != nil {
		t.Fatal(err)
	}
	var ivb [16]byte
	ivb[0], ivb[1] = byte(iv), byte(iv>>8)
	rec := mustHex(t, record)
	enc := make([]byte, len(rec))
	cipher.NewCTR(block, ivb[:]).XORKeyStream(enc, rec)
	hdr := []byte{0x10, 0x02, 0x89, 0xA3, v.record, byte(iv), byte(iv >> 8), k[0]}
	adv := mfrAD("e102", hex.EncodeToString(append(hdr, enc...)))
	return refCase{name: name, source: source, kind: KindVictron, class: v.class, key: v.key, adv: adv}
}

func refCases(t testing.TB) []refCase {
	const shelly = "ShellySBHT003C"
	bm := victronClass{"VictronBatteryMonitor", victronBatteryMonitor, "aff4d0995b7d1e176c0c33ecb9e70dcd"}
	solar := victronClass{"VictronSolarCharger", victronSolarCharger, "adeccb947395801a4dd45a2eaa44bf17"}
	dcdc := victronClass{"VictronDCDCConverter", victronDCDC, "64ba49f1a8562e45197a8e1fe50d7658"}
	return []refCase{
		// BTHome v2: the reference reads battery, temperature 0x45, humidity 0x2E and the
		// button (class ShellySBHT003C); every object's raw value is also checked against its
		// BTHome parser in TestReferenceBTHomeObjects.
		{name: "bthome/battery-temp-hum", source: srcBTHome, kind: KindBTHome, class: shelly,
			adv: "020106" + bthomeAD("40016102ca0903bf13"), extra: []string{"temperature", "humidity"}},
		{name: "bthome/shelly-ht", source: srcBTHome, kind: KindBTHome, class: shelly,
			adv: bthomeAD("4400070161" + "2e23" + "3a01" + "451101")},
		{name: "bthome/negative-temp-hold", source: srcFormat, kind: KindBTHome, class: shelly,
			adv: bthomeAD("4001502e5a3a8045a5ff")},
		{name: "bthome/shelly-legacy-hold", source: srcFormat, kind: KindBTHome, class: shelly,
			adv: bthomeAD("40015a3afe45fa00")},
		{name: "bthome/encrypted-shelly", source: srcFormat + ", sealed here with a bind key", kind: KindBTHome,
			class: shelly, addr: testAddr, key: "231d39c1d7cc1ab1aee224cd096db932",
			adv:    "020106" + bthomeAD(bthomeSeal(t, testAddr, "231d39c1d7cc1ab1aee224cd096db932", 0x45, 0x01020304, "0155"+"2e3c"+"3a02"+"45e5ff")),
			refAdv: bthomeAD("440155" + "2e3c" + "3a02" + "45e5ff"),
			// The Shelly class knows press and hold only; BTHome's double press is published too.
			extra: []string{"button"}},

		// RuuviTag data format 5.
		{name: "ruuvi/valid", source: srcRuuvi, kind: KindRuuvi, class: "RuuviTag",
			adv: "020106" + mfrAD("9904", "0512FC5394C37C0004FFFC040CAC364200CDCBB8334C884F")},
		{name: "ruuvi/maximum", source: srcRuuvi, kind: KindRuuvi, class: "RuuviTag",
			adv: "020106" + mfrAD("9904", "057FFFFFFEFFFE7FFF7FFF7FFFFFDEFEFFFECBB8334C884F")},
		{name: "ruuvi/minimum", source: srcRuuvi, kind: KindRuuvi, class: "RuuviTag",
			adv: "020106" + mfrAD("9904", "058001000000008001800180010000000000CBB8334C884F")},

		// Victron Instant Readout.
		bm.capture("victron/battery-monitor-capture", "020106"+mfrAD("e102", "100289a302b040af925d09a4d89aa0128bdef48c6298a9")),
		solar.capture("victron/solar-charger-capture", mfrAD("e102", "100242a0016207adceb37b605d7e0ee21b24df5c")),
		dcdc.capture("victron/dcdc-capture", mfrAD("e102", "1000c0a304121d64ca8d442b90bbdf6a8cba")),
		bm.sealed(t, "victron/battery-aux-midpoint", srcVictronR, 0x1234, "ffffe6040000feff010000000080fe0c"),
		bm.sealed(t, "victron/battery-aux-starter", srcVictronR, 0x0001, "ffffe6040000feff000000000080feac"),
		bm.sealed(t, "victron/battery-aux-temperature", srcVictronR, 0xfffe, "ffffe6040000ffff020000000080fede"),
		bm.sealed(t, "victron/battery-discharging", srcFormat, 0x0102, "5a00b2040000a0050270fcff2c01cdbb00"),
		bm.sealed(t, "victron/battery-alarms", srcFormat, 0x0203, "1e00a804050100000370fcff2c01cd0b00"),
		solar.sealed(t, "victron/solar-bulk", srcVictronR, 0x0777, "0300f80402000200030000fe8c9a5572"),
		solar.sealed(t, "victron/solar-mppt100-no-load", srcVictronR, 0x0778, "0300fb09650032000901ffff31bc45ad"),
		dcdc.sealed(t, "victron/dcdc-record", srcVictronR, 0x4242, "00002305ff7f80000000cbdd494cc5d1"),
		dcdc.sealed(t, "victron/dcdc-running-two-reasons", srcFormat, 0x0009, "0300a0052c0581000000"),

		// Xiaomi LYWSD03MMC custom firmware.
		{name: "xiaomi/pvvx", source: srcFormat, kind: KindXiaomiATC, class: "ATC", config: map[string]any{"parser": "ATC-LE"},
			adv: "020106" + serviceAD("1a18", "a4c1380a0b0c9c09c4134d0c640204")},
		{name: "xiaomi/pvvx-below-zero", source: srcFormat, kind: KindXiaomiATC, class: "ATC", config: map[string]any{"parser": "ATC-LE"},
			adv: serviceAD("1a18", "a4c1380a0b0cf3fd1027b80b2a0900")},
		{name: "xiaomi/atc1441", source: srcFormat, kind: KindXiaomiATC, class: "ATC", config: map[string]any{"parser": "ATC-Exploit"},
			adv: "020106" + serviceAD("1a18", "a4c1380c0b0a00e12f580b9a07")},
		{name: "xiaomi/atc1441-below-zero", source: srcFormat, kind: KindXiaomiATC, class: "ATC", config: map[string]any{"parser": "ATC-Exploit"},
			adv: serviceAD("1a18", "a4c1380c0b0affc85a1e0ac7ff")},

		// Mopeka tank sensors (level for the reference's default medium and height).
		{name: "mopeka/pro-check", source: srcFormat, kind: KindMopeka, class: "MopekaTankSensor",
			adv: "020106" + "0303e5fe" + mfrAD("5900", "03605a2c21aabbcc0102")},
		{name: "mopeka/pro-plus-cold-good-reading", source: srcFormat, kind: KindMopeka, class: "MopekaTankSensor",
			adv: "0303e5fe" + mfrAD("5900", "08510adaffddeeff80f0")},
		{name: "mopeka/zero-level-flat-battery", source: srcFormat, kind: KindMopeka, class: "MopekaTankSensor",
			adv: "0303e5fe" + mfrAD("5900", "0c40000000123456fe01")},
	}
}

// refValue is a value as the reference script prints it.
type refValue struct {
	Path  string `json:"path"`
	Unit  string `json:"unit"`
	Value any    `json:"value"`
}

type refResult struct {
	Values json.RawMessage `json:"values"`
	Error  string          `json:"error"`
}

// refPathAlias maps the two Victron auxiliary paths the reference publishes outside the
// battery's prefix (electrical.batteries.starter / .midpoint) to the relative paths Decode
// answers for them.
var refPathAlias = map[string]string{
	"electrical.batteries.starter.voltage":  "starterVoltage",
	"electrical.batteries.midpoint.voltage": "midpointVoltage",
}

func TestReferenceValues(t *testing.T) {
	cases := refCases(t)
	in := make([]map[string]any, len(cases))
	for i, c := range cases {
		adv := c.adv
		if c.refAdv != "" {
			adv = c.refAdv
		}
		in[i] = map[string]any{"class": c.class, "adv": adv, "config": c.config}
		if c.refAdv == "" {
			in[i]["key"] = c.key
		}
	}
	out := runReference(t, in)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want []refValue
			if out[i].Error != "" {
				t.Fatalf("reference %s failed on %s: %s", c.class, c.source, out[i].Error)
			}
			if err := json.Unmarshal(out[i].Values, &want); err != nil {
				t.Fatalf("reference output: %v", err)
			}
			if len(want) == 0 {
				t.Fatalf("the reference decoded nothing from %s", c.adv)
			}
			addr := c.addr
			if addr == "" {
				addr = "AA:BB:CC:DD:EE:FF"
			}
			got, err := Decode(c.kind, addr, mustHex(t, c.adv), c.key)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			t.Logf("%s: %v", c.source, got)
			if k := Detect(mustHex(t, c.adv)); k != c.kind {
				t.Errorf("Detect = %q, want %q", k, c.kind)
			}
			gotBy := valuesOf(t, got)
			for _, w := range want {
				p := w.Path
				if a, ok := refPathAlias[p]; ok {
					p = a
				}
				g, ok := gotBy[p]
				if !ok {
					t.Errorf("%s: reference has %v %s, Decode has no value (got %v)", p, w.Value, w.Unit, got)
					continue
				}
				delete(gotBy, p)
				if g.Units != w.Unit {
					t.Errorf("%s: units %q, reference %q", p, g.Units, w.Unit)
				}
				if !sameValue(g.Value, w.Value) {
					t.Errorf("%s: value %#v, reference %#v", p, g.Value, w.Value)
				}
			}
			for _, p := range c.extra {
				delete(gotBy, p)
			}
			for p, v := range gotBy {
				t.Errorf("%s: Decode publishes %v that the reference does not", p, v.Value)
			}
		})
	}
}

// TestReferenceBTHomeObjects checks each object's size, signedness and raw value against
// the reference's BTHome v2 parser, for every object id both implement.
func TestReferenceBTHomeObjects(t *testing.T) {
	payloads := []string{
		"40016102ca0903bf13",
		"4404138a0105138a1408ca060b021b000c020c12e20414020c2101",
		"4009600a138a143f020c400c00414e00424e3422434e34444e3446324a020c505d396164530c48656c6c6f20576f726c6421",
		"400d120c0e1a0b0f01100011012f2a3d09013e0100000006204e07e8fd150016011700180019001a001b011c001d001e011f0020002101220023002400250126002700280029002a002b002c002d01",
		"4045a5ff3ffcff47870348dc0549dc054b138a144c41018a144d138a14024e87562a014f87562a0151870352870355aabbccdd" + "3a04" + "3c0103",
		"40f00100f1000d0a04f2000c09",
	}
	in := make([]map[string]any, len(payloads))
	for i, p := range payloads {
		in[i] = map[string]any{"class": "BTHomeServiceData", "adv": bthomeAD(p)}
	}
	out := runReference(t, in)
	for i, p := range payloads {
		if out[i].Error != "" {
			t.Errorf("reference failed on %s: %s", p, out[i].Error)
			continue
		}
		var want []struct {
			ID    int `json:"id"`
			Value any `json:"value"`
		}
		if err := json.Unmarshal(out[i].Values, &want); err != nil {
			t.Fatal(err)
		}
		type obj struct {
			id  byte
			val any
		}
		var got []obj
		err := bthomeWalk(mustHex(t, p)[1:], func(id byte, o bthomeObj, raw uint64, data []byte) {
			switch {
			case o.size == 0:
				got = append(got, obj{id, string(data)})
			case o.signed:
				got = append(got, obj{id, float64(signExtend(raw, o.size))})
			default:
				got = append(got, obj{id, float64(raw)})
			}
		})
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if len(got) != len(want) {
			t.Errorf("%s: %d objects, reference %d (%v)", p, len(got), len(want), want)
			continue
		}
		for j := range got {
			if int(got[j].id) != want[j].ID {
				t.Errorf("%s object %d: id 0x%02X, reference 0x%02X", p, j, got[j].id, want[j].ID)
				continue
			}
			if got[j].id == 0x3C || got[j].id == 0xF1 || got[j].id == 0xF2 { // the reference splits the dimmer and firmware versions into fields; they are not published
				continue
			}
			w := want[j].Value
			if b, ok := w.(bool); ok { // the reference answers binary objects as booleans
				w = 0.0
				if b {
					w = 1.0
				}
			}
			if !sameValue(got[j].val, w) {
				t.Errorf("%s object 0x%02X: raw %v, reference %v", p, got[j].id, got[j].val, want[j].Value)
			}
		}
	}
}

// runReference feeds the cases to testdata/reference.js and answers its results in order.
func runReference(t *testing.T, in []map[string]any) []refResult {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if sktest.Required() {
			t.Fatalf("node is required here (CI=true or SKTEST_REQUIRED=1) to run the reference decoder: %v", err)
		}
		t.Skipf("skipping: node is not installed, so the reference decoder bt-sensors-plugin-sk cannot run: %v", err)
	}
	dir := ensureReference(t)
	body, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "reference.js"), dir)
	cmd.Stdin = bytes.NewReader(body)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference.js: %v\n%s", err, stderr.String())
	}
	var out []refResult
	if err := json.Unmarshal(stdout, &out); err != nil {
		t.Fatalf("reference.js output: %v\n%s", err, stdout)
	}
	if len(out) != len(in) {
		t.Fatalf("reference.js answered %d results for %d cases", len(out), len(in))
	}
	return out
}

// ensureReference answers the installed bt-sensors-plugin-sk folder, installing the pinned
// version with npm (as `make bt-sensors-ref` does) when it is missing.
func ensureReference(t *testing.T) string {
	t.Helper()
	cache := os.Getenv("BT_SENSORS_DIR")
	if cache == "" {
		cache = filepath.Join(filepath.Dir(plugins.Dir()), ".cache", "bt-sensors")
	}
	pkg := filepath.Join(cache, "node_modules", "bt-sensors-plugin-sk")
	if installedVersion(pkg) == refVersion {
		return pkg
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Fatalf("bt-sensors-plugin-sk %s is not installed in %s and npm is missing: run `make bt-sensors-ref`", refVersion, cache)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, "package.json"), []byte(`{"private": true}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--ignore-scripts", "--no-audit", "--no-fund", "--save-exact", "bt-sensors-plugin-sk@"+refVersion)
	cmd.Dir = cache
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install bt-sensors-plugin-sk@%s: %v\n%s", refVersion, err, out)
	}
	if v := installedVersion(pkg); v != refVersion {
		t.Fatalf("installed bt-sensors-plugin-sk %q, want %s", v, refVersion)
	}
	return pkg
}

func installedVersion(pkg string) string {
	b, err := os.ReadFile(filepath.Join(pkg, "package.json"))
	if err != nil {
		return ""
	}
	var p struct {
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &p) != nil {
		return ""
	}
	return p.Version
}
