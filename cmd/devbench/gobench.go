package main

// Go benchmark results (-gobench FILE): the text output of `go test -bench`, as `make bench`
// prints it, read with golang.org/x/perf/benchfmt. Every benchmark and unit becomes a figure
// gobench.<package>.<benchmark> (the package path without the module's "devhost/", the name
// without the -GOMAXPROCS suffix), the median when a benchmark ran several times; a few of
// them, each compared with a baseline benchmark of the same run, are the contract's plugin.*
// figures (derivedFigures).

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/perf/benchfmt"
)

// modulePrefix is dropped from package paths in figure names.
const modulePrefix = "devhost/"

// benchKey names one Go benchmark value.
type benchKey struct {
	pkg, name, unit string
}

func (k benchKey) figureName() string {
	pkg := strings.TrimPrefix(k.pkg, modulePrefix)
	if pkg == "" {
		pkg = "unknown"
	}
	return "gobench." + pkg + "." + k.name
}

// goBench is the Go benchmark values read so far, in the order first seen.
type goBench struct {
	order  []benchKey
	values map[benchKey][]float64
	// skipped holds the lines that began like a result but did not parse (a benchmark's own
	// output can split its result line): each one is a figure missing from the report.
	skipped []error
}

func newGoBench() *goBench { return &goBench{values: map[benchKey][]float64{}} }

// read adds the results in r. Lines that are not benchmark results (test logs, make's and
// npm's output) are skipped, as benchfmt does; a malformed "Benchmark..." line is kept in
// skipped, so the report can name it, and the rest of the output is still read.
func (g *goBench) read(r io.Reader, fileName string) error {
	br := benchfmt.NewReader(r, fileName)
	for br.Scan() {
		switch rec := br.Result().(type) {
		case *benchfmt.Result:
			name := benchName(rec.Name)
			pkg := rec.GetConfig("pkg")
			for _, v := range rec.Values {
				val, unit := v.Value, v.Unit
				if v.OrigUnit != "" {
					// Keep the unit the benchmark printed (ns/op, not sec/op).
					val, unit = v.OrigValue, v.OrigUnit
				}
				k := benchKey{pkg: pkg, name: name, unit: unit}
				if _, seen := g.values[k]; !seen {
					g.order = append(g.order, k)
				}
				g.values[k] = append(g.values[k], val)
			}
		case *benchfmt.SyntaxError:
			g.skipped = append(g.skipped, rec)
		}
	}
	if err := br.Err(); err != nil {
		return fmt.Errorf("go benchmark output: %w", err)
	}
	return nil
}

// readFile adds the results in the file at path.
func (g *goBench) readFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("go benchmark output: %w", err)
	}
	defer f.Close()
	return g.read(f, path)
}

// benchName is the full name as go test prints it (benchfmt drops the "Benchmark" prefix)
// without the -GOMAXPROCS suffix go test adds when it is above 1.
func benchName(n benchfmt.Name) string {
	base, parts := n.Parts()
	var b bytes.Buffer
	b.WriteString("Benchmark")
	b.Write(base)
	for _, p := range parts {
		if len(p) > 0 && p[0] == '-' {
			continue
		}
		b.Write(p)
	}
	return b.String()
}

// value is the median of one benchmark value's runs.
func (g *goBench) value(k benchKey) (float64, bool) {
	vs, ok := g.values[k]
	if !ok || len(vs) == 0 {
		return 0, false
	}
	return median(vs), true
}

// derivedFigure is a contract figure taken from a Go benchmark value and its baseline value
// (another benchmark of the same run, or the baseline the benchmark measures beside itself).
type derivedFigure struct {
	name, unit  string
	value, base benchKey
	scale       float64 // multiplies the benchmarks' values into unit
}

var derivedFigures = []derivedFigure{
	{name: "plugin.http_under_spin", unit: "req/s", scale: 1,
		value: benchKey{"devhost/host/plugin", "BenchmarkHTTPWhileSpinning/spinning", "req/s"},
		base:  benchKey{"devhost/host/plugin", "BenchmarkHTTPWhileSpinning/idle", "req/s"}},
	{name: "plugin.publish_batch100", unit: "ns/value", scale: 1,
		value: benchKey{"devhost/host/plugin", "BenchmarkPublish/batch100", "ns/value"},
		base:  benchKey{"devhost/host/plugin", "BenchmarkPublish/batch100-nolimit", "ns/value"}},
	{name: "plugin.cold_start", unit: "ms", scale: 1e-6,
		value: benchKey{"devhost/host/plugin", "BenchmarkStart/boot", "ns/op"},
		base:  benchKey{"devhost/host/plugin", "BenchmarkStart/restart", "ns/op"}},
	{name: "plugin.rss_per_plugin", unit: "MiB", scale: 1,
		value: benchKey{"devhost/host/plugin", "BenchmarkMinimalPluginRSS/host", "MiB/plugin"},
		base:  benchKey{"devhost/host/plugin", "BenchmarkMinimalPluginRSS/wazero", "MiB/plugin"}},
	{name: "n2k.decode_rate", unit: "frames/cpu-s", scale: 1,
		value: benchKey{"devhost/cmd/devctl", "BenchmarkN2KDecode", "sandbox-frames/cpu-s"},
		base:  benchKey{"devhost/cmd/devctl", "BenchmarkN2KDecode", "reference-frames/cpu-s"}},
	{name: "ble.prov_handshake", unit: "ms", scale: 1e-6,
		value: benchKey{"devhost/cmd/devctl", "BenchmarkProvHandshakeSandbox/softap", "ns/op"},
		base:  benchKey{"devhost/cmd/devctl", "BenchmarkProvHandshakeSandbox/softap-native", "ns/op"}},
}

// addTo appends the derived contract figures, then every Go benchmark value.
func (g *goBench) addTo(r *Report) {
	for _, d := range derivedFigures {
		v, ok := g.value(d.value)
		if !ok {
			continue
		}
		b, ok := g.value(d.base)
		if !ok {
			// Without its baseline the figure would be unchecked: leave it out, the
			// gobench figure still holds the value.
			continue
		}
		r.addVs(d.name, d.unit, v*d.scale, b*d.scale)
	}
	for _, k := range g.order {
		v, _ := g.value(k)
		r.add(k.figureName(), k.unit, v)
	}
}
