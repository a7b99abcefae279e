package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/signalk/sktest"
)

const (
	pingPath   = "/api/v1/system/ping"
	configPath = "/api/v1/config"
	// pingTarget is the goal: ping at least this share of the bare handler's req/s.
	pingTarget = 0.70
	// captureBatchMs is the value of the PUT whose answer the anchor replays; the timed PUTs use
	// 101..200, so the first timed one differs from it and each differs from the one before.
	captureBatchMs = 250
)

type bench struct {
	opts options
	clk  clockwork.Clock
	out  io.Writer
	log  *slog.Logger
	rep  *Report // nil without -json
	// The real signalk-server, started once by skServer for the sections that need it.
	sk    *sktest.Server
	skErr error
}

// target is one GET measured under load.
type target struct {
	name   string
	path   string
	auth   bool
	figure string // its name in the -json report
}

var getTargets = []target{
	{name: "ping", path: pingPath, figure: "http.ping"},
	{name: "config", path: configPath, auth: true, figure: "http.config_get"},
}

func (b *bench) run(ctx context.Context) (err error) {
	defer func() {
		if b.sk != nil {
			if serr := b.sk.Stop(); serr != nil {
				err = errors.Join(err, fmt.Errorf("stopping signalk-server: %w", serr))
			}
		}
	}()
	if b.opts.http {
		if err := b.runHTTP(ctx); err != nil {
			return err
		}
		fmt.Fprintln(b.out)
	}
	if b.opts.boots > 0 {
		if err := b.runBoot(ctx); err != nil {
			return err
		}
		fmt.Fprintln(b.out)
	}
	if b.opts.signalk && b.opts.skPublish {
		if err := b.runSignalK(ctx); err != nil {
			return err
		}
	}
	return nil
}

// runHTTP prints the HTTP sections: GET throughput, PUT latency and memory beside the anchor.
func (b *bench) runHTTP(ctx context.Context) (err error) {
	lg, err := b.pickLoader(ctx)
	if err != nil {
		return err
	}
	devhost, tmp, release, err := b.workspace("devbench-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, release()) }()

	dev, err := b.startDevice(ctx, devhost, tmp)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, dev.stop(10*time.Second)) }()

	client := newClient()
	defer client.CloseIdleConnections()
	answers, version, err := b.captureDevice(ctx, client, dev.url)
	if err != nil {
		return err
	}
	anc, err := b.startAnchor(ctx, tmp, answers)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, anc.stop(5*time.Second)) }()
	if err := b.checkAnchor(ctx, client, anc.url, answers); err != nil {
		return err
	}

	// Idle: both have answered a few requests and nothing else, and the device's plugins
	// are started (a bundled one compiles for seconds after the first answer).
	wctx, cancel := context.WithTimeout(ctx, b.opts.startTimeout)
	plugins, err := waitPluginsSettled(wctx, client, dev.url, b.opts.key, 50*time.Millisecond)
	cancel()
	if err != nil {
		return err
	}
	idle, idleErr := readMemory(dev.pid(), anc.pid())
	b.printHeader(lg, version, devhost)
	fmt.Fprintf(b.out, "device plugins at rest (GET %s): %s\n\n", pluginsPath, plugins)
	gets, err := b.measureGets(ctx, lg, dev.url, anc.url)
	if err != nil {
		return err
	}
	b.printGets(lg, gets)

	puts, err := b.measurePuts(ctx, client, dev.url, anc.url, tmp)
	if err != nil {
		return err
	}
	b.printPuts(puts, tmp)
	b.printMemory(idle, idleErr, dev.pid(), anc.pid())
	return nil
}

