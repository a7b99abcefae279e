package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// loadResult is one load run against one server.
type loadResult struct {
	RPS          float64
	P50, P99     time.Duration
	Requests     int64
	Non2xx       int64 // answers outside 2xx (wrk counts 3xx with them)
	SocketErrors int64 // connect, read, write and timeout errors
}

// loadRequest is what every request of a run carries.
type loadRequest struct {
	URL    string
	Header http.Header
}

// loader drives one closed-loop load run.
type loader interface {
	Describe() string
	Run(ctx context.Context, req loadRequest, d time.Duration) (loadResult, error)
}

// wrkLoader runs Debian's wrk.
type wrkLoader struct {
	path    string
	version string
	threads int
	conns   int
}

func newWrkLoader(ctx context.Context, path string, threads, conns int) *wrkLoader {
	w := &wrkLoader{path: path, threads: threads, conns: conns, version: "wrk"}
	// wrk prints its version in the usage text and exits non-zero; the text is what matters.
	out, _ := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if line, _, _ := strings.Cut(string(out), "\n"); strings.HasPrefix(line, "wrk ") {
		if v, _, ok := strings.Cut(line, " Copyright"); ok {
			line = v
		}
		w.version = strings.TrimSpace(line)
	}
	return w
}

func (w *wrkLoader) Describe() string {
	return fmt.Sprintf("%s, %d threads, %d connections", w.version, w.threads, w.conns)
}

// wrkSeconds is the run length wrk is given: it takes whole seconds only.
func wrkSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

func (w *wrkLoader) Run(ctx context.Context, req loadRequest, d time.Duration) (loadResult, error) {
	args := []string{
		"-t", strconv.Itoa(w.threads), "-c", strconv.Itoa(w.conns),
		"-d", strconv.Itoa(wrkSeconds(d)) + "s", "--timeout", "5s", "--latency",
	}
	for name, vs := range req.Header {
		for _, v := range vs {
			args = append(args, "-H", name+": "+v)
		}
	}
	args = append(args, req.URL)
	out, err := exec.CommandContext(ctx, w.path, args...).CombinedOutput()
	if err != nil {
		return loadResult{}, fmt.Errorf("wrk %s: %w: %s", req.URL, err, strings.TrimSpace(string(out)))
	}
	res, err := parseWrk(string(out))
	if err != nil {
		return loadResult{}, fmt.Errorf("wrk %s: %w", req.URL, err)
	}
	return res, nil
}

// parseWrk reads the report wrk prints with --latency.
func parseWrk(out string) (loadResult, error) {
	var res loadResult
	var haveRPS, have50, have99 bool
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		var err error
		switch {
		case f[0] == "Requests/sec:":
			res.RPS, err = parseNonNegFloat(f[1])
			haveRPS = err == nil
		case f[0] == "50%":
			res.P50, err = parseWrkDuration(f[1])
			have50 = err == nil
		case f[0] == "99%":
			res.P99, err = parseWrkDuration(f[1])
			have99 = err == nil
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			res.Requests, err = parseCount(f[0])
		case strings.HasPrefix(line, "Non-2xx or 3xx responses:"):
			res.Non2xx, err = parseCount(f[len(f)-1])
		case strings.HasPrefix(line, "Socket errors:"):
			res.SocketErrors, err = parseSocketErrors(strings.TrimPrefix(line, "Socket errors:"))
		}
		if err != nil {
			return loadResult{}, fmt.Errorf("line %q: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return loadResult{}, fmt.Errorf("reading the report: %w", err)
	}
	if !haveRPS || !have50 || !have99 {
		return loadResult{}, errors.New("report lacks Requests/sec or the 50%/99% latency lines")
	}
	return res, nil
}

func parseNonNegFloat(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("number %q: %w", s, err)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("number %q out of range", s)
	}
	return v, nil
}

func parseCount(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("count %q: %w", s, err)
	}
	if v < 0 {
		return 0, fmt.Errorf("count %q is negative", s)
	}
	return v, nil
}

// parseSocketErrors sums "connect 0, read 12, write 0, timeout 0".
func parseSocketErrors(s string) (int64, error) {
	var sum int64
	for part := range strings.SplitSeq(s, ",") {
		f := strings.Fields(part)
		if len(f) != 2 {
			return 0, fmt.Errorf("socket error field %q", part)
		}
		n, err := parseCount(f[1])
		if err != nil {
			return 0, err
		}
		if sum > math.MaxInt64-n {
			return 0, errors.New("socket error count overflows")
		}
		sum += n
	}
	return sum, nil
}

// wrkUnits are the time units wrk prints, longest suffix first so "ms" is not read as "s".
var wrkUnits = []struct {
	suffix string
	unit   time.Duration
}{
	{"us", time.Microsecond},
	{"ms", time.Millisecond},
	{"s", time.Second},
	{"m", time.Minute},
	{"h", time.Hour},
}

// parseWrkDuration reads a wrk latency such as "86.11us", "1.20ms", "2.00s" or "1.50m".
func parseWrkDuration(s string) (time.Duration, error) {
	for _, u := range wrkUnits {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		v, err := parseNonNegFloat(num)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %w", s, err)
		}
		ns := v * float64(u.unit)
		if ns >= math.MaxInt64 {
			return 0, fmt.Errorf("duration %q out of range", s)
		}
		return time.Duration(math.Round(ns)), nil
	}
	return 0, fmt.Errorf("duration %q has no known unit", s)
}

// goLoader is the stand-in when wrk is missing: conns goroutines, each a closed loop on its own
// keep-alive connection.
type goLoader struct {
	conns int
	clk   clockwork.Clock
	why   string // why it runs instead of wrk, for the report
}

func (g *goLoader) Describe() string {
	return fmt.Sprintf("closed-loop Go client (%s), %d connections", g.why, g.conns)
}

func (g *goLoader) Run(ctx context.Context, req loadRequest, d time.Duration) (loadResult, error) {
	tr := &http.Transport{
		MaxIdleConnsPerHost: g.conns,
		MaxConnsPerHost:     g.conns,
		DisableCompression:  true, // wrk asks for no compression either
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}

	type tally struct {
		lat          []time.Duration
		non2xx, errs int64
	}
	tallies := make([]tally, g.conns)
	start := g.clk.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i := range tallies {
		t := &tallies[i]
		wg.Go(func() {
			for ctx.Err() == nil && g.clk.Now().Before(deadline) {
				r, err := http.NewRequestWithContext(ctx, http.MethodGet, req.URL, nil)
				if err != nil {
					t.errs++
					return
				}
				r.Header = req.Header.Clone()
				t0 := g.clk.Now()
				resp, err := client.Do(r)
				if err != nil {
					t.errs++
					continue
				}
				_, cerr := io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if cerr != nil {
					t.errs++
					continue
				}
				t.lat = append(t.lat, g.clk.Since(t0))
				if resp.StatusCode/100 != 2 {
					t.non2xx++
				}
			}
		})
	}
	wg.Wait()
	elapsed := g.clk.Since(start)
	if err := ctx.Err(); err != nil {
		return loadResult{}, fmt.Errorf("load run %s: %w", req.URL, err)
	}
	var res loadResult
	var all []time.Duration
	for _, t := range tallies {
		all = append(all, t.lat...)
		res.Non2xx += t.non2xx
		res.SocketErrors += t.errs
	}
	res.Requests = int64(len(all))
	if elapsed > 0 {
		res.RPS = float64(res.Requests) / elapsed.Seconds()
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	res.P50 = percentile(all, 0.50)
	res.P99 = percentile(all, 0.99)
	return res, nil
}
