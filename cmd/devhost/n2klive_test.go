package main_test

import (
	"bufio"
	"bytes"
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

	"devhost/host/signalk/sktest"
	"devhost/plugins"
	"devhost/plugins/n2k/skmeta"
)

// A real log replayed onto the simulated bus of a device (built as make build builds it,
// n2k bundled) connected to the real signalk-server: every value the plugin decodes from the
// log (what `devctl n2k decode` prints with the same module) reads back from the server's
// REST API, and the server holds the units of a path the specification gives units.
func TestN2KLogIntoSignalKServer(t *testing.T) {
	b := buildBundled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	defer cancel()
	log := filepath.Join(plugins.Dir(), "n2k", "testdata", "logs", "candumpSample2.txt")
	want := n2kDecodedValues(ctx, t, b.wasm, log)
	if len(want) < 10 {
		t.Fatalf("only %d paths decoded from %s", len(want), log)
	}

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

	replay := exec.CommandContext(ctx, devctl, "board", "--data", filepath.Join(d.data, "flash"), "can", "replay", "--file", log, "--max")
	if out, err := replay.CombinedOutput(); err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	paths := make([]string, 0, len(want))
	for p := range want {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	// Every path, until each holds its last decoded value (bounded by hangGuard).
	got := map[string]json.RawMessage{}
	deadline := time.Now().Add(hangGuard)
	for {
		missing := 0
		for _, p := range paths {
			if n2kSameJSON(got[p], want[p]) {
				continue
			}
			v, _, err := s.Value(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			got[p] = v
			if !n2kSameJSON(v, want[p]) {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, p := range paths {
				if !n2kSameJSON(got[p], want[p]) {
					t.Errorf("%s on the server: %s, want %s", p, got[p], want[p])
				}
			}
			t.FailNow()
		}
		time.Sleep(200 * time.Millisecond)
	}
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

// n2kDecodedValues runs devctl n2k decode with module wasm over log and answers the last value
// of each path (null values and the vessel-root path left out).
func n2kDecodedValues(ctx context.Context, t *testing.T, wasm, log string) map[string]json.RawMessage {
	t.Helper()
	cmd := exec.CommandContext(ctx, devctl, "n2k", "decode", "--module", wasm, log)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("n2k decode: %v\n%s", err, stderr.Bytes())
	}
	want := map[string]json.RawMessage{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		var delta struct {
			Updates []struct {
				Values []struct {
					Path  string          `json:"path"`
					Value json.RawMessage `json:"value"`
				} `json:"values"`
			} `json:"updates"`
		}
		if err := json.Unmarshal(sc.Bytes(), &delta); err != nil {
			t.Fatalf("decode line %q: %v", sc.Text(), err)
		}
		for _, u := range delta.Updates {
			for _, v := range u.Values {
				if v.Path == "" || string(v.Value) == "null" {
					continue
				}
				want[v.Path] = v.Value
			}
		}
	}
	return want
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