// workspace resolves the device binary and makes a temporary folder for one section;
// release removes the folder, or with -keep says where it stays.
func (b *bench) workspace(prefix string) (devhost, tmp string, release func() error, err error) {
	devhost, err = filepath.Abs(b.opts.devhost)
	if err != nil {
		return "", "", nil, fmt.Errorf("device binary: %w", err)
	}
	if _, err := os.Stat(devhost); err != nil {
		return "", "", nil, fmt.Errorf("device binary (run `make build` first): %w", err)
	}
	tmp, err = os.MkdirTemp(b.opts.tmp, prefix)
	if err != nil {
		return "", "", nil, fmt.Errorf("temporary folder: %w", err)
	}
	release = func() error {
		if b.opts.keep {
			b.log.Info("kept the temporary folder", "dir", tmp)
			return nil
		}
		if err := os.RemoveAll(tmp); err != nil {
			return fmt.Errorf("removing %s: %w", tmp, err)
		}
		return nil
	}
	return devhost, tmp, release, nil
}

func (b *bench) pickLoader(ctx context.Context) (loader, error) {
	goLg := &goLoader{conns: b.opts.conns, clk: b.clk, why: "chosen with -loadgen go"}
	if b.opts.loadgen == "go" {
		return goLg, nil
	}
	path, err := exec.LookPath("wrk")
	if err != nil {
		if b.opts.loadgen == "wrk" {
			return nil, fmt.Errorf("wrk not found (apt-get install wrk): %w", err)
		}
		b.log.Warn("wrk not installed; using the closed-loop Go client")
		goLg.why = "wrk not installed"
		return goLg, nil
	}
	return newWrkLoader(ctx, path, b.opts.threads, b.opts.conns), nil
}

func newClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4},
		Timeout:   30 * time.Second,
	}
}

// freePort asks the kernel for a loopback port that is free right now.
func freePort() (int, error) {
	port, err := sktest.FreePort()
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	return port, nil
}

// writeJSONFile writes v as JSON to path for a child process to read; what names the file
// in errors.
func writeJSONFile(path string, v any, what string) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func (b *bench) startDevice(ctx context.Context, devhost, tmp string) (*child, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	factory := filepath.Join(tmp, "factory.json")
	doc := map[string]any{"httpd": map[string]any{"port": port, "api_key": b.opts.key}}
	if err := writeJSONFile(factory, doc, "factory document"); err != nil {
		return nil, err
	}
	logPath := filepath.Join(tmp, "devhost.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("device log: %w", err)
	}
	defer logFile.Close() // the child holds its own copy

	cmd := exec.Command(devhost, "--data", filepath.Join(tmp, "data"), "--factory", factory, "--listen", "127.0.0.1")
	keys, shared := deviceKeyDir(tmp)
	cmd.Env = append(os.Environ(), "DEVHOST_KEYS="+keys)
	if !shared {
		b.log.Warn("no development key: the device refuses the bundled plugins", "keys", keys)
	}
	cmd.Stderr = logFile
	b.log.Info("starting the device", "binary", devhost, "port", port, "log", logPath)
	dev, err := startChild(ctx, b.clk, "devhost", cmd, devicePrefix, b.opts.startTimeout)
	if err != nil {
		return nil, fmt.Errorf("%w\n--- device log (%s), last lines:\n%s", err, logPath, tail(logPath, 20))
	}
	return dev, nil
}

// tail returns the last n lines of a file, for an error report.
func tail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (b *bench) startAnchor(ctx context.Context, tmp string, answers []canned) (*child, error) {
	file := filepath.Join(tmp, "anchor.json")
	if err := writeJSONFile(file, answers, "anchor answers"); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("anchor: locating devbench: %w", err)
	}
	cmd := exec.Command(self, "-serve-anchor", file)
	cmd.Stderr = os.Stderr
	// The anchor stops when this pipe closes, so it cannot outlive this process.
	if _, err := cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("anchor stdin: %w", err)
	}
	return startChild(ctx, b.clk, "anchor", cmd, anchorPrefix, 30*time.Second)
}

// request performs one request and returns the response with its body unread.
func request(ctx context.Context, client *http.Client, method, url, key string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	return resp, nil
}

func putBody(batchMs int) []byte {
	return []byte(`{"sk":{"batch_ms":` + strconv.Itoa(batchMs) + `}}`)
}

