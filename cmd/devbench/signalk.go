package main

// The Signal K section measures publishing into the real signalk-server end to end:
//   - Each side runs in a process of its own (skside.go), and each side's CPU figure is that
//     process's CPU time from its start signal until the server shows its final marker, so
//     neither side pays for the other, for the REST read-back or for this process.
//   - The device side is the device's own delta stream (host/skstream) built in its process
//     with the settings given by -sk-batch-ms, pointed at the server with a token that this
//     process obtains through the server's access request flow (request, approve with the
//     admin account, poll). It is not bin/devhost: the device offers no way to publish at a
//     chosen rate from outside, so the stream is driven through its Go API, which is what the
//     device's own publishers call.
//   - Publishers call PublishNumber in a loop. Every 1024 values they wait (WaitBuffered)
//     while the stream's queue holds more than half of its byte budget, so the rate reported
//     is what the stream sustains without dropping; any drop that happens anyway is reported
//     and the dropped messages' values are not counted as delivered.
//   - The anchor is a plain WebSocket client on one connection writing delta frames with the
//     same number of values per frame as the device's messages averaged, as fast as the socket
//     accepts them (10 s write deadline).
//   - Neither side runs anything on a timer in the measured rounds: on a loaded machine a
//     wake-up of a Go process costs 100-200 µs of CPU, more than a thousand values. Both
//     sides run the same sampler (every 10 ms: does the side have nothing waiting for the
//     socket?) in the unrecorded warm-up only. They read the clock about as often per value
//     (the device times one Publish call in 256, the plain client reads the clock for each
//     frame's timestamp and deadline).
//   - Both sides end with a marker value; the run lasts until the server shows the marker
//     through its REST API, so values still in socket buffers are not counted as taken. The
//     server offers no per-connection acceptance count, so this read-back is the proof that
//     everything written before the marker was processed.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jonboulle/clockwork"

	"devhost/host/signalk/sktest"
	"devhost/host/skstream"
)

const (
	// skTarget is the goal: the device stream reaches at least this share of the plain
	// client's values per second.
	skTarget = 0.90
	// skPaths is how many distinct paths each publisher cycles through. The stream keeps only
	// the last value of a path within a batch, so the cycle is longer than a full 16 KiB message
	// holds values: no value is replaced in its batch and every published value goes out.
	skPaths = 1024
	// skValueBase keeps every published number the same width on the wire, so messages of one
	// size hold the same number of values.
	skValueBase = 1_000_000_000
)

// skResult is one side's run.
type skResult struct {
	published uint64 // values handed to the stream or written to the socket
	delivered uint64 // values the server took (published minus dropped ones)
	messages  uint64 // frames written
	dropped   uint64 // frames the stream dropped
	elapsed   time.Duration
	cpu       time.Duration
	latencies []time.Duration // timed Publish call durations (device side only)
	// 10 ms samples while publishing, and how many found the side with nothing waiting for the
	// socket (the device's queue empty, the plain client between writes): the share is the
	// upper bound of the time the side, not the server, set the pace.
	samples, idleSamples int
}

func (r skResult) rate() float64 { return perSecond(r.delivered, r.elapsed) }

