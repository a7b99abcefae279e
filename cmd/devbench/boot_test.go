package main

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"devhost/host/signalk/sktest"
)

func TestPrintBootFigures(t *testing.T) {
	boots := []bootTimes{
		{first200: 40 * time.Millisecond, skOpen: 90 * time.Millisecond, supCPU: 5 * time.Millisecond, appCPU: 30 * time.Millisecond},
		{first200: 30 * time.Millisecond, skOpen: 70 * time.Millisecond, supCPU: 7 * time.Millisecond, appCPU: 20 * time.Millisecond},
		{first200: 50 * time.Millisecond, skOpen: 80 * time.Millisecond, supCPU: -1, appCPU: -1}, // CPU not read
	}
	tests := []struct {
		name string
		sk   bool
		want []Figure
	}{
		{"with the Signal K server", true, []Figure{
			{Name: "boot.first_200", Value: 40, Unit: "ms"},
			{Name: "boot.first_200_cpu_supervisor", Value: 6, Unit: "ms"},
			{Name: "boot.first_200_cpu_app", Value: 25, Unit: "ms"},
			{Name: "boot.sk_stream_open", Value: 80, Unit: "ms"},
		}},
		{"without it there is no stream figure", false, []Figure{
			{Name: "boot.first_200", Value: 40, Unit: "ms"},
			{Name: "boot.first_200_cpu_supervisor", Value: 6, Unit: "ms"},
			{Name: "boot.first_200_cpu_app", Value: 25, Unit: "ms"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			b := &bench{out: &out, rep: &Report{Figures: []Figure{}}}
			b.printBoot(bootTimes{first200: time.Second}, boots, tc.sk)
			if !reflect.DeepEqual(b.rep.Figures, tc.want) {
				t.Errorf("figures %+v, want %+v", b.rep.Figures, tc.want)
			}
			if !strings.Contains(out.String(), "median 40.00ms over 3 boots") {
				t.Errorf("printed %q", out.String())
			}
		})
	}
}

func TestParseSchedstat(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"5934852 27378266 3\n", 5934852, true},
		{"0 0 0", 0, true},
		{"-1 0 0", 0, false},
		{"12 34", 0, false},
		{"x 0 0", 0, false},
	} {
		got, err := parseSchedstat([]byte(c.in))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseSchedstat(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
}

func TestProcessCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skip("no schedstat here:", err)
	}
	d, err := processCPU(os.Getpid())
	if err != nil || d <= 0 {
		t.Fatalf("CPU time of this process: %v, %v", d, err)
	}
	if _, err := processCPU(-1); err == nil {
		t.Error("no error for a process that does not exist")
	}
}

func TestPrepareBootRig(t *testing.T) {
	tests := []struct {
		name string
		srv  *sktest.Server
		sk   map[string]any
	}{
		{"no server", nil, nil},
		{"server", &sktest.Server{Host: "127.0.0.1", Port: 3456}, map[string]any{"server_host": "127.0.0.1", "server_port": 3456.0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			b := &bench{opts: options{key: "k-123"}}
			rig, err := b.prepareBootRig("/bin/devhost", tmp, tc.srv)
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]map[string]any
			raw, err := os.ReadFile(rig.args[3])
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			if doc["httpd"]["port"] != float64(rig.port) || doc["httpd"]["api_key"] != "k-123" {
				t.Errorf("httpd %v", doc["httpd"])
			}
			// No traffic to an NTP pool from a bench.
			if doc["time"]["server0"] != "" {
				t.Errorf("time %v", doc["time"])
			}
			if tc.sk == nil && doc["sk"] != nil || tc.sk != nil && !reflect.DeepEqual(doc["sk"], tc.sk) {
				t.Errorf("sk %v, want %v", doc["sk"], tc.sk)
			}
			board, err := os.ReadFile(rig.args[len(rig.args)-1])
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(board), `"eth":{"up":true,"ip":"127.0.0.1"}`) {
				t.Errorf("board %s", board)
			}
			if !strings.Contains(strings.Join(rig.env, "\n"), "DEVHOST_KEYS="+tmp) {
				t.Error("the device's keys are not kept in the run's folder")
			}
		})
	}
}
