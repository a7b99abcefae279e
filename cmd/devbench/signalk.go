package main

// The Signal K section measures publishing into the real signalk-server end to end:
//   - The device side is the device's own delta stream (host/skstream) built inside this
//     process with the settings given by -sk-batch-ms, pointed at the server with a token that
//     this process obtains through the server's access request flow (request, approve with the
//     admin account, poll). It is not bin/devhost: the device offers no way to publish at a
//     chosen rate from outside, so the stream is driven through its Go API, which is what the
//     device's own publishers call. The CPU figure is this process's CPU time while it runs.
//   - Publishers call PublishNumber in a loop. They pause for a millisecond whenever the
//     stream's queue holds more than half of its byte budget, so the rate reported is what the
//     stream sustains without dropping; any drop that happens anyway is reported and the
//     dropped messages' values are not counted as delivered.
//   - The anchor is a plain WebSocket client on one connection writing delta frames with the
//     same number of values per frame as the device's messages averaged, as fast as the socket
//     accepts them (10 s write deadline).
//   - Both sides end with a marker value; the run lasts until the server shows the marker
//     through its REST API, so values still in socket buffers are not counted as taken. The
//     server offers no per-connection acceptance count, so this read-back is the proof that
//     everything written before the marker was processed.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

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
	latencies []time.Duration // Publish call durations (device side only)
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

// valuesPerFrame is the average number of values in one message, at least 1.
func valuesPerFrame(values, messages uint64) int {
	if messages == 0 {
		return 1
	}
	return max(1, int((values+messages/2)/messages))
}

// skTargetMet reports whether the device reached skTarget of the plain client's rate.
func skTargetMet(device, plain float64) bool {
	return plain > 0 && device >= skTarget*plain
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
	dir, err := sktest.Dir()
	if err == nil {
		b.log.Info("installing or checking signalk-server", "dir", dir)
		err = sktest.Install(ctx, dir, nil)
	}
	var srv *sktest.Server
	if err == nil {
		srv, err = sktest.Start(ctx, sktest.Options{Dir: dir})
	}
	if err != nil {
		fmt.Fprintf(b.out, "Signal K: skipped, the server could not be started: %v\n\n", err)
		return nil
	}
	defer func() { _ = srv.Stop() }()

	token, err := b.skAccessToken(ctx, srv)
	if err != nil {
		return fmt.Errorf("signal k: %w\n--- server log:\n%s", err, srv.LogTail(20))
	}
	dev, err := b.skDeviceRun(ctx, srv, token)
	if err != nil {
		return fmt.Errorf("signal k device stream: %w", err)
	}
	perFrame := valuesPerFrame(dev.published, dev.messages+dev.dropped)
	plain, err := b.skPlainRun(ctx, srv, perFrame)
	if err != nil {
		return fmt.Errorf("signal k plain client: %w", err)
	}
	b.printSignalK(dev, plain, perFrame)
	return nil
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

func (b *bench) skDeviceRun(ctx context.Context, srv *sktest.Server, token string) (res skResult, err error) {
	set := skstream.DefaultSettings()
	set.BatchMS = b.opts.skBatchMs
	set.BufferMsgs = 1024
	set.BufferKB = 1024
	highWater := set.BufferKB * 1024 / 2
	st := skstream.New(skstream.Options{
		Clock:     b.clk,
		Logger:    b.log.With("component", "skstream"),
		Hostname:  "devbench",
		WallClock: func() (time.Time, bool) { return b.clk.Now(), true },
		Settings:  set,
	})
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer st.Close()
	st.SetTarget(&skstream.Target{URL: srv.URL(), Token: token})
	if err := st.Start(sctx); err != nil {
		return res, fmt.Errorf("start: %w", err)
	}
	deadline := b.clk.Now().Add(30 * time.Second)
	for !st.Connected() {
		if b.clk.Now().After(deadline) {
			return res, fmt.Errorf("not connected after 30 s (state %s, %s)", st.Status().State, st.Status().LastError)
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-b.clk.After(20 * time.Millisecond):
		}
	}
	b.log.Info("signal k: device stream connected; publishing", "duration", b.opts.skDuration, "publishers", b.opts.skPublishers)

	before := st.Status()
	cpu0, err := cpuTime()
	if err != nil {
		return res, err
	}
	t0 := b.clk.Now()
	var stop atomic.Bool
	var published atomic.Uint64
	var firstErr error
	var errOnce sync.Once
	lats := make([][]time.Duration, b.opts.skPublishers)
	var wg sync.WaitGroup
	for g := range b.opts.skPublishers {
		paths := skPathTable(fmt.Sprintf("dev%d", g))
		wg.Go(func() {
			var n uint64
			for i := 0; !stop.Load(); i++ {
				// Wait, without publishing, while the stream's queue is past half its
				// budget: a publisher faster than the server would otherwise only measure
				// the ring dropping its oldest messages, as it must.
				for i%64 == 0 && !stop.Load() && st.Status().BufferedBytes > highWater {
					b.clk.Sleep(time.Millisecond)
				}
				v := uint64(g)<<40 | uint64(i)
				s := b.clk.Now()
				err := st.PublishNumber(paths[i%len(paths)], float64(skValueBase+v%skValueBase))
				lats[g] = append(lats[g], b.clk.Since(s))
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					break
				}
				n++
			}
			published.Add(n)
		})
	}
	timer := b.clk.NewTimer(b.opts.skDuration)
	select {
	case <-timer.Chan():
	case <-ctx.Done():
	}
	timer.Stop()
	stop.Store(true)
	wg.Wait()
	if firstErr != nil {
		return res, fmt.Errorf("publish: %w", firstErr)
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	marker := skValueBase + uint64(t0.UnixNano()%skValueBase)
	if err := st.PublishNumber("bench.dev.done", float64(marker)); err != nil {
		return res, fmt.Errorf("marker: %w", err)
	}
	if err := st.Flush(ctx, time.Minute); err != nil {
		return res, fmt.Errorf("flush: %w", err)
	}
	if err := b.skWaitMarker(ctx, srv, "bench.dev.done", marker); err != nil {
		return res, err
	}
	res.elapsed = b.clk.Since(t0)
	cpu1, err := cpuTime()
	if err != nil {
		return res, err
	}
	after := st.Status()
	res.cpu = cpu1 - cpu0
	res.published = published.Load()
	// The marker went in its own message after the flush closed the last batch.
	res.messages = after.Sent - before.Sent - 1
	res.dropped = after.Dropped - before.Dropped
	res.delivered = deliveredValues(res.published, res.messages, res.dropped)
	for _, l := range lats {
		res.latencies = append(res.latencies, l...)
	}
	return res, nil
}

func (b *bench) skPlainRun(ctx context.Context, srv *sktest.Server, perFrame int) (res skResult, err error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+srv.AdminToken)
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	u := "ws://" + net.JoinHostPort(srv.Host, strconv.Itoa(srv.Port)) + "/signalk/v1/stream?subscribe=none"
	conn, resp, err := d.DialContext(ctx, u, h)
	if err != nil {
		return res, fmt.Errorf("dial %s: %w", u, err)
	}
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, hello, err := conn.ReadMessage(); err != nil {
		return res, fmt.Errorf("reading the hello: %w", err)
	} else if f, err := skstream.ParseFrame(hello); err != nil || f.Kind != skstream.FrameHello {
		return res, fmt.Errorf("first frame is not a hello: %s", hello)
	}
	_ = conn.SetReadDeadline(time.Time{})
	// Nothing is subscribed; reading keeps control frames answered until the socket closes.
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			if _, _, err := conn.NextReader(); err != nil {
				return
			}
		}
	}()
	defer func() { _ = conn.Close(); <-readDone }()

	b.log.Info("signal k: plain client connected; writing", "duration", b.opts.skDuration, "values_per_frame", perFrame)
	cpu0, err := cpuTime()
	if err != nil {
		return res, err
	}
	t0 := b.clk.Now()
	end := t0.Add(b.opts.skDuration)
	var seq uint64
	paths := skPathTable("plain")
	frame := make([]byte, 0, 32*1024)
	for b.clk.Now().Before(end) && ctx.Err() == nil {
		frame = appendDeltaFrame(frame[:0], paths, seq, perFrame, b.clk.Now())
		_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
			return res, fmt.Errorf("write: %w", err)
		}
		seq += uint64(perFrame)
		res.messages++
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	marker := skValueBase + uint64(t0.UnixNano()%skValueBase)
	done := fmt.Appendf(nil, `{"context":"vessels.self","updates":[{"source":{"label":"bench"},"values":[{"path":"bench.plain.done","value":%d}]}]}`, marker)
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if err := conn.WriteMessage(websocket.TextMessage, done); err != nil {
		return res, fmt.Errorf("write marker: %w", err)
	}
	if err := b.skWaitMarker(ctx, srv, "bench.plain.done", marker); err != nil {
		return res, err
	}
	res.elapsed = b.clk.Since(t0)
	cpu1, err := cpuTime()
	if err != nil {
		return res, err
	}
	res.cpu = cpu1 - cpu0
	res.published, res.delivered = seq, seq
	return res, nil
}