// perSecond is n over d in units per second (0 for an empty run).
func perSecond(n uint64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// cpuPer1k is the CPU milliseconds spent per second of run for every 1000 values per second,
// which equals the CPU milliseconds spent per 1000 values.
func cpuPer1k(cpu time.Duration, values uint64) float64 {
	if values == 0 {
		return 0
	}
	return float64(cpu) / float64(time.Millisecond) * 1000 / float64(values)
}

// deliveredValues estimates the values that reached the server when dropped of sent+dropped
// messages were lost: messages are filled alike, so the loss is the dropped share.
func deliveredValues(published, sent, dropped uint64) uint64 {
	if dropped == 0 || sent+dropped == 0 {
		return published
	}
	return uint64(float64(published) * float64(sent) / float64(sent+dropped))
}

// percentOf is part of whole in percent (0 for an empty whole).
func percentOf(part, whole int) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

// valuesPerFrame is the average number of values in one message, at least 1.
func valuesPerFrame(values, messages uint64) int {
	if messages == 0 {
		return 1
	}
	return max(1, int((values+messages/2)/messages))
}

// skShare is the device's share of the plain client's rate: the median of the rounds' ratios.
// The server's own pace drifts between runs more than the two sides differ, and the two runs
// of a round are neighbours in time. Rounds where the plain client delivered nothing are
// left out; with none left the share is 0.
func skShare(rounds []skRound) float64 {
	var ratios []float64
	for _, r := range rounds {
		if p := r.plain.rate(); p > 0 {
			ratios = append(ratios, r.dev.rate()/p)
		}
	}
	if len(ratios) == 0 {
		return 0
	}
	return median(ratios)
}

// skCPUPer1k is each side's CPU per 1000 values: the median over the rounds of each round's
// figure, and the median of the rounds' own device / plain ratios. A side's CPU in a round
// swings with the other load of the machine (the plain client's by a factor of two within one
// run on the shared 2-core machine), so one disturbed round moved the CPU summed over all
// rounds; a median leaves it out. Rounds where a side delivered nothing are left out of that
// side's median and of the ratios.
func skCPUPer1k(rounds []skRound) (dev, plain, roundRatio float64) {
	var devs, plains, ratios []float64
	for _, r := range rounds {
		d, p := cpuPer1k(r.dev.cpu, r.dev.delivered), cpuPer1k(r.plain.cpu, r.plain.delivered)
		if r.dev.delivered > 0 {
			devs = append(devs, d)
		}
		if r.plain.delivered > 0 {
			plains = append(plains, p)
		}
		if r.dev.delivered > 0 && p > 0 {
			ratios = append(ratios, d/p)
		}
	}
	return median(devs), median(plains), median(ratios)
}

// skPathTable is the cycle of benchmark paths of one publisher, all of one width.
func skPathTable(side string) []string {
	paths := make([]string, skPaths)
	for i := range paths {
		paths[i] = fmt.Sprintf("bench.%s.p%04d", side, i)
	}
	return paths
}

// appendDeltaFrame appends a delta for vessels.self carrying n values, numbered from seq and
// taking paths in turn, to dst: the frame the plain client writes.
func appendDeltaFrame(dst []byte, paths []string, seq uint64, n int, ts time.Time) []byte {
	dst = append(dst, `{"context":"vessels.self","updates":[{`...)
	if !ts.IsZero() {
		// The device stamps every update (sk.timestamps); the server parses the stamp, so
		// the anchor carries one too.
		dst = append(dst, `"timestamp":"`...)
		dst = ts.UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z")
		dst = append(dst, `",`...)
	}
	dst = append(dst, `"source":{"label":"bench"},"values":[`...)
	for i := range n {
		if i > 0 {
			dst = append(dst, ',')
		}
		v := seq + uint64(i)
		dst = append(dst, `{"path":"`...)
		dst = append(dst, paths[v%uint64(len(paths))]...)
		dst = append(dst, `","value":`...)
		dst = strconv.AppendUint(dst, skValueBase+v, 10)
		dst = append(dst, '}')
	}
	return append(dst, `]}]}`...)
}

// cpuTime is this process's user plus system CPU time so far.
func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// runSignalK prints the Signal K section; a server that cannot be started skips it.
func (b *bench) runSignalK(ctx context.Context) error {
	fmt.Fprintln(b.out, "Signal K publish throughput into the real signalk-server (values/s higher is better)")
	srv, err := b.skServer(ctx)
	if err != nil {
		fmt.Fprintf(b.out, "Signal K: skipped, the server could not be started: %v\n\n", err)
		return nil
	}

	token, err := b.skAccessToken(ctx, srv)
	if err != nil {
		return fmt.Errorf("signal k: %w\n--- server log:\n%s", err, srv.LogTail(20))
	}
	// The server compiles its delta path on first use, and the side that runs first would pay
	// for it: both sides warm it up unrecorded, and the measured rounds alternate who goes
	// first.
	// The warm-up is also where both sides run their sampler, which costs too much CPU to run
	// in the measured rounds.
	perFrame := 1
	var warm skRound
	if b.opts.sk.warmup > 0 {
		b.log.Info("signal k: warm-up of both sides (not recorded)", "duration", b.opts.sk.warmup)
		warm.dev, err = b.skRun(ctx, srv, "dev", token, 0, b.opts.sk.warmup, true)
		if err != nil {
			return fmt.Errorf("signal k device stream (warm-up): %w", err)
		}
		perFrame = valuesPerFrame(warm.dev.published, warm.dev.messages+warm.dev.dropped)
		if warm.plain, err = b.skRun(ctx, srv, "plain", srv.AdminToken, perFrame, b.opts.sk.warmup, true); err != nil {
			return fmt.Errorf("signal k plain client (warm-up): %w", err)
		}
	}
	var rounds []skRound
	for i := range b.opts.sk.rounds {
		var r skRound
		sides := []func() error{
			func() (err error) {
				r.dev, err = b.skRun(ctx, srv, "dev", token, 0, b.opts.sk.duration, false)
				if err != nil {
					return fmt.Errorf("signal k device stream: %w", err)
				}
				if b.opts.sk.warmup <= 0 && i == 0 {
					perFrame = valuesPerFrame(r.dev.published, r.dev.messages+r.dev.dropped)
				}
				return nil
			},
			func() (err error) {
				r.plain, err = b.skRun(ctx, srv, "plain", srv.AdminToken, perFrame, b.opts.sk.duration, false)
				if err != nil {
					return fmt.Errorf("signal k plain client: %w", err)
				}
				return nil
			},
		}
		// Without a warm-up the device runs first in round 0 so that the plain client can
		// copy its frame size.
		r.plainFirst = i%2 == 1
		if r.plainFirst {
			sides[0], sides[1] = sides[1], sides[0]
		}
		for _, side := range sides {
			if err := side(); err != nil {
				return err
			}
		}
		rounds = append(rounds, r)
	}
	b.printSignalK(rounds, warm, perFrame)
	return nil
}

// skServer starts the real signalk-server the first time a section needs it; run stops it at
// the end. A server that cannot start is reported the same way to every section.
func (b *bench) skServer(ctx context.Context) (*sktest.Server, error) {
	if b.sk != nil || b.skErr != nil {
		return b.sk, b.skErr
	}
	b.log.Info("installing or checking signalk-server")
	dir, err := sktest.Prepare(ctx, nil)
	if err == nil {
		b.sk, err = sktest.Start(ctx, sktest.Options{Dir: dir})
	}
	b.skErr = err
	return b.sk, err
}

// skRound is one measured round: both sides, one after the other.
type skRound struct {
	dev, plain skResult
	plainFirst bool
}

// skAccessToken asks the server for device access as a device would, approves the request
// with the admin account and fetches the token.
func (b *bench) skAccessToken(ctx context.Context, srv *sktest.Server) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	idb := make([]byte, 16)
	if _, err := rand.Read(idb); err != nil {
		return "", fmt.Errorf("client id: %w", err)
	}
	h := hex.EncodeToString(idb)
	clientID := h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
	status, body, err := srv.Do(ctx, http.MethodPost, "/signalk/v1/access/requests", "",
		map[string]string{"clientId": clientID, "description": "devbench stream", "permissions": "readwrite"})
	if err != nil {
		return "", fmt.Errorf("access request: %w", err)
	}
	var req struct {
		State string `json:"state"`
		Href  string `json:"href"`
	}
	if status != http.StatusAccepted || json.Unmarshal(body, &req) != nil || req.Href == "" {
		return "", fmt.Errorf("access request answered %d: %s", status, body)
	}
	if _, err := srv.WaitRequest(ctx, clientID); err != nil {
		return "", fmt.Errorf("waiting for the access request: %w", err)
	}
	if err := srv.Approve(ctx, clientID, "readwrite"); err != nil {
		return "", fmt.Errorf("approving: %w", err)
	}
	for {
		status, body, err := srv.Do(ctx, http.MethodGet, req.Href, "", nil)
		if err != nil {
			return "", fmt.Errorf("polling the access request: %w", err)
		}
		var a struct {
			State         string `json:"state"`
			AccessRequest struct {
				Permission string `json:"permission"`
				Token      string `json:"token"`
			} `json:"accessRequest"`
		}
		if status == http.StatusOK && json.Unmarshal(body, &a) == nil && a.State == "COMPLETED" {
			if a.AccessRequest.Permission != "APPROVED" || a.AccessRequest.Token == "" {
				return "", fmt.Errorf("access request completed without a token: %s", body)
			}
			return a.AccessRequest.Token, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("polling the access request: %w", ctx.Err())
		case <-b.clk.After(100 * time.Millisecond):
		}
	}
}

