package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"devhost/abi"
	"devhost/host/signalk/sktest"
	"devhost/host/skstream"
	"devhost/plugins"
	"devhost/plugins/n2k/skmeta"
)

// A real log replayed onto the simulated bus of a device (built as make build builds it,
// n2k bundled) connected to the real signalk-server: every value the plugin decodes from the
// log (what `devctl n2k decode` prints with the same module) reads back from the server's
// REST API, and the server holds the units of a path the specification gives units.
func TestN2KLogIntoSignalKServer(t *testing.T) {
	b := buildBundled(t)
	ctx := guardCtx(t, 2)
	log := filepath.Join(plugins.Dir(), "n2k", "testdata", "logs", "candumpSample2.txt")
	want := n2kDecodedValues(ctx, t, b.wasm, log)
	if len(want) < 10 {
		t.Fatalf("only %d paths decoded from %s", len(want), log)
	}

	s, d := n2kDevice(ctx, t, b, log)
	paths := n2kReadBack(t, want, func(p string) json.RawMessage {
		v, _, err := s.Value(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return v
	})
	st := d.call("GET", "/api/v1/n2k/status", "").json(t)
	t.Logf("%d paths read back from signalk-server; device status: frames_in %v, deltas %v", len(paths), st["frames_in"], st["deltas"])

	// Units: the first decoded path the specification gives units.
	for _, p := range paths {
		u := skmeta.Units(p)
		if u == "" {
			continue
		}
		code, body, err := s.Do(ctx, "GET", "/signalk/v1/api/vessels/self/"+strings.ReplaceAll(p, ".", "/")+"/meta", s.AdminToken, nil)
		var meta struct{ Units string }
		if err != nil || code != 200 || json.Unmarshal(body, &meta) != nil || meta.Units != u {
			t.Errorf("meta of %s: %d %s (%v), want units %s", p, code, body, err, u)
		}
		break
	}
}

// AIS targets reach the real signalk-server: the real AIS lines of canboat's Garmin AIS 800
// sample (class B static data and a class A position) and the log made of every mapped PGN
// (vessels, an aid to navigation, a base station, a SAR aircraft) replayed onto the
// simulated bus of a device connected to the server. Every value the plugin decodes for a
// target (what `devctl n2k decode` prints with the same module) reads back from the server's
// REST API under the target's context, `/signalk/v1/api/vessels/urn:mrn:imo:mmsi:<mmsi>/...`,
// the members of the target's root (name, mmsi, call sign) included.
func TestN2KAISTargetsIntoSignalKServer(t *testing.T) {
	b := buildBundled(t)
	ctx := guardCtx(t, 2)
	logs := []string{
		filepath.Join(plugins.Dir(), "n2k", "testdata", "logs", "canboat-samples.raw"),
		filepath.Join(plugins.Dir(), "n2k", "testdata", "logs", "mapped-pgns.log"),
	}
	// want: REST address under /signalk/v1/api → the last decoded value. A path's node is
	// a leaf whose value is compared; a root member's node is the value itself.
	want, leaf := map[string]json.RawMessage{}, map[string]bool{}
	roots := map[string]bool{}
	for _, log := range logs {
		n2kDecode(ctx, t, b.wasm, log, func(c, path string, v json.RawMessage) {
			if c == "" || abi.ValidContext(c) != nil || string(v) == "null" {
				return
			}
			roots[strings.Split(c, ".urn:")[0]] = true
			base := strings.ReplaceAll(c, ".", "/")
			if path != "" {
				addr := base + "/" + strings.ReplaceAll(path, ".", "/")
				want[addr], leaf[addr] = v, true
				return
			}
			var members map[string]json.RawMessage
			if err := json.Unmarshal(v, &members); err != nil {
				t.Fatalf("%s root %s: %v", c, v, err)
			}
			flattenMembers(base, members, want)
		})
	}
	for _, r := range []string{"vessels", "atons", "shore.basestations", "sar"} {
		if !roots[r] {
			t.Fatalf("no %s target decoded from the logs (%v)", r, roots)
		}
	}

	s, _ := n2kDevice(ctx, t, b, logs...)
	addrs := n2kReadBack(t, want, func(a string) json.RawMessage {
		code, body, err := s.Do(ctx, "GET", "/signalk/v1/api/"+a, s.AdminToken, nil)
		if err != nil {
			t.Fatal(err)
		}
		if code != 200 {
			return nil
		}
		if !leaf[a] {
			return body
		}
		var node struct {
			Value json.RawMessage `json:"value"`
		}
		if json.Unmarshal(body, &node) != nil {
			return nil
		}
		return node.Value
	})
	t.Logf("%d target values read back from signalk-server, %v", len(addrs), roots)
	// The own vessel keeps its own values: no target's name became the boat's.
	if code, body, err := s.Do(ctx, "GET", "/signalk/v1/api/vessels/self/name", s.AdminToken, nil); err == nil && code == 200 {
		for _, a := range addrs {
			if strings.HasSuffix(a, "/name") && string(body) == string(want[a]) {
				t.Errorf("the own vessel's name is a target's: %s", body)
			}
		}
	}
}

// flattenMembers adds the members of a context's root to want by REST address: an object
// member goes one level down (communication/callsignVhf), anything else is a value.
func flattenMembers(base string, members map[string]json.RawMessage, want map[string]json.RawMessage) {
	for k, v := range members {
		var sub map[string]json.RawMessage
		if json.Unmarshal(v, &sub) == nil && sub != nil {
			flattenMembers(base+"/"+k, sub, want)
			continue
		}
		want[base+"/"+k] = v
	}
}

// n2kDevice starts the real signalk-server and a device built as b (n2k bundled) connected
// to it, enables the n2k plugin and replays logs onto the device's simulated bus.
func n2kDevice(ctx context.Context, t *testing.T, b bundledBuild, logs ...string) (*sktest.Server, *dev) {
	t.Helper()
	s := sktest.Require(t, sktest.Options{})
	d := newDev(t, withBinary(b.bin), withEnv("DEVHOST_KEYS="+b.keys))
	connectSK(ctx, t, d, s)
	// A fresh device's n2k is dormant (f_n2k.enabled false): no instance, no memory, and
	// enabling it is what wakes it.
	eventually(t, "n2k dormant", func() bool {
		r := d.call("GET", "/api/v1/plugins/n2k", "")
		return r.status == 200 && r.json(t)["state"] == "dormant"
	})
	if p := d.call("GET", "/api/v1/plugins/n2k", "").json(t); p["memory"] != 0.0 || fmt.Sprint(p["wake"]) != "map[config:map[enabled:false]]" {
		t.Fatalf("dormant n2k: memory %v wake %v", p["memory"], p["wake"])
	}
	if r := d.call("PUT", "/api/v1/config", `{"f_n2k":{"enabled":true}}`); r.status != 200 {
		t.Fatalf("enable: %d %s", r.status, r.body)
	}
	eventually(t, "n2k woken", func() bool {
		r := d.call("GET", "/api/v1/plugins/n2k", "")
		return r.status == 200 && r.json(t)["state"] == "running"
	})
	eventually(t, "n2k listening", func() bool {
		r := d.call("GET", "/api/v1/n2k/status", "")
		return r.status == 200 && r.json(t)["state"] != "disabled"
	})
	for _, log := range logs {
		replay := exec.CommandContext(ctx, devctl, "board", "--data", filepath.Join(d.data, "flash"), "can", "replay", "--file", log, "--max")
		if out, err := replay.CombinedOutput(); err != nil {
			t.Fatalf("replay %s: %v\n%s", log, err, out)
		}
	}
	return s, d
}

// n2kReadBack reads every key of want with read until each holds its wanted value (numbers
// within 1e-6 relative), bounded by hangGuard, and answers the keys, sorted.
func n2kReadBack(t *testing.T, want map[string]json.RawMessage, read func(key string) json.RawMessage) []string {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	got := map[string]json.RawMessage{}
	same := func(k string) bool { return got[k] != nil && n2kSameJSON(got[k], want[k]) }
	deadline := time.Now().Add(hangGuard)
	for {
		missing := 0
		for _, k := range keys {
			if same(k) {
				continue
			}
			if got[k] = read(k); !same(k) {
				missing++
			}
		}
		if missing == 0 {
			return keys
		}
		if time.Now().After(deadline) {
			for _, k := range keys {
				if !same(k) {
					t.Errorf("%s on the server: %s, want %s", k, got[k], want[k])
				}
			}
			t.FailNow()
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// n2kDecodedValues runs devctl n2k decode with module wasm over log and answers the last value
// of each own-vessel path (null values and the vessel-root path left out).
func n2kDecodedValues(ctx context.Context, t *testing.T, wasm, log string) map[string]json.RawMessage {
	t.Helper()
	want := map[string]json.RawMessage{}
	n2kDecode(ctx, t, wasm, log, func(context, path string, v json.RawMessage) {
		if context == "" && path != "" && string(v) != "null" {
			want[path] = v
		}
	})
	return want
}

// n2kDecode runs devctl n2k decode with module wasm over log and calls fn with every value
// of every delta, in order, with the delta's context ("" for the own vessel).
func n2kDecode(ctx context.Context, t *testing.T, wasm, log string, fn func(context, path string, v json.RawMessage)) {
	t.Helper()
	n2kDecodeLines(ctx, t, wasm, log, func(line []byte) {
		delta, err := skstream.ParseFrame(line)
		if err != nil {
			t.Fatalf("decode line %q: %v", line, err)
		}
		for _, u := range delta.Updates {
			for _, v := range u.Values {
				fn(delta.Context, v.Path, v.Value)
			}
		}
	})
}

// n2kSameJSON compares two JSON values, numbers within 1e-6 relative.
func n2kSameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return n2kSameValue(x, y)
}

func n2kSameValue(x, y any) bool {
	switch xv := x.(type) {
	case float64:
		yv, ok := y.(float64)
		return ok && (xv == yv || math.Abs(xv-yv) <= 1e-6*math.Max(math.Abs(xv), math.Abs(yv)))
	case map[string]any:
		yv, ok := y.(map[string]any)
		if !ok || len(xv) != len(yv) {
			return false
		}
		for k, v := range xv {
			if !n2kSameValue(v, yv[k]) {
				return false
			}
		}
		return true
	case []any:
		yv, ok := y.([]any)
		if !ok || len(xv) != len(yv) {
			return false
		}
		for i := range xv {
			if !n2kSameValue(xv[i], yv[i]) {
				return false
			}
		}
		return true
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}
