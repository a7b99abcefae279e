package deptest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The layers, from the bottom. A package not named here is placed by its path: host/<name>
// (and everything below it) is a capability, cmd/... a command, plugins/... a plugin. New
// capability packages need no entry.
var (
	// vocab is the host's one Signal K vocabulary (values, deltas, PUT requests, results,
	// handlers and answers): standard library only, importable by every host package.
	vocab = set("host/sk")
	// leaves import no devhost package but the vocabulary: shared conventions and
	// self-contained libraries.
	leaves = set("host/api", "host/build", "host/foreground", "host/store", "host/mdns", "host/skstream",
		"host/plugin/wasmbin", "host/sktls/pemcert")
	// foundation is what every capability may use: the board, the services the device runs
	// on (configuration, events, health, logs, clock, network state, web server, boot, the
	// signature trust store). A foundation package imports leaves, foundation and abi only.
	foundation = set("host/board", "host/boot", "host/clock", "host/config", "host/events", "host/health",
		"host/httpd", "host/logs", "host/netroute", "host/plugin/trust", "runtime-ns")
	// testHelpers (and the packages below them) support tests and commands such as the
	// cmd/devbench harness; product code never imports them.
	testHelpers = set("host/api/apitest", "host/httpd/httpdtest", "host/mdns/mdnstest",
		"host/plugin/wasmbin/wasmtest", "host/signalk/sktest", "host/skstream/skpeer", "host/testio")
	// parts are capabilities that belong to another: the Signal K client is built from the
	// discovery, TLS and stream packages beside it.
	parts = map[string][]string{"host/signalk": {"host/skdiscovery", "host/sktls"}}
	// bridges join two capabilities and are wired by host/device like one.
	bridges = map[string][]string{"host/signalk/skplugin": {"host/plugin", "host/signalk"}}
	// guestSide is the contract as a plugin sees it: abi and the host function imports
	// generated from its table.
	guestSide = set("abi", "abi/hostcall")
)

func set(ps ...string) map[string]bool {
	m := map[string]bool{}
	for _, p := range ps {
		m[p] = true
	}
	return m
}

// testHelper reports whether p is a test helper or below one (host/signalk/sktest/skinstall).
func testHelper(p string) bool {
	for h := range testHelpers {
		if p == h || strings.HasPrefix(p, h+"/") {
			return true
		}
	}
	return false
}

// capability answers the capability a host package belongs to (host/ota/image: host/ota).
func capability(p string) string {
	parts := strings.SplitN(p, "/", 3)
	if len(parts) < 2 || parts[0] != "host" {
		return ""
	}
	return parts[0] + "/" + parts[1]
}

// pluginRoot answers the plugin a package under plugins/ belongs to (plugins/n2k/decode:
// plugins/n2k), "" for others.
func pluginRoot(p string) string {
	parts := strings.SplitN(p, "/", 3)
	if len(parts) < 2 || parts[0] != "plugins" {
		return ""
	}
	return parts[0] + "/" + parts[1]
}

// allowed reports whether package from (a path inside the repository, "devhost/" cut) may
// import to, and why not.
func allowed(from, to string) (bool, string) {
	// web/test/... are the browser tests' own commands (the Signal K server they start).
	if testHelper(to) && !testHelper(from) && !strings.HasPrefix(from, "cmd/") && !strings.HasPrefix(from, "web/test/") {
		return false, "test helpers are for tests and commands"
	}
	switch {
	case from == "abi" || strings.HasPrefix(from, "abi/"):
		return to == "abi", "abi is the contract: standard library only"
	case from == "sdk" || strings.HasPrefix(from, "sdk/"):
		return guestSide[to] || to == "sdk", "the SDK depends on abi alone"
	case from == "plugins" || strings.HasPrefix(from, "plugins/"):
		return guestSide[to] || to == "sdk" || (pluginRoot(to) != "" && pluginRoot(to) == pluginRoot(from)),
			"a plugin sees the device only through abi and sdk (and its own subpackages)"
	case strings.HasPrefix(from, "cmd/") || strings.HasPrefix(from, "web/test/"):
		// web/test/... are the browser tests' own commands (the Signal K server they start).
		return !strings.HasPrefix(to, "cmd/"), "commands are not imported"
	case from == "deptest":
		return false, "deptest imports nothing"
	case to == "sdk" || strings.HasPrefix(to, "plugins") || strings.HasPrefix(to, "cmd/"):
		return false, "the device never imports the SDK, plugins or commands"
	case from == "host/device":
		return true, ""
	case vocab[from]:
		return false, "the vocabulary is standard library only"
	case vocab[to]:
		return true, ""
	case leaves[from]:
		return false, "a leaf imports no devhost package but the vocabulary"
	case testHelper(from):
		return testHelper(to) || leaves[to], "a test helper imports leaves and other helpers only"
	case leaves[to] || to == "abi":
		return true, ""
	case foundation[from]:
		return foundation[to], "foundation packages import leaves, foundation and abi only"
	case foundation[to]:
		return true, ""
	}
	if b, ok := bridges[from]; ok {
		for _, t := range b {
			if to == t {
				return true, ""
			}
		}
	}
	if own := capability(from); own != "" {
		if capability(to) == own && !foundation[to] {
			return true, "" // its own subpackages
		}
		for _, t := range parts[own] {
			if capability(to) == t {
				return true, ""
			}
		}
		return false, "capabilities do not import each other: host/device wires them"
	}
	return false, "not in any layer"
}

