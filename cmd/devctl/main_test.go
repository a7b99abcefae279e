package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/board"
	"devhost/host/testio"
)

type harness struct {
	app            *app
	clock          *clockwork.FakeClock
	stdout, stderr *testio.Buffer
	env            map[string]string
}

// hangGuard bounds every wait of these tests. Each waits on a condition; the bound only
// turns a hang into a failure, so it is far beyond what a loaded machine needs.
const hangGuard = 5 * time.Minute

func newHarness() *harness {
	h := &harness{clock: clockwork.NewFakeClock(), stdout: &testio.Buffer{}, stderr: &testio.Buffer{}, env: map[string]string{}}
	h.app = &app{stdout: h.stdout, stderr: h.stderr, clock: h.clock, getenv: func(k string) string { return h.env[k] },
		http: &http.Client{Timeout: 10 * time.Second}}
	return h
}

func (h *harness) run(args ...string) int {
	return h.app.run(context.Background(), args)
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"board"}, "no subcommand"},
		{[]string{"board", "--data", "d", "dance"}, `unknown subcommand "dance"`},
		{[]string{"board", "state"}, "--data DIR is required"},
		{[]string{"board", "--data", "d", "--socket", "s", "state"}, "not both"},
		{[]string{"board", "--data", "d", "state", "extra"}, `unexpected argument "extra"`},
		{[]string{"board", "--data", "d", "mem"}, "at least one of --free-heap"},
		{[]string{"board", "--data", "d", "mem", "--free-heap", "lots"}, "invalid value"},
		{[]string{"board", "--data", "d", "net"}, "want up or down"},
		{[]string{"board", "--data", "d", "net", "sideways"}, "want up or down"},
		{[]string{"board", "--data", "d", "net", "up", "down"}, "want up or down"},
		{[]string{"board", "--data", "d", "route"}, "at least one of --ip"},
		{[]string{"board", "--data", "d", "route", "--iface", "eth"}, "flag provided but not defined: -iface"},
		{[]string{"board", "--data", "d", "eth"}, "want up [--ip IP] or down"},
		{[]string{"board", "--data", "d", "thread", "down", "--ip", "127.0.0.2"}, "--ip goes with up"},
		{[]string{"board", "--data", "d", "wifi"}, "want ap add|remove|fault"},
		{[]string{"board", "--data", "d", "wifi", "radar"}, `unknown subcommand "radar"`},
		{[]string{"board", "--data", "d", "wifi", "ap"}, "want add, remove or fault"},
		{[]string{"board", "--data", "d", "wifi", "ap", "paint"}, `unknown subcommand "paint"`},
		{[]string{"board", "--data", "d", "wifi", "ap", "add"}, "--ssid is required"},
		{[]string{"board", "--data", "d", "wifi", "ap", "add", "--ssid", "s", "--channel", "0"}, "--channel must be"},
		{[]string{"board", "--data", "d", "wifi", "ap", "add", "--ssid", "s", "--rssi", "strong"}, "invalid value"},
		{[]string{"board", "--data", "d", "wifi", "ap", "remove"}, "--ssid is required"},
		{[]string{"board", "--data", "d", "wifi", "ap", "fault", "--ssid", "s"}, "--ssid and --fault are required"},
		{[]string{"board", "--data", "d", "wifi", "scan-busy"}, "want on or off"},
		{[]string{"board", "--data", "d", "wifi", "scan-busy", "maybe"}, "want on or off"},
		{[]string{"board", "--data", "d", "button", "--seconds", "-1"}, "must not be negative"},
		{[]string{"board", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"logs", "--url", "127.0.0.1:8080"}, "want http://HOST:PORT"},
		{[]string{"logs", "--url", "http://x", "--limit", "0"}, "--limit must be 1..1000"},
		{[]string{"logs", "--url", "http://x", "now"}, `unexpected argument "now"`},
		{[]string{"events", "--url", "http://x", "--follow"}, "flag provided but not defined: -follow"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			h := newHarness()
			if code := h.run(c.args...); code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, h.stderr.String())
			}
			if !strings.Contains(h.stderr.String(), c.want) || !strings.Contains(h.stderr.String(), "usage:") {
				t.Fatalf("stderr %q, want %q and the usage", h.stderr.String(), c.want)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	cases := []struct {
		args      []string
		want, not string
	}{
		{[]string{"help"}, "devctl board", ""},
		{[]string{"--help"}, "devctl board", ""},
		{[]string{"board", "-h"}, "devctl board", ""},
		// A command with a usage of its own prints that one, not the top-level one.
		{[]string{"logs", "--help"}, "devctl logs [--url", "devctl board"},
		{[]string{"plugin", "help"}, "devctl plugin install", "devctl board"},
	}
	for _, c := range cases {
		h := newHarness()
		out := h.stdout.String
		if code := h.run(c.args...); code != exitOK || !strings.Contains(out(), c.want) || (c.not != "" && strings.Contains(out(), c.not)) {
			t.Errorf("%v: exit %d, stdout %q", c.args, code, out())
		}
	}
}

