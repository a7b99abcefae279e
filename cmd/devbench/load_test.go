package main

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func readFixture(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func TestParseWrk(t *testing.T) {
	tests := []struct {
		name string
		file string
		want loadResult
	}{
		{"plain run", "wrk-ok.txt", loadResult{RPS: 40038.18, P50: 163 * time.Microsecond, P99: 4190 * time.Microsecond, Requests: 40059}},
		{"refused answers counted", "wrk-non2xx.txt", loadResult{RPS: 42339.34, P50: 75 * time.Microsecond, P99: 3410 * time.Microsecond, Requests: 46540, Non2xx: 46540}},
		{"seconds, minutes and socket errors", "wrk-slow.txt", loadResult{RPS: 10, P50: 1250 * time.Millisecond, P99: time.Minute, Requests: 30, SocketErrors: 7}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseWrk(readFixture(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParseWrkRejects(t *testing.T) {
	ok := readFixture(t, "wrk-ok.txt")
	tests := []struct {
		name string
		out  string
	}{
		{"empty", ""},
		{"usage text", "Usage: wrk <options> <url>\n  Options:\n"},
		{"no Requests/sec", strings.Replace(ok, "Requests/sec:  40038.18", "", 1)},
		{"no latency distribution", strings.Replace(ok, "     99%    4.19ms", "", 1)},
		{"bad rate", strings.Replace(ok, "40038.18", "fast", 1)},
		{"negative rate", strings.Replace(ok, "40038.18", "-1", 1)},
		{"NaN rate", strings.Replace(ok, "40038.18", "NaN", 1)},
		{"unknown unit", strings.Replace(ok, "163.00us", "163.00ns", 1)},
		{"bad request count", strings.Replace(ok, "40059 requests", "many requests", 1)},
		{"bad socket errors", ok + "  Socket errors: connect x, read 0\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if res, err := parseWrk(tc.out); err == nil {
				t.Errorf("accepted: %+v", res)
			}
		})
	}
}

func TestParseWrkDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"86.11us", 86110 * time.Nanosecond, true},
		{"1.20ms", 1200 * time.Microsecond, true},
		{"2.00s", 2 * time.Second, true},
		{"1.50m", 90 * time.Second, true},
		{"1.00h", time.Hour, true},
		{"0.00us", 0, true},
		{"12", 0, false},
		{"ms", 0, false},
		{"-1.00ms", 0, false},
		{"1e300h", 0, false},
		{"Infs", 0, false},
	}
	for _, tc := range tests {
		got, err := parseWrkDuration(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseWrkDuration(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func FuzzParseWrk(f *testing.F) {
	for _, name := range []string{"wrk-ok.txt", "wrk-non2xx.txt", "wrk-slow.txt"} {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(raw))
	}
	f.Add("Requests/sec: 1\n50% 1us\n99% 2us\n")
	f.Add("Socket errors: connect 9223372036854775807, read 1\n")
	f.Fuzz(func(t *testing.T, out string) {
		res, err := parseWrk(out)
		if err != nil {
			return
		}
		if math.IsNaN(res.RPS) || math.IsInf(res.RPS, 0) || res.RPS < 0 {
			t.Errorf("rate %v accepted", res.RPS)
		}
		if res.P50 < 0 || res.P99 < 0 || res.Requests < 0 || res.Non2xx < 0 || res.SocketErrors < 0 {
			t.Errorf("negative figure accepted: %+v", res)
		}
	})
}

func TestWrkSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{
		time.Millisecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 3 * time.Second: 3,
	} {
		if got := wrkSeconds(d); got != want {
			t.Errorf("wrkSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

// The stand-in client counts completed requests and those answered outside 2xx, and sends the
// request's headers.
func TestGoLoaderCounts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	g := &goLoader{conns: 2, clk: clockwork.NewRealClock()}
	h := http.Header{}
	h.Set("Authorization", "Bearer k")

	good, err := g.Run(context.Background(), loadRequest{URL: srv.URL, Header: h}, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if good.Requests == 0 || good.Non2xx != 0 || good.RPS <= 0 || good.P50 <= 0 || good.P99 < good.P50 {
		t.Errorf("authorized run: %+v", good)
	}
	bad, err := g.Run(context.Background(), loadRequest{URL: srv.URL}, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if bad.Requests == 0 || bad.Non2xx != bad.Requests {
		t.Errorf("unauthorized run: %+v, want every request counted outside 2xx", bad)
	}
}

func TestGoLoaderStopsWithContext(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g := &goLoader{conns: 1, clk: clockwork.NewRealClock()}
	if _, err := g.Run(ctx, loadRequest{URL: srv.URL}, time.Hour); err == nil {
		t.Error("a cancelled run reported a result")
	}
}