// skWaitMarker waits until the server shows marker at path.
func (b *bench) skWaitMarker(ctx context.Context, srv *sktest.Server, path string, marker uint64) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	want := strconv.FormatUint(marker, 10)
	_, err := srv.WaitValue(ctx, path, func(v json.RawMessage) bool { return strings.TrimSpace(string(v)) == want })
	if err != nil {
		return fmt.Errorf("reading back %s=%s: %w", path, want, err)
	}
	return nil
}

func (b *bench) printSignalK(rounds []skRound, warm skRound, perFrame int) {
	var devRates, plainRates []float64
	var lats []time.Duration
	var dev skResult   // the device rounds added up, for CPU and counts
	var plain skResult // the plain client's, for its CPU
	for _, r := range rounds {
		plain.cpu += r.plain.cpu
		plain.delivered += r.plain.delivered
		devRates = append(devRates, r.dev.rate())
		plainRates = append(plainRates, r.plain.rate())
		lats = append(lats, r.dev.latencies...)
		dev.published += r.dev.published
		dev.delivered += r.dev.delivered
		dev.messages += r.dev.messages
		dev.dropped += r.dev.dropped
		dev.cpu += r.dev.cpu
	}
	slices.Sort(lats)
	var worst time.Duration
	if len(lats) > 0 {
		worst = lats[len(lats)-1]
	}
	devRate, plainRate := median(devRates), median(plainRates)
	b.rep.addVs("signalk.publish_rate", "values/s", devRate, plainRate)
	devCPU, plainCPU, cpuRatio := skCPUPer1k(rounds)
	b.rep.addVs("signalk.cpu_per_kvalue", "ms", devCPU, plainCPU)
	b.rep.add("signalk.publish_p99", "us", us(percentile(lats, 0.99)))
	fmt.Fprintf(b.out, "device side: host/skstream in a process of its own (the device's stream, driven through its Go API), sk.batch_ms %d, %d publishers\n",
		b.opts.skBatchMs, b.opts.skPublishers)
	fmt.Fprintf(b.out, "plain side:  one gorilla/websocket connection in a process of its own, admin token, %d values per frame (the device's average)\n", perFrame)
	fmt.Fprintln(b.out, "CPU: each side's process (getrusage), from its start signal until the server shows its final marker")
	fmt.Fprintf(b.out, "each run: %v of publishing, then until the server shows a final marker value (REST read-back); %v warm-up of each side, then %d rounds alternating which side goes first\n",
		b.opts.sk.duration, b.opts.sk.warmup, len(rounds))
	for i, r := range rounds {
		order := "device first"
		if r.plainFirst {
			order = "plain first "
		}
		fmt.Fprintf(b.out, "  round %d (%s): plain %.0f values/s (%d frames, CPU %.3f ms per 1000 values), device %.0f values/s (%d messages, %d dropped, CPU %.3f ms per 1000 values) → %s\n",
			i+1, order, r.plain.rate(), r.plain.messages, cpuPer1k(r.plain.cpu, r.plain.delivered),
			r.dev.rate(), r.dev.messages, r.dev.dropped, cpuPer1k(r.dev.cpu, r.dev.delivered), ratio(r.dev.rate(), r.plain.rate()))
	}
	fmt.Fprintf(b.out, "values/s plain client:  %.0f (median)\n", plainRate)
	fmt.Fprintf(b.out, "values/s device stream: %.0f (median; %d published, %d messages sent, %d dropped in all rounds)\n",
		devRate, dev.published, dev.messages, dev.dropped)
	share := skShare(rounds)
	fmt.Fprintf(b.out, "ratio device / plain:   %.2f (median of the rounds' ratios; %s of the medians)\n", share, ratio(devRate, plainRate))
	if warm.dev.samples > 0 {
		fmt.Fprintf(b.out, "device queue empty:     %.1f %% of %d samples taken every 10 ms in the warm-up (the most the device could have held the server back)\n",
			percentOf(warm.dev.idleSamples, warm.dev.samples), warm.dev.samples)
		fmt.Fprintf(b.out, "plain client idle:      %.1f %% of %d samples in the warm-up (not inside a socket write)\n",
			percentOf(warm.plain.idleSamples, warm.plain.samples), warm.plain.samples)
	}
	fmt.Fprintf(b.out, "device CPU:             %.3f ms per 1000 values/s (median of the rounds; CPU ms per second of run per 1000 values/s; all rounds together %.3f, %s CPU)\n",
		devCPU, cpuPer1k(dev.cpu, dev.delivered), fmtDuration(dev.cpu))
	fmt.Fprintf(b.out, "plain client CPU:       %.3f ms per 1000 values/s (median of the rounds; all rounds together %.3f, %s CPU) → device / plain %s (median of the rounds' ratios %.2f)\n",
		plainCPU, cpuPer1k(plain.cpu, plain.delivered), fmtDuration(plain.cpu), ratio(devCPU, plainCPU), cpuRatio)
	fmt.Fprintf(b.out, "Publish call latency:   p50 %s, p99 %s, worst %s over %d calls\n",
		fmtDuration(percentile(lats, 0.50)), fmtDuration(percentile(lats, 0.99)), fmtDuration(worst), len(lats))
	verdict := "met"
	if share < skTarget {
		verdict = "NOT met"
	}
	fmt.Fprintf(b.out, "Signal K target (device values/s >= %.2f of the plain client's): %s (%.2f)\n\n",
		skTarget, verdict, share)
}

