package runtimens

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"devhost/host/config"
	"devhost/host/store"
)

type report struct{ key, state, message string }

// recorder is a Reporter that keeps every report.
type recorder struct {
	mu      sync.Mutex
	reports []report
}

func (r *recorder) Report(key, state, message string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, report{key, state, message})
	return nil
}

func (r *recorder) last() report {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reports) == 0 {
		return report{}
	}
	return r.reports[len(r.reports)-1]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reports)
}

func setup(t *testing.T) (*Registry, *config.Config, *recorder) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "nvs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cfg, err := config.New(st, nil, config.Builtin()...)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	return New(cfg, rec), cfg, rec
}

func desc() config.Namespace {
	return config.Namespace{Version: 1, Title: "Plugin", Keys: []config.Key{
		{Name: "rate", Type: config.TypeInt, Default: 5, Min: config.Float(1), Max: config.Float(10)},
	}}
}

func schemaNS(t *testing.T, cfg *config.Config, name string) map[string]any {
	t.Helper()
	body, _ := cfg.Schema()
	var s struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatal(err)
	}
	return s.Properties[name]
}

// TestRegisterIDs is the table of ids: accepted ones become f_<id>, refused ones raise
// flowConfig naming the id.
func TestRegisterIDs(t *testing.T) {
	cases := []struct {
		id   string
		ok   bool
		want error
	}{
		{"log", true, nil},
		{"abcdefghijkl", true, nil}, // 12 characters
		{"abcdefghijklm", false, ErrBadID},
		{"1wire", true, nil}, // f_1wire matches the namespace regex
		{"_x", true, nil},
		{"a_b_9", true, nil},
		{"Log", false, ErrBadID},
		{"", false, ErrBadID},
		{"a-b", false, ErrBadID},
		{"a.b", false, ErrBadID},
		{"a b", false, ErrBadID},
		{"é", false, ErrBadID},
	}
	for _, tc := range cases {
		t.Run(tc.id, func(t *testing.T) {
			reg, cfg, rec := setup(t)
			name, err := reg.Register(tc.id, desc())
			if tc.ok {
				if err != nil || name != "f_"+tc.id {
					t.Fatalf("Register = %q, %v", name, err)
				}
				if rec.count() != 0 {
					t.Fatalf("a success reported %v", rec.reports)
				}
				if s := schemaNS(t, cfg, name); s == nil || s["x-dev-runtime"] != true {
					t.Fatalf("schema of %s: %v", name, s)
				}
				if cfg.Int(name, "rate") != 5 {
					t.Fatal("registered namespace not readable")
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Register = %v, want %v", err, tc.want)
			}
			got := rec.last()
			if got.key != Condition || got.state != "warn" || !strings.Contains(got.message, fmt.Sprintf("%q", tc.id)) {
				t.Fatalf("flowConfig report %+v does not name %q", got, tc.id)
			}
			if len(reg.List()) != 0 {
				t.Fatal("a refused id is listed")
			}
		})
	}
}

func TestRegisterRefusals(t *testing.T) {
	reg, cfg, rec := setup(t)
	if _, err := reg.Register("dup", desc()); err != nil {
		t.Fatal(err)
	}
	_, etag := cfg.Schema()

	if _, err := reg.Register("dup", desc()); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate = %v", err)
	}
	if r := rec.last(); r.state != "warn" || !strings.Contains(r.message, `"dup"`) {
		t.Fatalf("duplicate not reported: %+v", r)
	}
	bad := desc()
	bad.Keys[0].Default = 50
	if _, err := reg.Register("bad", bad); !errors.Is(err, ErrDescriptor) {
		t.Fatalf("malformed = %v", err)
	}
	if r := rec.last(); r.state != "warn" || !strings.Contains(r.message, `"bad"`) || !strings.Contains(r.message, "2 ids refused") {
		t.Fatalf("malformed not reported: %+v", r)
	}
	other := desc()
	other.Name = "f_other"
	if _, err := reg.Register("mine", other); !errors.Is(err, ErrDescriptor) {
		t.Fatalf("foreign namespace name = %v", err)
	}
	if _, err := reg.RegisterJSON("js", []byte(`{"version":1,"title":"X","keys":[],"bogus":1}`)); !errors.Is(err, ErrDescriptor) {
		t.Fatalf("bad JSON descriptor = %v", err)
	}
	if r := rec.last(); !strings.Contains(r.message, `"js"`) {
		t.Fatalf("JSON refusal not reported: %+v", r)
	}
	if _, e2 := cfg.Schema(); e2 != etag {
		t.Fatal("a refused registration changed the schema ETag")
	}
	if r := rec.last(); r.state != "warn" {
		t.Fatalf("flowConfig lowered by refusals: %+v", r)
	}
	if name, err := reg.RegisterJSON("named", []byte(`{"namespace":"f_named","version":1,"title":"N","keys":[]}`)); err != nil || name != "f_named" {
		t.Fatalf("descriptor naming its own f_<id> = %q %v", name, err)
	}
	if got := reg.List(); len(got) != 2 || got[0] != "f_dup" || got[1] != "f_named" {
		t.Fatalf("List = %q", got)
	}
}