// putAnswer is the part of PUT /config's answer that says the write happened.
type putAnswer struct {
	Changed         []string `json:"changed"`
	RestartRequired bool     `json:"restart_required"`
}

func checkPutAnswer(status int, body []byte) error {
	if status != http.StatusOK {
		return fmt.Errorf("PUT %s answered %d: %s", configPath, status, bytes.TrimSpace(body))
	}
	var a putAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return fmt.Errorf("PUT %s answer %q: %w", configPath, body, err)
	}
	if len(a.Changed) == 0 {
		return fmt.Errorf("PUT %s changed nothing (%s), so it measured no write", configPath, bytes.TrimSpace(body))
	}
	return nil
}

// captureDevice fetches the answers the anchor replays and the device's version.
func (b *bench) captureDevice(ctx context.Context, client *http.Client, base string) ([]canned, string, error) {
	type call struct {
		method, path string
		auth         bool
		body         []byte
	}
	// The PUT goes before the GET of the document, so the document replayed is the one the
	// device holds while it is under load.
	calls := []call{
		{method: http.MethodGet, path: pingPath},
		{method: http.MethodPut, path: configPath, auth: true, body: putBody(captureBatchMs)},
		{method: http.MethodGet, path: configPath, auth: true},
	}
	var answers []canned
	for _, c := range calls {
		key := ""
		if c.auth {
			key = b.opts.key
		}
		resp, err := request(ctx, client, c.method, base+c.path, key, c.body)
		if err != nil {
			return nil, "", err
		}
		a, err := captureAnswer(c.method, c.path, resp)
		_ = resp.Body.Close()
		if err != nil {
			return nil, "", err
		}
		if c.method == http.MethodPut {
			if err := checkPutAnswer(a.Status, a.Body); err != nil {
				return nil, "", err
			}
		} else if a.Status != http.StatusOK {
			return nil, "", fmt.Errorf("%s %s answered %d: %s", c.method, c.path, a.Status, bytes.TrimSpace(a.Body))
		}
		answers = append(answers, a)
	}
	var ping struct {
		App     string `json:"app"`
		Version string `json:"version"`
	}
	if err := json.Unmarshal(answers[0].Body, &ping); err != nil {
		return nil, "", fmt.Errorf("ping document %q: %w", answers[0].Body, err)
	}
	return answers, strings.TrimSpace(ping.App + " " + ping.Version), nil
}

// checkAnchor makes sure the anchor answers each request with the device's status and body.
func (b *bench) checkAnchor(ctx context.Context, client *http.Client, base string, answers []canned) error {
	for _, a := range answers {
		var body []byte
		if a.Method == http.MethodPut {
			body = putBody(captureBatchMs)
		}
		resp, err := request(ctx, client, a.Method, base+a.Path, b.opts.key, body)
		if err != nil {
			return fmt.Errorf("anchor: %w", err)
		}
		got, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return fmt.Errorf("anchor %s %s: %w", a.Method, a.Path, err)
		}
		if resp.StatusCode != a.Status || !bytes.Equal(got, a.Body) {
			return fmt.Errorf("anchor %s %s answered %d %q, the device %d %q", a.Method, a.Path, resp.StatusCode, got, a.Status, a.Body)
		}
	}
	return nil
}

// getResult is one target's runs on both sides, in round order.
type getResult struct {
	target         target
	anchor, device []loadResult
}