// Side processes.
//
// The two sides of the Signal K section each run in a process of their own (devbench
// re-executed with -sk-side), so that each side's CPU figure is the CPU of exactly that side:
// its publishing code, its socket writes and the same small harness, and nothing of the
// other side, of the parent's REST read-back or of its bookkeeping. Both processes are built
// from the same code and measured the same way: getrusage(RUSAGE_SELF) of the side process
// from the moment it is told to go until the parent has seen the final marker on the server.
//
// The exchange is one line at a time. The side process connects and prints
// "sk-side: connected to <server URL>". The parent answers "go <marker>"; the side publishes
// for -sk-duration, writes the marker value, waits until everything it wrote has left, and
// prints "sk-side: sent <JSON of skSideReport>". Once the server shows the marker the parent
// sends "cpu", the side prints "sk-side: cpu <nanoseconds>", and it exits when its stdin closes.
// The prefixes below are that exchange's lines.

const (
	// skSidePrefix starts the line a side process prints once connected, before the server URL.
	skSidePrefix = "sk-side: connected to "
	skSentPrefix = "sk-side: sent "
	skCPUPrefix  = "sk-side: cpu "
	// skTokenEnv carries the side's bearer token, so that it is not on the command line.
	skTokenEnv = "DEVBENCH_SK_TOKEN"
	// skSampleEvery is the period of each side's sampler.
	skSampleEvery = 10 * time.Millisecond
)

