package main

import (
	"reflect"
	"strings"
	"testing"
)

// pluginBenchOutput is `go test -bench` output as `make bench` prints it, with test log lines
// between the results and GOMAXPROCS 2.
const pluginBenchOutput = `goos: linux
goarch: amd64
pkg: devhost/host/plugin
cpu: Test CPU @ 2.00GHz
BenchmarkPublish/single-2         	  100000	      1200 ns/op	      1200 ns/value
BenchmarkPublish/batch100-2       	 1000000	       700 ns/op	       737 ns/value
BenchmarkPublish/batch100-nolimit-2         	 1000000	       190 ns/op	       196 ns/value
time=2026-11-25T16:00:00Z level=INFO msg="plugin started" id=p1
BenchmarkStart/boot-2             	       2	 676000000 ns/op
BenchmarkStart/restart-2             	      20	  48000000 ns/op
BenchmarkHTTPWhileSpinning/idle-2 	   50000	     20000 ns/op	     14442 req/s
BenchmarkHTTPWhileSpinning/spinning-2         	   40000	     25000 ns/op	     11857 req/s
BenchmarkMinimalPluginRSS/host-2 	       1	 900000000 ns/op	         4.86 MiB/plugin
BenchmarkMinimalPluginRSS/wazero-2         	       1	 800000000 ns/op	         2.43 MiB/plugin
PASS
ok  	devhost/host/plugin	42.123s
`

func TestGoBenchRead(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  map[benchKey][]float64
		order []string // figure names in order, one per unit
	}{
		{
			name: "results keep the printed unit, lose the GOMAXPROCS suffix and skip other lines",
			input: `pkg: devhost/host/skstream
BenchmarkPublishNumber-2   	 5000000	       240.5 ns/op	      16 B/op	       1 allocs/op
some log line: with a colon
ok  	devhost/host/skstream	3.1s
`,
			want: map[benchKey][]float64{
				{"devhost/host/skstream", "BenchmarkPublishNumber", "ns/op"}:     {240.5},
				{"devhost/host/skstream", "BenchmarkPublishNumber", "B/op"}:      {16},
				{"devhost/host/skstream", "BenchmarkPublishNumber", "allocs/op"}: {1},
			},
			order: []string{"gobench.host/skstream.BenchmarkPublishNumber"},
		},
		{
			name: "GOMAXPROCS 1 prints no suffix; a dash inside a sub-benchmark name stays",
			input: `pkg: devhost/host/plugin
BenchmarkPublish/batch100-nolimit 	 100	 196 ns/value
`,
			want: map[benchKey][]float64{
				{"devhost/host/plugin", "BenchmarkPublish/batch100-nolimit", "ns/value"}: {196},
			},
			order: []string{"gobench.host/plugin.BenchmarkPublish/batch100-nolimit"},
		},
		{
			name: "several runs of one benchmark are all kept; a new pkg line starts another package",
			input: `pkg: devhost/cmd/devctl
BenchmarkN2KDecode-2 	 3	 100 ns/op	 5000 frames/cpu-s
BenchmarkN2KDecode-2 	 3	 300 ns/op	 4000 frames/cpu-s
BenchmarkN2KDecode-2 	 3	 200 ns/op	 6000 frames/cpu-s
pkg: web
BenchmarkUIFirstLoad 	 1	 32121 B-gzip
`,
			want: map[benchKey][]float64{
				{"devhost/cmd/devctl", "BenchmarkN2KDecode", "ns/op"}:        {100, 300, 200},
				{"devhost/cmd/devctl", "BenchmarkN2KDecode", "frames/cpu-s"}: {5000, 4000, 6000},
				{"web", "BenchmarkUIFirstLoad", "B-gzip"}:                    {32121},
			},
			order: []string{"gobench.cmd/devctl.BenchmarkN2KDecode", "gobench.web.BenchmarkUIFirstLoad"},
		},
		{
			name:  "no results at all",
			input: "PASS\nok  \tdevhost/x\t0.1s\n",
			want:  map[benchKey][]float64{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newGoBench()
			if err := g.read(strings.NewReader(tc.input), "test"); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g.values, tc.want) {
				t.Errorf("values %v, want %v", g.values, tc.want)
			}
			var names []string
			for _, k := range g.order {
				if len(names) == 0 || names[len(names)-1] != k.figureName() {
					names = append(names, k.figureName())
				}
			}
			if !reflect.DeepEqual(names, tc.order) {
				t.Errorf("figure names %v, want %v", names, tc.order)
			}
		})
	}
}