func TestAPIBase(t *testing.T) {
	h := newHarness()
	for in, want := range map[string]string{
		"":                              "http://127.0.0.1:8080/api/v1",
		"http://127.0.0.1:8080":         "http://127.0.0.1:8080/api/v1",
		"http://127.0.0.1:8080/":        "http://127.0.0.1:8080/api/v1",
		"http://127.0.0.1:8080/api/v1/": "http://127.0.0.1:8080/api/v1",
		"https://dev.local":             "https://dev.local/api/v1",
	} {
		if got, err := h.app.apiBase(in); err != nil || got != want {
			t.Errorf("apiBase(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	// $DEVCTL_URL stands in for a missing --url; --url wins over it.
	h.env["DEVCTL_URL"] = "http://10.0.0.2:9000/"
	if got, err := h.app.apiBase(""); err != nil || got != "http://10.0.0.2:9000/api/v1" {
		t.Errorf("with $DEVCTL_URL: %q, %v", got, err)
	}
	if got, err := h.app.apiBase("http://127.0.0.1:1"); err != nil || got != "http://127.0.0.1:1/api/v1" {
		t.Errorf("--url beside $DEVCTL_URL: %q, %v", got, err)
	}
}

// The device comes from $DEVCTL_URL when --url is not given.
func TestLogsFromDevctlURL(t *testing.T) {
	dev := &logDevice{lines: lines("x", 2)}
	url := dev.serve(t)
	h := newHarness()
	h.env["DEVCTL_URL"] = url
	if code := h.run("logs"); code != exitOK || h.stdout.String() != "x 0\nx 1\n" {
		t.Fatalf("exit %d, %q %q", code, h.stdout.String(), h.stderr.String())
	}
}

// A locked-out key says so once, with the wait the device asked for.
func TestLockoutMessage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "42")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":"too_many_attempts","message":"too many wrong keys"}`)
	}))
	defer srv.Close()
	h := newHarness()
	if code := h.run("logs", "--url", srv.URL, "--key", "wrong"); code != exitFail {
		t.Fatalf("exit %d", code)
	}
	got := h.stderr.String()
	if strings.Count(got, "too many wrong keys") != 1 || !strings.Contains(got, "retry in 42 s") {
		t.Fatalf("stderr %q, want the reason once and the Retry-After wait", got)
	}
}

