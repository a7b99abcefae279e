package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func ptr(v float64) *float64 { return &v }

func TestReportFigures(t *testing.T) {
	tests := []struct {
		name     string
		add      func(r *Report)
		want     []Figure
		wantJSON string
	}{
		{
			name:     "a figure with a baseline gets value/baseline as its ratio",
			add:      func(r *Report) { r.addVs("http.ping", "req/s", 75000, 90000) },
			want:     []Figure{{Name: "http.ping", Value: 75000, Unit: "req/s", Baseline: ptr(90000), Ratio: ptr(75000.0 / 90000)}},
			wantJSON: `{"name":"http.ping","value":75000,"unit":"req/s","baseline":90000,"ratio":0.8333333333333334}`,
		},
		{
			name:     "a figure without a baseline has null baseline and ratio",
			add:      func(r *Report) { r.add("boot.first_200", "ms", 42.5) },
			want:     []Figure{{Name: "boot.first_200", Value: 42.5, Unit: "ms"}},
			wantJSON: `{"name":"boot.first_200","value":42.5,"unit":"ms","baseline":null,"ratio":null}`,
		},
		{
			name:     "a zero baseline is kept, the ratio is null",
			add:      func(r *Report) { r.addVs("x", "ms", 3, 0) },
			want:     []Figure{{Name: "x", Value: 3, Unit: "ms", Baseline: ptr(0)}},
			wantJSON: `{"name":"x","value":3,"unit":"ms","baseline":0,"ratio":null}`,
		},
		{
			name: "values that are not numbers are left out",
			add: func(r *Report) {
				r.add("nan", "ms", math.NaN())
				r.addVs("inf", "ms", math.Inf(1), 1)
				r.addVs("infbase", "ms", 1, math.Inf(-1))
			},
			want: []Figure{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Figures: []Figure{}}
			tc.add(r)
			if !reflect.DeepEqual(r.Figures, tc.want) {
				t.Fatalf("figures %+v, want %+v", r.Figures, tc.want)
			}
			if tc.wantJSON == "" {
				return
			}
			raw, err := json.Marshal(r.Figures[0])
			if err != nil {
				t.Fatal(err)
			}
			if string(raw) != tc.wantJSON {
				t.Errorf("JSON %s, want %s", raw, tc.wantJSON)
			}
		})
	}
}

func TestNilReportIgnoresFigures(t *testing.T) {
	var r *Report // devbench without -json
	r.add("a", "ms", 1)
	r.addVs("b", "ms", 1, 2)
}

func TestReportWriteAndReadBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.json")
	r := &Report{Figures: []Figure{}, Machine: thisMachine(time.Date(2026, 11, 25, 16, 0, 0, 0, time.UTC))}
	r.addVs("http.ping", "req/s", 10, 20)
	r.add("boot.first_200", "ms", 40)
	if err := r.writeJSON(path); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The document's shape, as a script reads it.
	var doc struct {
		Figures []map[string]any `json:"figures"`
		Machine map[string]any   `json:"machine"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if len(doc.Figures) != 2 {
		t.Fatalf("figures %v", doc.Figures)
	}
	for _, f := range doc.Figures {
		for _, k := range []string{"name", "value", "unit", "baseline", "ratio"} {
			if _, ok := f[k]; !ok {
				t.Errorf("figure %v has no %q", f, k)
			}
		}
	}
	if doc.Figures[0]["ratio"] != 0.5 || doc.Figures[1]["baseline"] != nil {
		t.Errorf("figures %v", doc.Figures)
	}
	for _, k := range []string{"cpu", "cores", "gomaxprocs", "go_version", "kernel", "date"} {
		if v, ok := doc.Machine[k]; !ok || v == "" || v == 0.0 {
			t.Errorf("machine %v: %q missing or empty", doc.Machine, k)
		}
	}
	if doc.Machine["date"] != "2026-11-25T16:00:00Z" {
		t.Errorf("date %v", doc.Machine["date"])
	}
	back, err := readReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("read back %+v, want %+v", back, r)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("file mode %v (%v), want 0644", st.Mode(), err)
	}
	// No temporary file is left beside it.
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("folder holds %v", entries)
	}
}

func TestReportMissing(t *testing.T) {
	r := &Report{}
	for _, c := range contractFigures {
		if c.name != "boot.first_200" {
			r.add(c.name, c.unit, 1)
		}
	}
	r.add("boot.first_200", "s", 1) // not the contract's unit
	if got := r.missing(); !reflect.DeepEqual(got, []string{"boot.first_200 (devbench)"}) {
		t.Errorf("missing %v", got)
	}
}

func TestParseLoadAvg(t *testing.T) {
	tests := []struct {
		in   string
		want []float64
	}{
		{"0.52 1.10 2.00 3/456 7890\n", []float64{0.52, 1.10, 2.00}},
		{"1 2", nil},
		{"a b c", nil},
	}
	for _, tc := range tests {
		if got := parseLoadAvg(tc.in); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseLoadAvg(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestMergeAddsGoBenchmarksToAReport(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bench.json")
	r := &Report{Figures: []Figure{}, Machine: Machine{CPU: "test cpu", Cores: 2}}
	r.addVs("http.ping", "req/s", 10, 20)
	if err := r.writeJSON(path); err != nil {
		t.Fatal(err)
	}
	gb := filepath.Join(dir, "go.txt")
	if err := os.WriteFile(gb, []byte(pluginBenchOutput), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	if code := run([]string{"-json", path, "-merge", "-gobench", gb}, os.Stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	back, err := readReport(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Machine.CPU != "test cpu" {
		t.Errorf("machine %+v: the devbench run's should be kept", back.Machine)
	}
	if f, ok := back.find("http.ping", "req/s"); !ok || *f.Ratio != 0.5 {
		t.Errorf("http.ping %+v", f)
	}
	if f, ok := back.find("plugin.cold_start", "ms"); !ok || f.Value != 676 || *f.Baseline != 48 {
		t.Errorf("plugin.cold_start %+v", f)
	}
	// The contract figures this run lacks are named.
	if !strings.Contains(stderr.String(), "boot.first_200") || strings.Contains(stderr.String(), "plugin.cold_start") {
		t.Errorf("stderr %q", stderr.String())
	}
}