// TestFlowConfigLifecycle: raised by refusals, kept while any refused id is outstanding,
// lowered when the last one registers or goes away.
func TestFlowConfigLifecycle(t *testing.T) {
	reg, _, rec := setup(t)
	bad := desc()
	bad.Keys[0].Type = "nope"
	_, _ = reg.Register("a", bad)
	_, _ = reg.Register("b", bad)
	if _, err := reg.Register("c", desc()); err != nil {
		t.Fatal(err)
	}
	if r := rec.last(); r.state != "warn" {
		t.Fatalf("another id's success lowered flowConfig: %+v", r)
	}
	if _, err := reg.Register("a", desc()); err != nil {
		t.Fatal(err)
	}
	if r := rec.last(); r.state != "warn" || !strings.Contains(r.message, `"b"`) {
		t.Fatalf("with b still refused: %+v", r)
	}
	if err := reg.Unregister("b"); err != nil {
		t.Fatalf("Unregister of a refused id: %v", err)
	}
	if r := rec.last(); r.key != Condition || r.state != "normal" {
		t.Fatalf("flowConfig not lowered: %+v", r)
	}
}

func TestSlots(t *testing.T) {
	reg, _, rec := setup(t)
	for i := range Slots {
		if _, err := reg.Register(fmt.Sprintf("p%d", i), desc()); err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
	}
	if _, err := reg.Register("p32", desc()); !errors.Is(err, ErrFull) {
		t.Fatalf("33rd = %v, want ErrFull", err)
	}
	if r := rec.last(); r.key != Condition || r.state != "warn" || !strings.Contains(r.message, `"p32"`) {
		t.Fatalf("full table not reported: %+v", r)
	}
	if err := reg.Unregister("p0"); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Register("p32", desc()); err != nil {
		t.Fatalf("after freeing a slot: %v", err)
	}
	if r := rec.last(); r.state != "normal" {
		t.Fatalf("the refused id registered but flowConfig stays: %+v", r)
	}
	l := reg.List()
	if len(l) != Slots || l[0] != "f_p1" || l[Slots-1] != "f_p32" {
		t.Fatalf("List = %q", l)
	}
}

// TestETagChangesEveryTime: every register and unregister yields a new schema ETag, never
// one seen before.
func TestETagChangesEveryTime(t *testing.T) {
	reg, cfg, _ := setup(t)
	seen := map[string]bool{}
	check := func(step string) {
		t.Helper()
		_, etag := cfg.Schema()
		if seen[etag] {
			t.Fatalf("%s: ETag %s seen before", step, etag)
		}
		seen[etag] = true
	}
	check("start")
	for range 2 {
		if _, err := reg.Register("a", desc()); err != nil {
			t.Fatal(err)
		}
		check("register a")
		if _, err := reg.RegisterJSON("b", []byte(`{"version":1,"title":"B","keys":[{"name":"on","type":"bool","default":true}]}`)); err != nil {
			t.Fatal(err)
		}
		check("register b")
		if s := schemaNS(t, cfg, "f_b"); s["x-dev-runtime"] != true {
			t.Fatalf("f_b schema: %v", s)
		}
		if err := reg.Unregister("a"); err != nil {
			t.Fatal(err)
		}
		check("unregister a")
		if err := reg.Unregister("b"); err != nil {
			t.Fatal(err)
		}
		check("unregister b")
	}
	if err := reg.Unregister("a"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("Unregister of an unknown id = %v", err)
	}
}

func TestValuesKeptUntilPurge(t *testing.T) {
	reg, cfg, _ := setup(t)
	if _, err := reg.Register("keep", desc()); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Set("f_keep", "rate", 9); err != nil {
		t.Fatal(err)
	}
	_ = reg.Unregister("keep")
	_, _ = reg.Register("keep", desc())
	if cfg.Int("f_keep", "rate") != 9 {
		t.Fatal("value lost across unregister")
	}
	if err := reg.Purge("keep"); err == nil {
		t.Fatal("Purge of a registered namespace accepted")
	}
	_ = reg.Unregister("keep")
	if err := reg.Purge("keep"); err != nil {
		t.Fatal(err)
	}
	_, _ = reg.Register("keep", desc())
	if cfg.Int("f_keep", "rate") != 5 {
		t.Fatal("purged value came back")
	}
}