func TestGoBenchSkipsAMalformedResultAndSaysSo(t *testing.T) {
	tests := []string{
		"BenchmarkX-2 \t 100\n",                             // no measurement
		"BenchmarkX-2 \t 100 \t 12 \n",                      // no unit
		"BenchmarkX-2 \t 100 \t abc ns/op\n",                // not a number
		"BenchmarkX-2 \ttime=2026 level=INFO msg=started\n", // a log line split the result
	}
	for _, in := range tests {
		g := newGoBench()
		if err := g.read(strings.NewReader(in+"BenchmarkY-2 \t 10 \t 5 ns/op\n"), "test"); err != nil {
			t.Fatal(err)
		}
		if len(g.skipped) != 1 || !strings.Contains(g.skipped[0].Error(), "test:1") {
			t.Errorf("%q: skipped %v, want the first line", in, g.skipped)
		}
		if len(g.order) != 1 || g.order[0].name != "BenchmarkY" {
			t.Errorf("%q: read %v, want the next result", in, g.order)
		}
	}
}

func TestGoBenchMedianAndFigures(t *testing.T) {
	g := newGoBench()
	if err := g.read(strings.NewReader(pluginBenchOutput), "test"); err != nil {
		t.Fatal(err)
	}
	if err := g.read(strings.NewReader("pkg: devhost/cmd/devctl\n"+
		"BenchmarkN2KDecode-2 3 100 ns/op 4000 sandbox-frames/cpu-s 36000 reference-frames/cpu-s\n"+
		"BenchmarkN2KDecode-2 3 300 ns/op 4300 sandbox-frames/cpu-s 37000 reference-frames/cpu-s\n"+
		"BenchmarkN2KDecode-2 3 200 ns/op 4200 sandbox-frames/cpu-s 35000 reference-frames/cpu-s\n"+
		"BenchmarkProvHandshakeSandbox/softap-2 100 5081001 ns/op 5.1 cpu-ms/session\n"+
		"BenchmarkProvHandshakeSandbox/softap-native-2 100 981809 ns/op 1.1 cpu-ms/session\n"), "test2"); err != nil {
		t.Fatal(err)
	}
	r := &Report{Figures: []Figure{}}
	g.addTo(r)
	tests := []struct {
		name, unit      string
		value, baseline float64 // baseline 0: none
	}{
		{"plugin.http_under_spin", "req/s", 11857, 14442},
		{"plugin.publish_batch100", "ns/value", 737, 196},
		{"plugin.cold_start", "ms", 676, 48},
		{"plugin.rss_per_plugin", "MiB", 4.86, 2.43},
		{"n2k.decode_rate", "frames/cpu-s", 4200, 36000}, // medians of the three runs
		{"ble.prov_handshake", "ms", 5.081001, 0.981809},
		{"gobench.host/plugin.BenchmarkStart/boot", "ns/op", 676000000, 0},
		{"gobench.host/plugin.BenchmarkPublish/batch100", "ns/value", 737, 0},
		{"gobench.cmd/devctl.BenchmarkN2KDecode", "ns/op", 200, 0}, // the median of three
	}
	for _, tc := range tests {
		f, ok := r.find(tc.name, tc.unit)
		if !ok {
			t.Errorf("%s [%s] missing from %+v", tc.name, tc.unit, r.Figures)
			continue
		}
		if !near(f.Value, tc.value) {
			t.Errorf("%s = %v, want %v", tc.name, f.Value, tc.value)
		}
		switch {
		case tc.baseline == 0 && (f.Baseline != nil || f.Ratio != nil):
			t.Errorf("%s has a baseline %v", tc.name, *f.Baseline)
		case tc.baseline != 0 && (f.Baseline == nil || !near(*f.Baseline, tc.baseline) || !near(*f.Ratio, tc.value/tc.baseline)):
			t.Errorf("%s baseline %v ratio %v, want %v", tc.name, f.Baseline, f.Ratio, tc.baseline)
		}
	}
	// The derived figures come first, in the contract's order.
	if r.Figures[0].Name != "plugin.http_under_spin" || r.Figures[3].Name != "plugin.rss_per_plugin" {
		t.Errorf("order %+v", r.Figures[:4])
	}
}

func TestGoBenchLeavesOutAFigureWithoutItsBaseline(t *testing.T) {
	g := newGoBench()
	in := "pkg: devhost/host/plugin\nBenchmarkStart/boot-2 2 676000000 ns/op\n"
	if err := g.read(strings.NewReader(in), "test"); err != nil {
		t.Fatal(err)
	}
	r := &Report{}
	g.addTo(r)
	if _, ok := r.find("plugin.cold_start", ""); ok {
		t.Errorf("plugin.cold_start without BenchmarkStart/restart: %+v", r.Figures)
	}
	if _, ok := r.find("gobench.host/plugin.BenchmarkStart/boot", "ns/op"); !ok {
		t.Errorf("the Go figure itself is missing: %+v", r.Figures)
	}
}

func near(a, b float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= 1e-9*max(1, b, -b)
}
