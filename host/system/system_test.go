package system

import (
	"context"
	"encoding/json"
	"io/fs"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/board"
	"devhost/host/build"
)

type fakeBoard struct{ mem board.Memory }

func (f *fakeBoard) Hardware() board.Hardware {
	return board.Hardware{Chip: "esp32s3", ChipRevision: 2, Cores: 2, InfoHardware: board.InfoHardware{
		MAC: "02:00:00:12:ab:cd", CPUMHz: 240, FlashBytes: 8 << 20, RAMInternalBytes: 512 << 10,
		Features: []string{"wifi", "ble"}, Board: "sim"}}
}
func (f *fakeBoard) Memory() board.Memory                             { return f.mem }
func (f *fakeBoard) Subscribe(ctx context.Context) <-chan board.Event { return nil }

type rig struct {
	sys      *System
	clk      *clockwork.FakeClock
	restarts []bool
	dump     []byte
	erased   int
}

func newRig(reason string, lastReset any, crash bool) *rig {
	r := &rig{clk: clockwork.NewFakeClock()}
	r.sys = New(Options{
		Clock: r.clk, Board: &fakeBoard{mem: board.Memory{FreeHeap: 100000, MinFreeHeap: 90000, FreeInternal: 50000, MinFreeInternal: 40000}},
		ResetReason: reason, SchemaETag: func() string { return `"abc"` }, UIStorage: func() bool { return false },
		Time:       func() TimeInfo { return TimeInfo{Source: "none"} },
		LastReset:  lastReset,
		AuthWanted: func() bool { return true },
		CoreDump: func() (any, []byte, error) {
			if r.dump == nil {
				return nil, nil, fs.ErrNotExist
			}
			return map[string]any{"present": true, "size": len(r.dump)}, r.dump, nil
		},
		EraseCoreDump: func() error { r.dump = nil; r.erased++; return nil },
		Restart:       func(factory bool) { r.restarts = append(r.restarts, factory) },
		Crash:         crash,
	})
	return r
}

func (r *rig) call(t *testing.T, method, path string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	for _, rt := range r.sys.Routes() {
		if rt.Method == method && rt.Path == path {
			w := httptest.NewRecorder()
			rt.Handler(w, httptest.NewRequest(method, path, nil))
			var m map[string]any
			_ = json.Unmarshal(w.Body.Bytes(), &m)
			return w, m
		}
	}
	t.Fatalf("no route %s %s", method, path)
	return nil, nil
}

func TestPing(t *testing.T) {
	r := newRig("poweron", nil, false)
	w, m := r.call(t, "GET", "/system/ping")
	if w.Code != 200 || m["app"] != build.App || m["version"] != build.Version || m["auth"] != true {
		t.Fatalf("%d %v", w.Code, m)
	}
}

func TestInfoFields(t *testing.T) {
	r := newRig("poweron", nil, false)
	r.clk.Advance(90 * time.Second)
	_, m := r.call(t, "GET", "/system/info")
	want := map[string]any{"app": build.App, "chip": "esp32s3", "chip_revision": 2.0, "cores": 2.0, "uptime_s": 90.0,
		"free_heap": 100000.0, "min_free_heap": 90000.0, "free_internal": 50000.0, "min_internal_free": 40000.0,
		"reset_reason": "poweron", "config_storage_reset": false, "schema_etag": `"abc"`, "ui_storage": false, "last_reset": nil}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	for _, k := range []string{"version", "idf_version", "hardware", "time"} {
		if _, ok := m[k]; !ok {
			t.Errorf("%s missing", k)
		}
	}
	hw := m["hardware"].(map[string]any)
	if hw["mac"] != "02:00:00:12:ab:cd" || hw["flash_bytes"] != float64(8<<20) || hw["ram_psram_bytes"] != 0.0 || hw["board"] != "sim" {
		t.Errorf("hardware %v", hw)
	}
}

func TestLastResetIsReadOnceAndOnlyAfterSoftwareReset(t *testing.T) {
	rec := map[string]any{"reason": "software", "health_key": "lowMemory"}
	r := newRig("software", rec, false)
	if _, m := r.call(t, "GET", "/system/info"); m["last_reset"] == nil {
		t.Fatal("first read lost the record")
	}
	if _, m := r.call(t, "GET", "/system/info"); m["last_reset"] != nil {
		t.Fatal("second read still shows the record")
	}
	r = newRig("panic", rec, false)
	if _, m := r.call(t, "GET", "/system/info"); m["last_reset"] != nil {
		t.Fatal("record believed after a panic")
	}
}

func TestRebootAndFactoryReset(t *testing.T) {
	r := newRig("poweron", nil, false)
	w, m := r.call(t, "POST", "/system/reboot")
	if w.Code != 202 || m["status"] != "rebooting" {
		t.Fatalf("%d %v", w.Code, m)
	}
	w, m = r.call(t, "POST", "/system/factory-reset")
	if w.Code != 202 || m["status"] != "factory_reset" || m["rebooting"] != true {
		t.Fatalf("%d %v", w.Code, m)
	}
	if len(r.restarts) != 2 || r.restarts[0] || !r.restarts[1] {
		t.Fatalf("restarts %v", r.restarts)
	}
}

func TestCoreDump(t *testing.T) {
	r := newRig("poweron", nil, false)
	if w, m := r.call(t, "GET", "/system/coredump"); w.Code != 404 || m["error"] != "not_found" {
		t.Fatalf("no dump: %d %v", w.Code, m)
	}
	r.dump = []byte("panic: x")
	if w, m := r.call(t, "GET", "/system/coredump"); w.Code != 200 || m["present"] != true {
		t.Fatalf("dump: %d %v", w.Code, m)
	}
	w, _ := r.call(t, "GET", "/system/coredump/raw")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/octet-stream" || w.Body.String() != "panic: x" {
		t.Fatalf("raw: %d %q", w.Code, w.Body.String())
	}
	if w, m := r.call(t, "DELETE", "/system/coredump"); w.Code != 200 || m["status"] != "erased" || r.erased != 1 {
		t.Fatalf("erase: %d %v", w.Code, m)
	}
	if w, _ := r.call(t, "GET", "/system/coredump/raw"); w.Code != 404 {
		t.Fatalf("raw after erase: %d", w.Code)
	}
}

func TestCrashRouteOnlyWithBuildOption(t *testing.T) {
	has := func(s *System) bool {
		for _, rt := range s.Routes() {
			if rt.Path == "/system/crash" {
				return true
			}
		}
		return false
	}
	if has(newRig("poweron", nil, false).sys) || !has(newRig("poweron", nil, true).sys) {
		t.Fatal("crash route does not follow the build option")
	}
}