// skSideReport is what a side process reports once its marker has left.
type skSideReport struct {
	Published uint64 `json:"published"` // values published or written before the marker
	Messages  uint64 `json:"messages"`  // frames written, the marker's not counted
	Dropped   uint64 `json:"dropped"`   // messages the device stream dropped
	// With -sk-sample, samples taken every skSampleEvery while publishing, and how many found
	// the side with nothing waiting for the socket: the device's queue empty, the plain client
	// between writes.
	Samples int `json:"samples"`
	Idle    int `json:"idle"`
	// LatenciesNS are the timed Publish calls of the device side (one call in 256).
	LatenciesNS []int64 `json:"latencies_ns,omitempty"`
}

// skSide is one side, connected and ready to publish.
type skSide interface {
	// publish publishes for d, then writes marker to the side's done path and returns once
	// everything written has left the process.
	publish(ctx context.Context, d time.Duration, marker uint64) (skSideReport, error)
	close()
}

// skDonePath is where a side writes its final marker.
func skDonePath(side string) string { return "bench." + side + ".done" }

// skRun runs one side in its own process for duration and returns its result.
func (b *bench) skRun(ctx context.Context, srv *sktest.Server, side, token string, perFrame int, duration time.Duration, sample bool) (res skResult, err error) {
	self, err := os.Executable()
	if err != nil {
		return res, fmt.Errorf("locating devbench: %w", err)
	}
	cmd := exec.Command(self, "-sk-side", side, "-sk-server", srv.URL(), "-sk-duration", duration.String(),
		"-sk-batch-ms", strconv.Itoa(b.opts.skBatchMs), "-sk-publishers", strconv.Itoa(b.opts.skPublishers),
		"-sk-per-frame", strconv.Itoa(max(1, perFrame)))
	if b.opts.skProfile != "" {
		cmd.Args = append(cmd.Args, "-sk-profile", b.opts.skProfile)
	}
	if sample {
		cmd.Args = append(cmd.Args, "-sk-sample")
	}
	cmd.Env = append(os.Environ(), skTokenEnv+"="+token)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return res, fmt.Errorf("%s side stdin: %w", side, err)
	}
	c, err := startChild(ctx, b.clk, side+" side", cmd, skSidePrefix, time.Minute)
	if err != nil {
		_ = stdin.Close()
		return res, err
	}
	defer func() {
		// A closed stdin ends the side process; stop makes sure of it.
		_ = stdin.Close()
		err = errors.Join(err, c.stop(10*time.Second))
	}()

	marker := skValueBase + uint64(b.clk.Now().UnixNano()%skValueBase)
	t0 := b.clk.Now()
	if _, err := fmt.Fprintf(stdin, "go %d\n", marker); err != nil {
		return res, fmt.Errorf("%s side: go: %w", side, err)
	}
	line, err := c.expect(ctx, skSentPrefix, duration+2*time.Minute)
	if err != nil {
		return res, err
	}
	var rep skSideReport
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		return res, fmt.Errorf("%s side report %q: %w", side, line, err)
	}
	if err := b.skWaitMarker(ctx, srv, skDonePath(side), marker); err != nil {
		return res, err
	}
	res.elapsed = b.clk.Since(t0)
	if _, err := fmt.Fprintln(stdin, "cpu"); err != nil {
		return res, fmt.Errorf("%s side: cpu: %w", side, err)
	}
	line, err = c.expect(ctx, skCPUPrefix, time.Minute)
	if err != nil {
		return res, err
	}
	ns, err := strconv.ParseInt(line, 10, 64)
	if err != nil {
		return res, fmt.Errorf("%s side CPU %q: %w", side, line, err)
	}
	res.cpu = time.Duration(ns)
	res.published, res.messages, res.dropped = rep.Published, rep.Messages, rep.Dropped
	res.delivered = deliveredValues(res.published, res.messages, res.dropped)
	res.samples, res.idleSamples = rep.Samples, rep.Idle
	for _, l := range rep.LatenciesNS {
		res.latencies = append(res.latencies, time.Duration(l))
	}
	return res, nil
}