// waitOutput waits until buf holds want.
func waitOutput(t *testing.T, buf *testio.Buffer, want string) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !strings.Contains(buf.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("output %q never contained %q", buf.String(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runUntilCleanup runs f in a goroutine until the test ends: the cleanup cancels the
// context it answers (f's own) and waits for f to return.
func runUntilCleanup(tb testing.TB, f func(context.Context) error) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	return ctx
}

// serveBoard runs a simulated board's control channel in a temporary data directory.
func serveBoard(t *testing.T) (*board.Sim, string) {
	t.Helper()
	sim, err := board.LoadSim("")
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	ctx := runUntilCleanup(t, func(ctx context.Context) error { return sim.Serve(ctx, filepath.Join(data, "board.sock")) })
	deadline := time.Now().Add(hangGuard)
	for {
		if _, err := board.Dial(filepath.Join(data, "board.sock")).State(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("control channel did not come up")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return sim, data
}

func TestBoardCommands(t *testing.T) {
	sim, data := serveBoard(t)
	cases := []struct {
		args  []string
		check func(st board.State) bool
		after func() bool
	}{
		{[]string{"board", "--data", data, "state"}, func(st board.State) bool { return st.ID == "abcd" && !st.Eth.Up }, nil},
		{[]string{"board", "state", "--data", data}, func(st board.State) bool { return st.Hardware.Chip == "esp32s3" }, nil},
		{[]string{"board", "--socket", filepath.Join(data, "board.sock"), "state"}, func(st board.State) bool { return st.ID == "abcd" }, nil},
		{[]string{"board", "--data", data, "mem", "--free-internal", "4096"},
			func(st board.State) bool { return st.Memory.FreeInternal == 4096 && st.Memory.LargestBlock == 4096 },
			func() bool { return sim.Memory().MinFreeInternal == 4096 }},
		{[]string{"board", "--data", data, "mem", "--free-heap", "100000", "--free-internal", "90000", "--largest-block", "1000"},
			func(st board.State) bool { return st.Memory.FreeHeap == 100000 && st.Memory.LargestBlock == 1000 }, nil},
		{[]string{"board", "net", "up", "--data", data}, func(st board.State) bool { return st.Eth.Up }, func() bool { return sim.Eth().Up }},
		{[]string{"board", "--data", data, "net", "down"}, func(st board.State) bool { return !st.Eth.Up },
			func() bool { return !sim.Eth().Up }},
		{[]string{"board", "--data", data, "route", "--ip", "127.0.0.8"},
			func(st board.State) bool { return st.Eth.IP == "127.0.0.8" }, nil},
		{[]string{"board", "--data", data, "eth", "up", "--ip", "127.0.0.9"},
			func(st board.State) bool { return st.Eth.Up && st.Eth.IP == "127.0.0.9" }, func() bool { return sim.Eth().Up }},
		{[]string{"board", "--data", data, "eth", "down"}, func(st board.State) bool { return !st.Eth.Up && st.Eth.IP == "127.0.0.9" }, nil},
		{[]string{"board", "--data", data, "thread", "up"}, func(st board.State) bool { return st.Thread.Up }, func() bool { return sim.Thread().Up }},
		{[]string{"board", "--data", data, "thread", "down"}, func(st board.State) bool { return !st.Thread.Up }, nil},
		{[]string{"board", "--data", data, "wifi", "ap", "add", "--ssid", "Fuel Dock", "--psk", "diesel-only", "--rssi", "-72", "--channel", "11"},
			func(st board.State) bool {
				a := st.WiFi.APs[len(st.WiFi.APs)-1]
				return a.SSID == "Fuel Dock" && a.Auth == "wpa2" && a.RSSI == -72 && a.Channel == 11 && a.BSSID == board.DefaultBSSID("Fuel Dock")
			}, nil},
		{[]string{"board", "--data", data, "wifi", "ap", "add", "--ssid", "Open Bay", "--bssid", "02:00:00:00:00:07"},
			func(st board.State) bool {
				a := st.WiFi.APs[len(st.WiFi.APs)-1]
				return a.Auth == "open" && a.BSSID == "02:00:00:00:00:07" && a.RSSI == board.DefaultAPRSSI
			}, nil},
		{[]string{"board", "--data", data, "wifi", "ap", "add", "--ssid", "Office", "--psk", "12345678", "--auth", "wpa2/wpa3"},
			func(st board.State) bool { return st.WiFi.APs[len(st.WiFi.APs)-1].Auth == "wpa2/wpa3" }, nil},
		{[]string{"board", "--data", data, "wifi", "ap", "fault", "--ssid", "Fuel Dock", "--fault", "no_ip"},
			func(st board.State) bool { return st.WiFi.APs[1].Fault == "no_ip" }, nil},
		{[]string{"board", "--data", data, "wifi", "ap", "remove", "--ssid", "Open Bay"},
			func(st board.State) bool { return len(st.WiFi.APs) == 3 }, nil},
		{[]string{"board", "--data", data, "wifi", "scan-busy", "on"}, func(st board.State) bool { return st.WiFi.ScanBusy }, nil},
		{[]string{"board", "--data", data, "wifi", "scan-busy", "off"}, func(st board.State) bool { return !st.WiFi.ScanBusy }, nil},
		{[]string{"board", "--data", data, "button", "--seconds", "30"}, func(st board.State) bool { return true }, nil},
	}
	for _, c := range cases {
		h := newHarness()
		if code := h.run(c.args...); code != exitOK {
			t.Fatalf("%v: exit %d: %s", c.args, code, h.stderr.String())
		}
		var st board.State
		if err := json.Unmarshal([]byte(h.stdout.String()), &st); err != nil {
			t.Fatalf("%v: output %q: %v", c.args, h.stdout.String(), err)
		}
		if !c.check(st) {
			t.Fatalf("%v: state %+v", c.args, st)
		}
		if c.after != nil && !c.after() {
			t.Fatalf("%v: the board did not change", c.args)
		}
	}
}

func TestBoardButtonReachesSubscribers(t *testing.T) {
	sim, data := serveBoard(t)
	events := sim.Subscribe(t.Context())
	<-events // current eth
	<-events // current thread
	h := newHarness()
	if code := h.run("board", "--data", data, "button", "--seconds", "45"); code != exitOK {
		t.Fatalf("exit %d: %s", code, h.stderr.String())
	}
	select {
	case ev := <-events:
		if ev.Presence != 45 {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(hangGuard):
		t.Fatal("no presence event")
	}
}

func TestBoardFailures(t *testing.T) {
	_, data := serveBoard(t)
	h := newHarness()
	if code := h.run("board", "--data", data, "mem", "--largest-block", "999999999"); code != exitFail ||
		!strings.Contains(h.stderr.String(), "largest_block") || h.stdout.String() != "" {
		t.Fatalf("refused change: exit %d, stderr %q", code, h.stderr.String())
	}
	h = newHarness()
	if code := h.run("board", "--data", t.TempDir(), "state"); code != exitFail || !strings.Contains(h.stderr.String(), "is the device running") {
		t.Fatalf("no device: exit %d, stderr %q", code, h.stderr.String())
	}
}

// logDevice serves GET /api/v1/logs from a slice of lines with sequence numbers from
// base, the way the device pages its ring.
type logDevice struct {
	mu    sync.Mutex
	base  int64
	lines []string
	keep  int // lines the ring still holds (0: all)
	key   string
	fail  int // answer this many requests 503 first
	seen  []string
}

// serve runs d on loopback until the test ends and answers its URL.
func (d *logDevice) serve(t *testing.T) string {
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return srv.URL
}

func (d *logDevice) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen = append(d.seen, r.URL.RawQuery)
	if r.URL.Path != "/api/v1/logs" {
		http.NotFound(w, r)
		return
	}
	if d.key != "" && r.Header.Get("Authorization") != "Bearer "+d.key {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"unauthorized"}`)
		return
	}
	if d.fail > 0 {
		d.fail--
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":"restarting"}`)
		return
	}
	first := d.base
	if d.keep > 0 && len(d.lines) > d.keep {
		first = d.base + int64(len(d.lines)-d.keep)
	}
	next := d.base + int64(len(d.lines))
	from, gap := first, false
	if a := r.URL.Query().Get("after"); a != "" {
		n, _ := strconv.ParseInt(a, 10, 64)
		from = min(n+1, next) // as the device does: an after beyond the end reads nothing
		if from < first {
			from, gap = first, true
		}
	}
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	var out []string
	for s := from; s < next && len(out) < limit; s++ {
		out = append(out, d.lines[s-d.base])
	}
	if out == nil {
		out = []string{}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"first": first, "next": from + int64(len(out)), "dropped": first - d.base,
		"size": 16384, "used": 100, "gap": gap, "from": from, "lines": out})
}

func (d *logDevice) add(lines ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.lines = append(d.lines, lines...)
}

func (d *logDevice) restart(lines ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.base, d.lines = 0, lines
}

func (d *logDevice) queries() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.seen...)
}