func (b *bench) measureGets(ctx context.Context, lg loader, devURL, ancURL string) ([]getResult, error) {
	results := make([]getResult, len(getTargets))
	reqs := make([][2]loadRequest, len(getTargets)) // [anchor, device]
	for i, t := range getTargets {
		results[i].target = t
		h := http.Header{}
		if t.auth {
			h.Set("Authorization", "Bearer "+b.opts.key)
		}
		reqs[i] = [2]loadRequest{{URL: ancURL + t.path, Header: h}, {URL: devURL + t.path, Header: h}}
	}
	runOne := func(i, side int, d time.Duration) (loadResult, error) {
		res, err := lg.Run(ctx, reqs[i][side], d)
		if err != nil {
			return res, err
		}
		if res.Non2xx > 0 {
			return res, fmt.Errorf("%s answered %d of %d requests outside 2xx", reqs[i][side].URL, res.Non2xx, res.Requests)
		}
		if res.Requests == 0 {
			return res, fmt.Errorf("%s: no request completed", reqs[i][side].URL)
		}
		return res, nil
	}
	if b.opts.load.warmup > 0 {
		b.log.Info("warming up", "per_run", b.opts.load.warmup)
		for i := range getTargets {
			for side := range 2 {
				if _, err := runOne(i, side, b.opts.load.warmup); err != nil {
					return nil, fmt.Errorf("warm-up: %w", err)
				}
			}
		}
	}
	for r := range b.opts.load.rounds {
		b.log.Info("load round", "round", r+1, "of", b.opts.load.rounds)
		for i := range getTargets {
			order := [2]int{0, 1}
			if r%2 == 1 {
				order = [2]int{1, 0}
			}
			for _, side := range order {
				res, err := runOne(i, side, b.opts.load.duration)
				if err != nil {
					return nil, err
				}
				if side == 0 {
					results[i].anchor = append(results[i].anchor, res)
				} else {
					results[i].device = append(results[i].device, res)
				}
			}
		}
	}
	return results, nil
}

// putResult holds the timed operations of the PUT comparison.
type putResult struct {
	device, bare, fsync []time.Duration
}

