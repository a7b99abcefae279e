package main

// The machine-readable report (-json FILE): every figure of the run as
//
//	{"figures": [{"name", "value", "unit", "baseline", "ratio"}], "machine": {...}}
//
// so a script can check the ratios without reading the printed tables. The names of the
// contract figures are listed in contractFigures; Go benchmark results read with -gobench
// follow them as gobench.<package>.<benchmark>, one figure per benchmark and unit.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Figure is one measured value beside the baseline measured in the same run. Baseline and Ratio
// are null when the figure has no baseline; Ratio is always Value divided by Baseline.
type Figure struct {
	Name     string   `json:"name"`
	Value    float64  `json:"value"`
	Unit     string   `json:"unit"`
	Baseline *float64 `json:"baseline"`
	Ratio    *float64 `json:"ratio"`
}

// Machine says where the figures were measured.
type Machine struct {
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	GoVersion  string `json:"go_version"`
	Kernel     string `json:"kernel"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	// LoadAvg is /proc/loadavg's 1, 5 and 15 minute figures when the run began: a busy
	// machine lowers every absolute figure, ratios less so.
	LoadAvg []float64 `json:"load_avg,omitempty"`
	Date    string    `json:"date"`
}

// Report is the document -json writes.
type Report struct {
	Figures []Figure `json:"figures"`
	Machine Machine  `json:"machine"`
}

// add appends a figure with no baseline. A value that is not a finite number is left out: JSON
// has no way to say it, and a figure that was not measured must not look like one.
func (r *Report) add(name, unit string, value float64) {
	if r == nil || !finite(value) {
		return
	}
	r.Figures = append(r.Figures, Figure{Name: name, Value: value, Unit: unit})
}

// addVs appends a figure with its baseline and the ratio value/baseline. A zero baseline keeps
// the baseline but leaves the ratio null.
func (r *Report) addVs(name, unit string, value, baseline float64) {
	if r == nil || !finite(value) || !finite(baseline) {
		return
	}
	f := Figure{Name: name, Value: value, Unit: unit, Baseline: &baseline}
	if baseline != 0 {
		q := value / baseline
		f.Ratio = &q
	}
	r.Figures = append(r.Figures, f)
}

// find returns the figure named name with unit (any unit when unit is "").
func (r *Report) find(name, unit string) (Figure, bool) {
	for _, f := range r.Figures {
		if f.Name == name && (unit == "" || f.Unit == unit) {
			return f, true
		}
	}
	return Figure{}, false
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// missing lists the contract figures the report does not hold, each with what measures it.
func (r *Report) missing() []string {
	var out []string
	for _, c := range contractFigures {
		if _, ok := r.find(c.name, c.unit); !ok {
			out = append(out, c.name+" ("+c.source+")")
		}
	}
	return out
}

// contractFigure is a figure whose name scripts rely on; the README lists the same table.
type contractFigure struct {
	name, unit string
	source     string // which part of `make bench` measures it
}

var contractFigures = []contractFigure{
	{"http.ping", "req/s", "devbench"},
	{"http.config_get", "req/s", "devbench"},
	{"http.put_config_p50", "us", "devbench"},
	{"signalk.publish_rate", "values/s", "devbench"},
	{"signalk.cpu_per_kvalue", "ms", "devbench"},
	{"plugin.http_under_spin", "req/s", "host/plugin benchmarks"},
	{"plugin.publish_batch100", "ns/value", "host/plugin benchmarks"},
	{"plugin.cold_start", "ms", "host/plugin benchmarks"},
	{"plugin.rss_per_plugin", "MiB", "host/plugin benchmarks"},
	{"app.rss_idle", "MiB", "devbench"},
	{"boot.first_200", "ms", "devbench"},
	{"boot.sk_stream_open", "ms", "devbench"},
	{"n2k.decode_rate", "frames/cpu-s", "cmd/devctl benchmark"},
	{"ble.prov_handshake", "ms", "cmd/devctl benchmark"},
}

// writeJSON writes the report to path through a temporary file in the same folder, so a reader
// never sees half a document.
func (r *Report) writeJSON(path string) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	raw = append(raw, '\n')
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	_, werr := tmp.Write(raw)
	// An ordinary output file, readable like the one a shell redirect makes.
	merr := tmp.Chmod(0o644)
	cerr := tmp.Close()
	if err := errors.Join(werr, merr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// readReport reads a report written by writeJSON.
func readReport(path string) (*Report, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the report: %w", err)
	}
	var r Report
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("decoding the report %s: %w", path, err)
	}
	return &r, nil
}

// thisMachine describes the machine running devbench at time now.
func thisMachine(now time.Time) Machine {
	return Machine{
		CPU:        cpuModel(),
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		GoVersion:  runtime.Version(),
		Kernel:     kernelRelease(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		LoadAvg:    loadAvg(),
		Date:       now.UTC().Format(time.RFC3339),
	}
}

// kernelRelease is uname -r, or "unknown".
func kernelRelease() string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return "unknown"
	}
	b := make([]byte, 0, len(u.Release))
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// loadAvg is the first three fields of /proc/loadavg (nil when unreadable).
func loadAvg() []float64 {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	return parseLoadAvg(string(raw))
}

func parseLoadAvg(s string) []float64 {
	f := strings.Fields(s)
	if len(f) < 3 {
		return nil
	}
	out := make([]float64, 3)
	for i := range out {
		if _, err := fmt.Sscanf(f[i], "%g", &out[i]); err != nil {
			return nil
		}
	}
	return out
}