func lines(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s %d", prefix, i)
	}
	return out
}

func TestLogsPrintsEveryKeptLine(t *testing.T) {
	dev := &logDevice{lines: lines("I (1) main: line", 5), key: "secret-key"}
	url := dev.serve(t)
	h := newHarness()
	h.env["DEVCTL_KEY"] = "secret-key"
	if code := h.run("logs", "--url", url); code != exitOK {
		t.Fatalf("exit %d: %s", code, h.stderr.String())
	}
	if got := h.stdout.String(); got != strings.Join(lines("I (1) main: line", 5), "\n")+"\n" {
		t.Fatalf("output %q", got)
	}
	if got := dev.queries(); strings.Join(got, " ") != "limit=200" {
		t.Fatalf("queries %v", got)
	}
}

// Full pages follow each other with after = next - 1 until the ring is read.
func TestLogsPagesThroughALongRing(t *testing.T) {
	dev := &logDevice{lines: lines("l", 450)}
	url := dev.serve(t)
	h := newHarness()
	if code := h.run("logs", "--url", url); code != exitOK {
		t.Fatalf("exit %d: %s", code, h.stderr.String())
	}
	if got := strings.Count(h.stdout.String(), "\n"); got != 450 {
		t.Fatalf("%d lines printed, want 450", got)
	}
	want := []string{"limit=200", "limit=200&after=199", "limit=200&after=399"}
	if got := dev.queries(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("queries %v, want %v", got, want)
	}
}