// measurePuts interleaves a device PUT, a bare-handler PUT and a raw write+fsync, rotating which
// goes first, so drift affects all three alike.
func (b *bench) measurePuts(ctx context.Context, client *http.Client, devURL, ancURL, tmp string) (putResult, error) {
	f, err := os.OpenFile(filepath.Join(tmp, "fsync-anchor.dat"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return putResult{}, fmt.Errorf("fsync anchor: %w", err)
	}
	defer f.Close()
	b.log.Info("timing PUT /config", "writes", b.opts.puts)

	timedPut := func(base string, value int, check bool) (time.Duration, error) {
		body := putBody(value)
		t0 := b.clk.Now()
		resp, err := request(ctx, client, http.MethodPut, base+configPath, b.opts.key, body)
		if err != nil {
			return 0, err
		}
		got, rerr := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		d := b.clk.Since(t0)
		if rerr != nil {
			return 0, fmt.Errorf("PUT %s: %w", base+configPath, rerr)
		}
		if check {
			if err := checkPutAnswer(resp.StatusCode, got); err != nil {
				return 0, err
			}
		} else if resp.StatusCode != http.StatusOK {
			return 0, fmt.Errorf("anchor PUT answered %d", resp.StatusCode)
		}
		return d, nil
	}
	timedFsync := func(value int) (time.Duration, error) {
		rec := append(putBody(value), '\n')
		t0 := b.clk.Now()
		if _, err := f.Write(rec); err != nil {
			return 0, fmt.Errorf("fsync anchor write: %w", err)
		}
		if err := f.Sync(); err != nil {
			return 0, fmt.Errorf("fsync anchor sync: %w", err)
		}
		return b.clk.Since(t0), nil
	}

	var res putResult
	for i := range b.opts.puts {
		value := 101 + i%100
		for k := range 3 {
			var d time.Duration
			var err error
			switch (i + k) % 3 {
			case 0:
				d, err = timedPut(devURL, value, true)
				res.device = append(res.device, d)
			case 1:
				d, err = timedPut(ancURL, value, false)
				res.bare = append(res.bare, d)
			case 2:
				d, err = timedFsync(value)
				res.fsync = append(res.fsync, d)
			}
			if err != nil {
				return putResult{}, err
			}
		}
	}
	return res, nil
}

func (b *bench) printHeader(lg loader, version, devhost string) {
	fmt.Fprintln(b.out, "devbench: the device beside a bare net/http anchor, one run, loopback")
	fmt.Fprintf(b.out, "machine:  %s/%s, nproc %d, %s, %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel(), runtime.Version())
	fmt.Fprintf(b.out, "device:   %s (%s)\n", version, devhost)
	fmt.Fprintln(b.out, "anchor:   bare net/http handler in a separate process, replaying the device's status, headers and body")
	fmt.Fprintf(b.out, "load:     %s\n", lg.Describe())
	d := b.opts.load.duration
	if _, ok := lg.(*wrkLoader); ok {
		d = time.Duration(wrkSeconds(d)) * time.Second
	}
	fmt.Fprintf(b.out, "rounds:   %d x %v per target and side, sides alternating, medians reported\n", b.opts.load.rounds, d)
	fmt.Fprintln(b.out)
}

func (b *bench) printGets(lg loader, gets []getResult) {
	fmt.Fprintln(b.out, "GET throughput (ratio = device / anchor; req/s higher is better, latency lower is better)")
	tw := tabwriter.NewWriter(b.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tside\treq/s\tp50\tp99\tratio req/s\tratio p50\tratio p99\t")
	var notes []string
	for _, g := range gets {
		a, d := summarizeRuns(g.anchor), summarizeRuns(g.device)
		b.rep.addVs(g.target.figure, "req/s", d.rps, a.rps)
		b.rep.addVs(g.target.figure+"_p99", "us", us(d.p99), us(a.p99))
		fmt.Fprintf(tw, "%s\tanchor\t%.2f\t%s\t%s\t\t\t\t\n", g.target.name, a.rps, fmtDuration(a.p50), fmtDuration(a.p99))
		fmt.Fprintf(tw, "%s\tdevice\t%.2f\t%s\t%s\t%s\t%s\t%s\t\n", g.target.name, d.rps, fmtDuration(d.p50), fmtDuration(d.p99),
			ratio(d.rps, a.rps), ratio(float64(d.p50), float64(a.p50)), ratio(float64(d.p99), float64(a.p99)))
		if g.target.path == pingPath {
			verdict := "met"
			if a.rps == 0 || d.rps/a.rps < pingTarget {
				verdict = "NOT met"
			}
			notes = append(notes, fmt.Sprintf("ping target (device req/s >= %.2f of the anchor's): %s (%s)", pingTarget, verdict, ratio(d.rps, a.rps)))
		}
		notes = append(notes, fmt.Sprintf("%s req/s per round: anchor %s; device %s", g.target.name, perRound(g.anchor), perRound(g.device)))
		if a.socketErrors+d.socketErrors > 0 {
			notes = append(notes, fmt.Sprintf("%s socket errors (all rounds): anchor %d, device %d", g.target.name, a.socketErrors, d.socketErrors))
		}
	}
	_ = tw.Flush()
	for _, n := range notes {
		fmt.Fprintln(b.out, n)
	}
	if _, ok := lg.(*goLoader); ok {
		fmt.Fprintln(b.out, "note: the Go client runs in this process, sharing the CPUs with both servers; compare ratios only")
	}
	fmt.Fprintln(b.out)
}

type runSummary struct {
	rps          float64
	p50, p99     time.Duration
	socketErrors int64
}

func summarizeRuns(runs []loadResult) runSummary {
	var s runSummary
	rps := make([]float64, len(runs))
	p50 := make([]time.Duration, len(runs))
	p99 := make([]time.Duration, len(runs))
	for i, r := range runs {
		rps[i], p50[i], p99[i] = r.RPS, r.P50, r.P99
		s.socketErrors += r.SocketErrors
	}
	s.rps, s.p50, s.p99 = median(rps), medianDuration(p50), medianDuration(p99)
	return s
}

func perRound(runs []loadResult) string {
	parts := make([]string, len(runs))
	for i, r := range runs {
		parts[i] = fmt.Sprintf("%.2f", r.RPS)
	}
	return strings.Join(parts, " ")
}

func (b *bench) printPuts(res putResult, tmp string) {
	fmt.Fprintf(b.out, "PUT %s latency (%d sequential writes each, interleaved, one keep-alive connection)\n", configPath, b.opts.puts)
	dev, bare, fs := summarize(res.device), summarize(res.bare), summarize(res.fsync)
	b.rep.addVs("http.put_config_p50", "us", us(dev.P50), us(fs.P50))
	b.rep.addVs("http.put_config_p99", "us", us(dev.P99), us(fs.P99))
	b.rep.addVs("http.put_config_p50_vs_bare", "us", us(dev.P50), us(bare.P50))
	tw := tabwriter.NewWriter(b.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "side\tp50\tp99\tmean\t")
	for _, row := range []struct {
		name string
		s    latencyStats
	}{{"device (durable store)", dev}, {"bare handler, same answer", bare}, {"raw write+fsync", fs}} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", row.name, fmtDuration(row.s.P50), fmtDuration(row.s.P99), fmtDuration(row.s.Mean))
	}
	for _, row := range []struct {
		name string
		s    latencyStats
	}{{"ratio device / bare handler", bare}, {"ratio device / raw fsync", fs}} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", row.name,
			ratio(float64(dev.P50), float64(row.s.P50)), ratio(float64(dev.P99), float64(row.s.P99)), ratio(float64(dev.Mean), float64(row.s.Mean)))
	}
	_ = tw.Flush()
	fsType := fsName(tmp)
	fmt.Fprintf(b.out, "data folder file system: %s", fsType)
	if fsType == "tmpfs" || fsType == "ramfs" {
		fmt.Fprint(b.out, " (fsync costs nothing here; use -tmp on a disk for durable numbers)")
	}
	fmt.Fprintln(b.out)
	fmt.Fprintln(b.out)
}