// runSKSide is the side process: it connects as -sk-side says, then follows the exchange
// described under "Side processes" above on stdin and stdout.
func runSKSide(ctx context.Context, o options, stdin io.Reader, stdout io.Writer, log *slog.Logger) error {
	clk := clockwork.NewRealClock()
	token := os.Getenv(skTokenEnv)
	var (
		side skSide
		err  error
	)
	switch o.skSide {
	case "dev":
		side, err = dialDeviceSide(ctx, clk, log, o, token)
	default:
		side, err = dialPlainSide(ctx, clk, o, token)
	}
	if err != nil {
		return err
	}
	defer side.close()
	if _, err := fmt.Fprintf(stdout, "%s%s\n", skSidePrefix, o.skServer); err != nil {
		return fmt.Errorf("announcing: %w", err)
	}
	in := bufio.NewScanner(stdin)
	line, err := nextLine(in, "go ")
	if err != nil {
		return err
	}
	marker, err := strconv.ParseUint(line, 10, 64)
	if err != nil {
		return fmt.Errorf("marker %q: %w", line, err)
	}
	stopProfile, err := startSKProfile(o.skProfile, o.skSide)
	if err != nil {
		return err
	}
	defer stopProfile()
	cpu0, err := cpuTime()
	if err != nil {
		return err
	}
	rep, err := side.publish(ctx, o.sk.duration, marker)
	if err != nil {
		return err
	}
	js, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	if _, err := fmt.Fprintf(stdout, "%s%s\n", skSentPrefix, js); err != nil {
		return fmt.Errorf("reporting: %w", err)
	}
	if _, err := nextLine(in, "cpu"); err != nil {
		return err
	}
	cpu1, err := cpuTime()
	if err != nil {
		return err
	}
	stopProfile()
	if _, err := fmt.Fprintf(stdout, "%s%d\n", skCPUPrefix, int64(cpu1-cpu0)); err != nil {
		return fmt.Errorf("reporting the CPU: %w", err)
	}
	for in.Scan() {
	}
	return nil
}

// startSKProfile starts a CPU profile of this side process into dir (none when dir is empty);
// the returned function stops it and may be called more than once.
func startSKProfile(dir, side string) (stop func(), err error) {
	if dir == "" {
		return func() {}, nil
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", side, os.Getpid())))
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		})
	}, nil
}

// nextLine reads the next line of stdin, which must start with prefix, and returns the rest.
func nextLine(in *bufio.Scanner, prefix string) (string, error) {
	if !in.Scan() {
		if err := in.Err(); err != nil {
			return "", fmt.Errorf("reading %q: %w", prefix, err)
		}
		return "", fmt.Errorf("stdin closed before %q", prefix)
	}
	rest, ok := strings.CutPrefix(in.Text(), prefix)
	if !ok {
		return "", fmt.Errorf("got %q, want a line starting %q", in.Text(), prefix)
	}
	return rest, nil
}