// --limit N prints the N newest lines, once.
func TestLogsLimitPrintsTheNewest(t *testing.T) {
	for _, c := range []struct {
		kept, limit int
		want        []string
	}{
		{41, 3, []string{"l 38", "l 39", "l 40"}},
		{2, 3, []string{"l 0", "l 1"}},
		{3, 3, []string{"l 0", "l 1", "l 2"}},
	} {
		dev := &logDevice{lines: lines("l", c.kept)}
		url := dev.serve(t)
		h := newHarness()
		code := h.run("logs", "--url", url, "--limit", strconv.Itoa(c.limit))
		if got := h.stdout.String(); code != exitOK || got != strings.Join(c.want, "\n")+"\n" {
			t.Errorf("%d kept, --limit %d: exit %d, printed %q", c.kept, c.limit, code, got)
		}
	}
}

func TestLogsNeedsTheKey(t *testing.T) {
	dev := &logDevice{lines: lines("x", 1), key: "secret-key"}
	url := dev.serve(t)
	h := newHarness()
	if code := h.run("logs", "--url", url, "--follow"); code != exitFail || !strings.Contains(h.stderr.String(), "401 unauthorized") ||
		!strings.Contains(h.stderr.String(), "--key") {
		t.Fatalf("exit %d, stderr %q", code, h.stderr.String())
	}
	h = newHarness()
	if code := h.run("logs", "--url", url, "--key", "secret-key"); code != exitOK || h.stdout.String() != "x 0\n" {
		t.Fatalf("with --key: exit %d, %q %q", code, h.stdout.String(), h.stderr.String())
	}
}

func TestLogsFollow(t *testing.T) {
	dev := &logDevice{base: 10, lines: lines("boot1", 3), keep: 4}
	url := dev.serve(t)
	h := newHarness()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- h.app.run(ctx, []string{"logs", "--url", url, "--follow"}) }()

	tick := func() {
		t.Helper()
		if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(pollEvery)
	}
	waitOutput(t, h.stdout, "boot1 2\n")

	// New lines arrive at the next poll, and only the new ones are printed.
	dev.add("boot1 3")
	tick()
	waitOutput(t, h.stdout, "boot1 3\n")

	// More lines than the ring keeps: the loss is reported.
	dev.add(lines("burst", 6)...)
	tick()
	waitOutput(t, h.stdout, "burst 5\n")
	waitOutput(t, h.stderr, "2 log lines were overwritten")
	if strings.Contains(h.stdout.String(), "burst 1\n") {
		t.Fatal("printed a line the ring no longer held")
	}

	// The device reboots: 503 while it restarts, then a new ring from sequence 0.
	dev.mu.Lock()
	dev.fail = 1
	dev.mu.Unlock()
	tick()
	waitOutput(t, h.stderr, "503 restarting; retrying")
	dev.restart("boot2 0", "boot2 1")
	tick()
	waitOutput(t, h.stderr, "the device restarted")
	waitOutput(t, h.stdout, "boot2 1\n")

	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d after an interrupt: %s", code, h.stderr.String())
	}
	out := h.stdout.String()
	for _, l := range append(lines("boot1", 4), "burst 2", "burst 5", "boot2 0") {
		if strings.Count(out, l+"\n") != 1 {
			t.Fatalf("line %q printed %d times in\n%s", l, strings.Count(out, l+"\n"), out)
		}
	}
}