type pkg struct {
	ImportPath string
	Imports    []string
}

// list runs go list in a module of the repository with extra environment.
func list(t *testing.T, dir string, env ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list in %s: %v\n%s", dir, err, stderr.Bytes())
	}
	var ps []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list in %s: %v", dir, err)
		}
		ps = append(ps, p)
	}
	return ps
}

// TestLayers checks every non-test import of every package in the repository's modules.
func TestLayers(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var all []pkg
	all = append(all, list(t, root)...)
	all = append(all, list(t, filepath.Join(root, "abi"))...)
	all = append(all, list(t, filepath.Join(root, "abi"), "GOOS=wasip1", "GOARCH=wasm")...)
	all = append(all, list(t, filepath.Join(root, "sdk"))...)
	all = append(all, list(t, filepath.Join(root, "sdk"), "GOOS=wasip1", "GOARCH=wasm")...)
	if len(all) < 30 {
		t.Fatalf("go list found only %d packages", len(all))
	}
	var bad []string
	for _, p := range all {
		from, ok := strings.CutPrefix(p.ImportPath, "devhost/")
		if !ok {
			t.Fatalf("package %s outside the devhost module paths", p.ImportPath)
		}
		for _, imp := range p.Imports {
			to, ok := strings.CutPrefix(imp, "devhost/")
			if !ok {
				if (guestSide[from] || from == "sdk" || vocab[from]) && strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
					bad = append(bad, from+" imports "+imp+": the contract, the SDK and the vocabulary use the standard library only")
				}
				continue
			}
			if ok, why := allowed(from, to); !ok {
				bad = append(bad, from+" imports "+to+": "+why)
			}
		}
	}
	sort.Strings(bad)
	for _, b := range slices.Compact(bad) {
		t.Error(b)
	}
}

// The rule itself, case by case, so that a change to it is a visible decision.
func TestAllowed(t *testing.T) {
	for edge, want := range map[string]bool{
		"abi → host/config":                               false,
		"sdk → abi":                                       true,
		"sdk → abi/hostcall":                              true,
		"abi/hostcall → host/plugin":                      false,
		"plugins/testdata/nocaps → abi/hostcall":          true,
		"host/plugin → abi/hostcall":                      false,
		"sdk → host/config":                               false,
		"plugins/app → sdk":                               true,
		"plugins/app → host/plugin":                       false,
		"plugins/n2k → plugins/n2k/decode":                true,
		"plugins/n2k/skmap → plugins/n2k/decode":          true,
		"plugins/n2k → plugins/app":                       false,
		"cmd/devctl → plugins/n2k/input":                  true,
		"host/signalk → plugins/n2k/decode":               false,
		"host/api → host/board":                           false,
		"host/store → host/api":                           false,
		"host/config → host/store":                        true,
		"host/health → host/board":                        true,
		"host/config → host/plugin":                       false,
		"host/wifi → host/netroute":                       true,
		"host/wifi → host/config":                         true,
		"host/wifi → host/portal":                         false,
		"host/portal → host/httpd":                        true,
		"host/ota → host/boot":                            true,
		"host/ota → host/ota/image":                       true,
		"host/ota/image → host/plugin/trust":              true,
		"host/sntp → host/clock":                          true,
		"host/power → host/wifi":                          false,
		"host/plugin → host/signalk":                      false,
		"host/plugin → host/plugin/trust":                 true,
		"host/signalk → host/sktls":                       true,
		"host/sktls → host/signalk":                       false,
		"host/signalk/skplugin → host/plugin":             true,
		"host/signalk/skplugin → host/system":             false,
		"host/device → host/wifi":                         true,
		"host/skdiscovery → host/signalk/sktest":          false,
		"host/signalk/sktest/skrun → host/signalk/sktest": true,
		"host/signalk → host/signalk/sktest/skrun":        false,
		"host/plugin → sdk":                               false,
		"cmd/devbench → host/signalk/sktest":              true,
		"host/system → cmd/devctl":                        false,
		"host/sk → host/api":                              false,
		"host/skstream → host/sk":                         true,
		"host/skstream → host/api":                        false,
		"host/plugin → host/sk":                           true,
		"host/signalk/skplugin → host/sk":                 true,
		"abi → host/sk":                                   false,
		"sdk → host/sk":                                   false,
	} {
		from, to, _ := strings.Cut(edge, " → ")
		if ok, why := allowed(from, to); ok != want {
			t.Errorf("%s: allowed %v (%s), want %v", edge, ok, why, want)
		}
	}
}