// startSampler counts, every skSampleEvery on a goroutine of its own, whether idle() holds;
// the returned function stops it and gives the counts. Only the warm-up runs sample (on):
// on the loaded development machine one wake-up of a Go process costs 100-200 µs of CPU,
// so a 10 ms sampler alone cost each side more CPU than its publishing at the server's pace.
func startSampler(clk clockwork.Clock, on bool, idle func() bool) (stop func() (samples, idles int)) {
	if !on {
		return func() (int, int) { return 0, 0 }
	}
	var (
		quit           atomic.Bool
		samples, idles int
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !quit.Load() {
			clk.Sleep(skSampleEvery)
			samples++
			if idle() {
				idles++
			}
		}
	}()
	return func() (int, int) {
		quit.Store(true)
		<-done
		return samples, idles
	}
}

// deviceSide is the device's own delta stream (host/skstream), driven through its Go API as
// the device's publishers drive it.
type deviceSide struct {
	clk        clockwork.Clock
	st         *skstream.Stream
	publishers int
	sample     bool // run the sampler (-sk-sample)
	cancel     context.CancelFunc
}

func dialDeviceSide(ctx context.Context, clk clockwork.Clock, log *slog.Logger, o options, token string) (*deviceSide, error) {
	set := skstream.DefaultSettings()
	set.BatchMS = o.skBatchMs
	set.BufferMsgs = 1024
	set.BufferKB = 1024
	st := skstream.New(skstream.Options{
		Clock:     clk,
		Logger:    log.With("component", "skstream"),
		Hostname:  "devbench",
		WallClock: func() (time.Time, bool) { return clk.Now(), true },
		Settings:  set,
	})
	sctx, cancel := context.WithCancel(ctx)
	d := &deviceSide{clk: clk, st: st, publishers: o.skPublishers, sample: o.skSample, cancel: cancel}
	st.SetTarget(&skstream.Target{URL: o.skServer, Token: token})
	if err := st.Start(sctx); err != nil {
		d.close()
		return nil, fmt.Errorf("device stream start: %w", err)
	}
	deadline := clk.Now().Add(30 * time.Second)
	for !st.Connected() {
		if clk.Now().After(deadline) {
			s := st.Status()
			d.close()
			return nil, fmt.Errorf("device stream not connected after 30 s (state %s, %s)", s.State, s.LastError)
		}
		select {
		case <-ctx.Done():
			d.close()
			return nil, ctx.Err()
		case <-clk.After(20 * time.Millisecond):
		}
	}
	return d, nil
}

func (d *deviceSide) close() {
	d.st.Close()
	d.cancel()
}

func (d *deviceSide) publish(ctx context.Context, duration time.Duration, marker uint64) (rep skSideReport, err error) {
	st := d.st
	highWater := 1024 * 1024 / 2 // half of sk.buffer_kb as dialDeviceSide sets it
	before := st.Status()
	var stop atomic.Bool
	// pctx ends with the publishing time, so that a publisher waiting for the queue stops too.
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	var published atomic.Uint64
	var firstErr error
	var errOnce sync.Once
	lats := make([][]int64, d.publishers)
	var wg sync.WaitGroup
	for g := range d.publishers {
		paths := skPathTable(fmt.Sprintf("dev%d", g))
		wg.Go(func() {
			var n uint64
			for i := 0; !stop.Load(); i++ {
				// Once the stream's queue is past half its budget, wait without publishing
				// until it is down to a quarter: a publisher faster than the server would
				// otherwise only measure the ring dropping its oldest messages, as it must.
				// Status takes the stream's lock, so it is asked every 1024 values only
				// (36 KiB of the 512 KiB left below the budget), and the wait sleeps until
				// the queue has drained, waking once, where the plain client's blocked
				// write wakes once per frame.
				if i%1024 == 0 && st.Status().BufferedBytes > highWater {
					if err := st.WaitBuffered(pctx, highWater/2); err != nil {
						if !stop.Load() {
							errOnce.Do(func() { firstErr = err })
						}
						break
					}
				}
				v := uint64(g)<<40 | uint64(i)
				// Only every 256th call is timed: 1 in 256 still gives a p99 from thousands of
				// calls, and its clock reads then cost about as much per value as the plain
				// side's per-frame clock reads.
				if i%256 != 0 {
					err := st.PublishNumber(paths[i%len(paths)], float64(skValueBase+v%skValueBase))
					if err != nil {
						errOnce.Do(func() { firstErr = err })
						break
					}
					n++
					continue
				}
				s := time.Now()
				err := st.PublishNumber(paths[i%len(paths)], float64(skValueBase+v%skValueBase))
				lats[g] = append(lats[g], int64(time.Since(s)))
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					break
				}
				n++
			}
			published.Add(n)
		})
	}
	stopSampler := startSampler(d.clk, d.sample, func() bool { return st.Status().BufferedBytes == 0 })
	timer := d.clk.NewTimer(duration)
	select {
	case <-timer.Chan():
	case <-ctx.Done():
	}
	timer.Stop()
	stop.Store(true)
	pcancel()
	wg.Wait()
	rep.Samples, rep.Idle = stopSampler()
	if firstErr != nil {
		return rep, fmt.Errorf("publish: %w", firstErr)
	}
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	if err := st.PublishNumber(skDonePath("dev"), float64(marker)); err != nil {
		return rep, fmt.Errorf("marker: %w", err)
	}
	if err := st.Flush(ctx, time.Minute); err != nil {
		return rep, fmt.Errorf("flush: %w", err)
	}
	after := st.Status()
	rep.Published = published.Load()
	// The marker went in its own message after the flush closed the last batch.
	rep.Messages = after.Sent - before.Sent - 1
	rep.Dropped = after.Dropped - before.Dropped
	for _, l := range lats {
		rep.LatenciesNS = append(rep.LatenciesNS, l...)
	}
	return rep, nil
}