func TestEvents(t *testing.T) {
	var mu sync.Mutex
	conns := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/events" || r.Header.Get("Accept") != "text/event-stream" || r.Header.Get("Authorization") != "Bearer k3y-k3y-k3y" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"unauthorized"}`)
			return
		}
		mu.Lock()
		conns++
		n := conns
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "retry: 2500\n\nevent: net\ndata: {\"up\":true,\"conn\":%d}\n\n: ping\n\nevent: logs\ndata: {\"next\":7}\n\ndata: line one\ndata: line two\n\n", n)
		// The stream ends here: the device evicted us, or rebooted.
	}))
	defer srv.Close()

	h := newHarness()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- h.app.run(ctx, []string{"events", "--url", srv.URL, "--key", "k3y-k3y-k3y"}) }()

	waitOutput(t, h.stdout, "message line one\\nline two\n")
	if got := h.stdout.String(); got != "net {\"up\":true,\"conn\":1}\nlogs {\"next\":7}\nmessage line one\\nline two\n" {
		t.Fatalf("output %q", got)
	}
	// It reconnects after the stream's own retry delay.
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.stderr.String(), "reconnecting in 2.5s") {
		t.Fatalf("stderr %q", h.stderr.String())
	}
	h.clock.Advance(2500 * time.Millisecond)
	waitOutput(t, h.stdout, `{"up":true,"conn":2}`)
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d", code)
	}

	// A refused key is final.
	h = newHarness()
	if code := h.run("events", "--url", srv.URL, "--key", "wrong-key"); code != exitFail || !strings.Contains(h.stderr.String(), "401") {
		t.Fatalf("wrong key: exit %d, stderr %q", code, h.stderr.String())
	}
}

func TestEventsRaw(t *testing.T) {
	stream := "retry: 3000\n\nevent: net\ndata: {}\n\n: ping\n\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, stream)
	}))
	defer srv.Close()
	h := newHarness()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- h.app.run(ctx, []string{"events", "--url", srv.URL, "--raw"}) }()
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	if h.stdout.String() != stream {
		t.Fatalf("raw output %q", h.stdout.String())
	}
}

func FuzzSSEParse(f *testing.F) {
	f.Add([]byte("retry: 10\n\nevent: a\ndata: b\n\n"))
	f.Add([]byte("data\n\n:\n\nevent:\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var out bytes.Buffer
		s := &sseReader{a: &app{stdout: &out}, retry: defaultRetry}
		if err := s.parse(bytes.NewReader(b)); err != nil {
			return
		}
		// One event, one line: every printed line has a name.
		for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if out.Len() > 0 && !strings.Contains(l, " ") {
				t.Fatalf("line %q has no name", l)
			}
		}
		if s.retry < 0 {
			t.Fatalf("retry %v", s.retry)
		}
	})
}

// TestBoardRefusalsNameTheMember: a command the board refuses fails with the board's message,
// which names the member.
func TestBoardRefusalsNameTheMember(t *testing.T) {
	_, data := serveBoard(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"wifi", "ap", "add", "--ssid", "x", "--auth", "wpa9"}, `auth "wpa9"`},
		{[]string{"wifi", "ap", "add", "--ssid", "x", "--psk", "short"}, "psk: 5 characters"},
		{[]string{"wifi", "ap", "add", "--ssid", "x", "--rssi", "-200"}, "rssi -200"},
		{[]string{"wifi", "ap", "add", "--ssid", "x", "--bssid", "nope"}, `bssid "nope"`},
		{[]string{"wifi", "ap", "fault", "--ssid", "Marina", "--fault", "fire"}, `fault "fire"`},
		{[]string{"wifi", "ap", "remove", "--ssid", "Nowhere"}, `ssid "Nowhere"`},
		{[]string{"eth", "up", "--ip", "300.1.1.1"}, `eth: ip "300.1.1.1"`},
	} {
		h := newHarness()
		if code := h.run(append([]string{"board", "--data", data}, c.args...)...); code != exitFail || !strings.Contains(h.stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, h.stderr.String(), c.want)
		}
	}
}