// us is d in microseconds, the unit of the report's latencies.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// memory is the resident memory of the anchor, the device app and its supervisor, in KiB.
type memory struct {
	anchor, app, supervisor int64
	appPID                  int
}

func readMemory(devPID, ancPID int) (memory, error) {
	anc, aerr := rssKiB(ancPID)
	sup, serr := rssKiB(devPID)
	app, apid, perr := childRSS(devPID)
	if err := errors.Join(aerr, serr, perr); err != nil {
		return memory{}, err
	}
	return memory{anchor: anc, app: app, supervisor: sup, appPID: apid}, nil
}

// printMemory prints the memory read before the load (idle) and now, after it. The idle figure
// is app.rss_idle, the one after the load app.rss_after_load.
func (b *bench) printMemory(idle memory, idleErr error, devPID, ancPID int) {
	if idleErr != nil {
		fmt.Fprintf(b.out, "memory idle: unavailable (%v)\n", idleErr)
	} else {
		fmt.Fprintf(b.out, "memory idle, before the load (VmRSS): anchor %.2f MiB; device app (pid %d) %.2f MiB, its supervisor %.2f MiB; ratio app / anchor %s\n",
			mib(idle.anchor), idle.appPID, mib(idle.app), mib(idle.supervisor), ratio(float64(idle.app), float64(idle.anchor)))
		b.rep.addVs("app.rss_idle", "MiB", mib(idle.app), mib(idle.anchor))
		b.rep.add("app.supervisor_rss_idle", "MiB", mib(idle.supervisor))
	}
	m, err := readMemory(devPID, ancPID)
	if err != nil {
		fmt.Fprintf(b.out, "memory after the load: unavailable (%v)\n", err)
		return
	}
	fmt.Fprintf(b.out, "memory after the load (VmRSS): anchor %.2f MiB; device app (pid %d) %.2f MiB, its supervisor %.2f MiB; ratio app / anchor %s\n",
		mib(m.anchor), m.appPID, mib(m.app), mib(m.supervisor), ratio(float64(m.app), float64(m.anchor)))
	b.rep.addVs("app.rss_after_load", "MiB", mib(m.app), mib(m.anchor))
}

func mib(kib int64) float64 { return float64(kib) / 1024 }