func (b *bench) printSignalK(dev, plain skResult, perFrame int) {
	lats := slices.Clone(dev.latencies)
	slices.Sort(lats)
	var worst time.Duration
	if len(lats) > 0 {
		worst = lats[len(lats)-1]
	}
	fmt.Fprintf(b.out, "device side: host/skstream in this process (the device's stream, driven through its Go API), sk.batch_ms %d, %d publishers\n",
		b.opts.skBatchMs, b.opts.skPublishers)
	fmt.Fprintf(b.out, "plain side:  one gorilla/websocket connection, admin token, %d values per frame (the device's average)\n", perFrame)
	fmt.Fprintf(b.out, "each run: %v of publishing, then until the server shows a final marker value (REST read-back)\n", b.opts.skDuration)
	fmt.Fprintf(b.out, "values/s plain client:  %.0f (%d values in %d frames, %s; CPU %.3f ms per 1000 values)\n",
		plain.rate(), plain.delivered, plain.messages, fmtDuration(plain.elapsed), cpuPer1k(plain.cpu, plain.delivered))
	fmt.Fprintf(b.out, "values/s device stream: %.0f (%d published, %d messages sent, %d dropped, %s)\n",
		dev.rate(), dev.published, dev.messages, dev.dropped, fmtDuration(dev.elapsed))
	fmt.Fprintf(b.out, "ratio device / plain:   %s\n", ratio(dev.rate(), plain.rate()))
	fmt.Fprintf(b.out, "device CPU:             %.3f ms per 1000 values/s (CPU ms per second of run per 1000 values/s; %s CPU in total)\n",
		cpuPer1k(dev.cpu, dev.delivered), fmtDuration(dev.cpu))
	fmt.Fprintf(b.out, "Publish call latency:   p50 %s, p99 %s, worst %s over %d calls\n",
		fmtDuration(percentile(lats, 0.50)), fmtDuration(percentile(lats, 0.99)), fmtDuration(worst), len(lats))
	verdict := "met"
	if !skTargetMet(dev.rate(), plain.rate()) {
		verdict = "NOT met"
	}
	fmt.Fprintf(b.out, "Signal K target (device values/s >= %.2f of the plain client's): %s (%s)\n\n",
		skTarget, verdict, ratio(dev.rate(), plain.rate()))
}