// plainSide is a plain gorilla/websocket client on one connection, writing delta frames of a
// fixed number of values as fast as the socket takes them.
type plainSide struct {
	clk      clockwork.Clock
	conn     *websocket.Conn
	readDone chan struct{}
	perFrame int
	paths    []string
	sample   bool // run the sampler (-sk-sample)
}

func dialPlainSide(ctx context.Context, clk clockwork.Clock, o options, token string) (*plainSide, error) {
	su, err := url.Parse(o.skServer)
	if err != nil {
		return nil, fmt.Errorf("server URL: %w", err)
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+token)
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	u := "ws://" + net.JoinHostPort(su.Hostname(), su.Port()) + "/signalk/v1/stream?subscribe=none"
	conn, resp, err := d.DialContext(ctx, u, h)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", u, err)
	}
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, hello, err := conn.ReadMessage(); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("reading the hello: %w", err)
	} else if f, err := skstream.ParseFrame(hello); err != nil || f.Kind != skstream.FrameHello {
		_ = conn.Close()
		return nil, fmt.Errorf("first frame is not a hello: %s", hello)
	}
	_ = conn.SetReadDeadline(time.Time{})
	p := &plainSide{clk: clk, conn: conn, readDone: make(chan struct{}), perFrame: max(1, o.skPerFrame), sample: o.skSample}
	// Nothing is subscribed; reading keeps control frames answered until the socket closes.
	go func() {
		defer close(p.readDone)
		for {
			if _, _, err := conn.NextReader(); err != nil {
				return
			}
		}
	}()
	// The same number of distinct paths as the device's publishers cycle through, in turn, and
	// of the same width: the server's work per value depends on how many paths it keeps.
	tables := make([][]string, o.skPublishers)
	for g := range tables {
		tables[g] = skPathTable(fmt.Sprintf("pln%d", g))
	}
	for i := range skPaths {
		for _, t := range tables {
			p.paths = append(p.paths, t[i])
		}
	}
	return p, nil
}

func (p *plainSide) close() {
	_ = p.conn.Close()
	<-p.readDone
}

func (p *plainSide) publish(ctx context.Context, duration time.Duration, marker uint64) (rep skSideReport, err error) {
	var writing atomic.Bool
	stopSampler := startSampler(p.clk, p.sample, func() bool { return !writing.Load() })
	samplerStopped := false
	defer func() {
		if !samplerStopped {
			stopSampler()
		}
	}()
	end := p.clk.Now().Add(duration)
	var seq uint64
	frame := make([]byte, 0, 32*1024)
	for p.clk.Now().Before(end) && ctx.Err() == nil {
		frame = appendDeltaFrame(frame[:0], p.paths, seq, p.perFrame, p.clk.Now())
		writing.Store(true)
		_ = p.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		err := p.conn.WriteMessage(websocket.TextMessage, frame)
		writing.Store(false)
		if err != nil {
			return rep, fmt.Errorf("write: %w", err)
		}
		seq += uint64(p.perFrame)
		rep.Messages++
	}
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	rep.Samples, rep.Idle = stopSampler()
	samplerStopped = true
	done := fmt.Appendf(nil, `{"context":"vessels.self","updates":[{"source":{"label":"bench"},"values":[{"path":%q,"value":%d}]}]}`, skDonePath("plain"), marker)
	_ = p.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := p.conn.WriteMessage(websocket.TextMessage, done); err != nil {
		return rep, fmt.Errorf("write marker: %w", err)
	}
	rep.Published = seq
	return rep, nil
}
