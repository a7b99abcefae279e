package main

// devctl n2k decode [--format auto|candump|analyzer|actisense|ydraw|ikonvert] [--module WASM] FILE
//
// runs the n2k plugin, the same module the device loads, in the device's plugin host
// (host/plugin) over a log: the log's frames are fed to the plugin through a CAN bus that
// stands in for the board's, whole messages of formats that carry them (analyzer, Actisense
// N2K ASCII, iKonvert) are split back into the frames that carry them on the bus (single,
// fast-packet or ISO transport). The plugin runs with f_n2k {enabled, deltas} and every
// n2k_delta event it sends is printed on stdout, one Signal K delta a line, in the shape
// n2k-signalk emits (the plugin sends them in arrays). The counts (frames, messages, deltas, errors by kind) go to stderr.
// Without --module the plugin is built from the source tree (plugins/n2k) first.
//
// A delta's timestamp is the time of the log line of its message's last frame where the
// line gives a date and time (candump -l/-L, canboat's analyzer text), as canboatjs passes
// the analyzer's time on to n2k-signalk; lines with a time of day only (Yacht Devices RAW,
// Actisense N2K ASCII) or none keep the time of decoding, as canboatjs does for them (and,
// unable to read them, for candump -L's and the analyzer's older form). The plugin marks
// each delta of its n2k_delta events with the number of the frame that completed it (member
// frame), which maps it to its line.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"crypto/rsa"

	"github.com/jonboulle/clockwork"

	"devhost/abi"
	"devhost/host/api"
	"devhost/host/board"
	"devhost/host/plugin"
	"devhost/host/sk"
	"devhost/plugins"
	"devhost/plugins/n2k/decode"
	"devhost/plugins/n2k/input"
)

const n2kDecodeUsage = `usage:
  devctl n2k decode [--format auto|candump|analyzer|actisense|ydraw|ikonvert] [--module WASM] FILE

Runs the n2k plugin (built from plugins/n2k, or --module) in a plugin host of its own over
the log FILE and prints one Signal K delta a line on stdout, in the shape n2k-signalk
emits; the counts (lines not understood, frames, messages, deltas, errors by kind) go to
stderr. --format auto tells the format from the first lines.

Timestamps: a delta carries the time of the log line of its message's last frame where the
line has a date and time (candump -l/-L "(1545078318.123456)", the analyzer's
"2017-04-15T16:18:45.303Z,..." or "2017-04-15-16:18:45.303,..."), in UTC to the
millisecond. A line with a time of day only (Yacht Devices RAW "16:29:27.082", Actisense
N2K ASCII "A162927.082") or none (plain candump, iKonvert) names no day: its deltas carry
the time they were decoded.
`

func (a *app) n2k(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "decode" {
		return usagef("n2k: the subcommand is decode")
	}
	fs := newFlags("n2k decode")
	format := fs.String("format", "auto", "auto, candump, analyzer, actisense, ydraw or ikonvert")
	module := fs.String("module", "", "the plugin module (default: build plugins/n2k)")
	if err := parse(fs, args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &helpError{n2kDecodeUsage}
		}
		return err
	}
	if fs.NArg() != 1 {
		return usagef("n2k decode: one log file")
	}
	frames, bad, det, err := readLog("n2k decode", fs.Arg(0), input.Format(*format))
	if err != nil {
		return err
	}
	wasm, err := n2kModule(ctx, *module)
	if err != nil {
		return err
	}
	st, err := runN2K(ctx, wasm, frames, a.stdout)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "n2k decode: format %s, %d lines not understood, %d frames in, %d messages, %d deltas, %.2f s CPU\n",
		det, bad, st.FramesIn, st.Messages, st.Deltas, st.feedCPU.Seconds())
	keys := make([]string, 0, len(st.Errors))
	for k := range st.Errors {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(a.stderr, "n2k decode: errors %s %d\n", k, st.Errors[k])
	}
	return nil
}

// detectLines is how many of a log's first lines --format auto reads to tell its format.
const detectLines = 20

// readLog parses a log into the frames that carried it on the bus. what names the command
// in its errors. A log with lines of which none is understood is an error naming the
// format and the first such line, so that a wrong --format or a file that is no log does
// not pass for an empty one.
func readLog(what, path string, format input.Format) ([]decode.Frame, int, input.Format, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, "", fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, 0, "", fmt.Errorf("%s: %s: %w", what, path, err)
	}
	auto := format == input.Auto || format == ""
	if auto {
		format = input.Detect(lines[:min(len(lines), detectLines)])
	}
	p, err := input.NewParser(format)
	if err != nil {
		return nil, 0, "", usagef("%s: %v", what, err)
	}
	var frames []decode.Frame
	bad := 0
	var firstBad error
	seq := map[[2]uint32]uint8{} // fast-packet sequence counter per source and PGN
	for _, l := range lines {
		r, err := p.Parse(l)
		switch {
		case errors.Is(err, input.ErrSkip):
			continue
		case err != nil:
			bad++
			if firstBad == nil {
				firstBad = err
			}
			continue
		case r.Frame != nil:
			frames = append(frames, *r.Frame)
		default:
			k := [2]uint32{uint32(r.Msg.Src), r.Msg.PGN}
			fr := decode.Frames(*r.Msg, seq[k], nil)
			if fr == nil {
				bad++
				continue
			}
			seq[k]++
			frames = append(frames, fr...)
		}
	}
	if len(frames) == 0 && bad > 0 {
		if auto {
			return nil, bad, format, fmt.Errorf("%s: %s: none of its first %d lines is in a format devctl reads (%v): %w",
				what, path, detectLines, input.Formats, firstBad)
		}
		return nil, bad, format, fmt.Errorf("%s: %s: none of its %d lines is in format %s (--format auto tells it from the first lines): %w",
			what, path, bad, format, firstBad)
	}
	return frames, bad, format, nil
}

// n2kModule answers the plugin module: the file given, or plugins/n2k built now.
func n2kModule(ctx context.Context, path string) ([]byte, error) {
	if path == "" {
		dir, err := os.MkdirTemp("", "devctl-n2k-")
		if err != nil {
			return nil, fmt.Errorf("n2k decode: %w", err)
		}
		defer os.RemoveAll(dir)
		path = filepath.Join(dir, "n2k.wasm")
		if err := plugins.Build(ctx, "n2k", path); err != nil {
			return nil, fmt.Errorf("n2k decode: %w", err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("n2k decode: %w", err)
	}
	return b, nil
}

// n2kStatus is the part of GET /n2k/status devctl reads.
type n2kStatus struct {
	State    string            `json:"state"`
	FramesIn uint64            `json:"frames_in"`
	Messages uint64            `json:"messages"`
	Deltas   uint64            `json:"deltas"`
	Errors   map[string]uint64 `json:"errors"`
	// feedCPU is the process CPU time while the frames were fed and decoded.
	feedCPU time.Duration
}

// n2kHost is the n2k plugin installed and running in a plugin host of its own, its CAN bus
// fed by the caller: what `n2k decode` and the live-bus bench run the plugin in.
type n2kHost struct {
	m      *plugin.Manager
	bus    *logBus
	router *captureRouter
	stop   func() // ends the host and removes its folder
}

// startN2K installs the plugin module wasm, signed by a key made for the run, in a new
// plugin host and runs it with the gateway enabled on the CAN source; deltas sets whether
// it sends its n2k_delta events to publish.
func startN2K(ctx context.Context, wasm []byte, deltas bool, publish func(string, any)) (*n2kHost, error) {
	_, man, err := plugins.Manifest("n2k")
	if err != nil {
		return nil, err
	}
	key, err := abi.GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("key: %w", err)
	}
	bundle, err := abi.Pack(man, wasm, key)
	if err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	dir, err := os.MkdirTemp("", "devctl-n2k-host-")
	if err != nil {
		return nil, err
	}
	h := &n2kHost{bus: &logBus{}, router: &captureRouter{}}
	// Compiled code is kept between runs in the user's cache (the module compiles in seconds).
	var cache string
	if c, err := os.UserCacheDir(); err == nil {
		cache = filepath.Join(c, "devhost", "plugin-code")
	}
	h.m, err = plugin.New(plugin.Options{
		Dir: dir, CacheDir: cache, TrustedKeys: []*rsa.PublicKey{&key.PublicKey},
		Logger: slog.New(slog.DiscardHandler), Publish: publish, DeviceID: "devctl",
		Config: &fixedConfig{values: json.RawMessage(
			fmt.Sprintf(`{"enabled":true,"source":"can","pgn_allow":"","pgn_deny":"","deltas":%t}`, deltas))},
		Router:    h.router,
		WallClock: func() (time.Time, string, bool) { return time.Now(), "manual", true },
		CAN:       h.bus,
		SignalK:   discardSK{},
		// A tool run on a busy machine: a chunk of frames may take longer than the
		// device's 1 s, which would end the plugin without saying anything about it.
		CallTimeout: 30 * time.Second,
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("plugin host: %w", err)
	}
	if _, err := h.m.Install(bundle, nil); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("install: %w", err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- h.m.Run(runCtx) }()
	h.stop = func() {
		cancel()
		<-done
		os.RemoveAll(dir)
	}
	return h, nil
}

// failed answers why the plugin stopped for good (disabled or failed), or nil while it
// runs or loads.
func (h *n2kHost) failed() error {
	s, ok := h.m.Status("n2k")
	if !ok || (s.State != plugin.StateDisabled && s.State != plugin.StateFailed) {
		return nil
	}
	reason := ""
	if s.LastError != nil {
		reason = *s.LastError
	}
	return fmt.Errorf("plugin %s: %s", s.State, reason)
}

// runN2K runs the plugin in a plugin host of its own over frames and copies its delta
// events to out.
func runN2K(ctx context.Context, wasm []byte, frames []decode.Frame, out io.Writer) (n2kStatus, error) {
	w := bufio.NewWriterSize(out, 64<<10)
	var outMu sync.Mutex
	var writeErr error
	var stampBuf []byte // a delta restamped, under outMu
	publish := func(name string, data any) {
		if name != "n2k_delta" {
			return
		}
		raw, ok := data.(json.RawMessage)
		if !ok {
			return
		}
		deltas, ok := splitArray(raw)
		if !ok {
			return
		}
		outMu.Lock()
		defer outMu.Unlock()
		for _, d := range deltas {
			d, stampBuf = logStamped(stampBuf[:0], d, frames)
			_, err := w.Write(d)
			if err == nil {
				err = w.WriteByte('\n')
			}
			if err != nil && writeErr == nil {
				writeErr = err
			}
		}
	}
	h, err := startN2K(ctx, wasm, true, publish)
	if err != nil {
		return n2kStatus{}, fmt.Errorf("n2k decode: %w", err)
	}
	defer h.stop()
	bus, router := h.bus, h.router

	status := func() (n2kStatus, bool) {
		h := router.handler("GET", "/n2k/status")
		if h == nil {
			return n2kStatus{}, false
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(ctx, "GET", "/api/v1/n2k/status", nil)
		h(rec, req)
		var st n2kStatus
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &st) != nil {
			return n2kStatus{}, false
		}
		return st, true
	}
	// wait polls until cond holds, the plugin failed, or ctx ends.
	wait := func(cond func(n2kStatus) bool) (n2kStatus, error) {
		for {
			if st, ok := status(); ok && cond(st) {
				return st, nil
			}
			if err := h.failed(); err != nil {
				return n2kStatus{}, fmt.Errorf("n2k decode: %w", err)
			}
			select {
			case <-ctx.Done():
				return n2kStatus{}, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if _, err := wait(func(st n2kStatus) bool { return st.State != "disabled" && bus.receiving() }); err != nil {
		return n2kStatus{}, err
	}
	// Feed in chunks, each followed by a status request: the plugin's events keep their
	// order, so the answer comes once the chunk's frames were handled (a frame the host
	// could not queue would leave frames_in short: then wait polls).
	const chunk = 1024
	var st n2kStatus
	cpu0 := processCPU()
	for i := 0; i < len(frames); i += chunk {
		end := min(i+chunk, len(frames))
		for _, f := range frames[i:end] {
			bus.deliver(plugin.CANFrame{ID: f.ID, Extended: true, Data: f.Data})
		}
		want := uint64(end)
		if st, err = wait(func(st n2kStatus) bool { return st.FramesIn >= want }); err != nil {
			return n2kStatus{}, err
		}
	}
	if len(frames) == 0 {
		st, _ = status()
	}
	st.feedCPU = processCPU() - cpu0
	outMu.Lock()
	defer outMu.Unlock()
	if writeErr != nil {
		return st, fmt.Errorf("n2k decode: %w", writeErr)
	}
	if err := w.Flush(); err != nil {
		return st, fmt.Errorf("n2k decode: %w", err)
	}
	return st, nil
}

// splitArray answers the elements of a JSON array of objects, as they are written, and
// whether raw was one. The plugin host let the event through only as valid JSON, so the
// split only follows nesting and strings: json.Unmarshal into []json.RawMessage checked
// and scanned every byte twice more, about a tenth of the decoder's own time.
func splitArray(raw []byte) ([][]byte, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '[' || raw[len(raw)-1] != ']' {
		return nil, false
	}
	var out [][]byte
	depth, start, inString := 0, -1, false
	for i := 1; i < len(raw)-1; i++ {
		c := raw[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth == 0 {
				start = i
			}
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 && start >= 0 {
				out = append(out, raw[start:i+1])
				start = -1
			}
		}
	}
	return out, depth == 0 && !inString
}

// frameMember is how the plugin marks a delta of its n2k_delta events with the number of
// the CAN frame that completed its message: the object's last member.
const frameMember = `,"frame":`

// logStamped answers delta d as it is printed: without the plugin's frame member and, when
// the frame it names came from a log line with a time, with that time for the decoding time
// the plugin stamped (the update's timestamp and a value's own, a notification's, which is
// the update's). buf is room for the result; the second answer is buf grown.
func logStamped(buf, d []byte, frames []decode.Frame) ([]byte, []byte) {
	i := bytes.LastIndex(d, []byte(frameMember))
	if i < 0 || d[len(d)-1] != '}' {
		return d, buf
	}
	n, err := strconv.ParseUint(string(d[i+len(frameMember):len(d)-1]), 10, 64)
	if err != nil {
		return d, buf
	}
	buf = append(append(buf, d[:i]...), '}')
	if n == 0 || n > uint64(len(frames)) || frames[n-1].Time == "" {
		return buf, buf
	}
	const key = `"timestamp":"`
	j := bytes.Index(buf, []byte(key))
	if j < 0 {
		return buf, buf
	}
	end := bytes.IndexByte(buf[j+len(key):], '"')
	if end < 0 {
		return buf, buf
	}
	stamp, old := frames[n-1].Time, buf[j:j+len(key)+end+1]
	if end != len(stamp) {
		out := bytes.ReplaceAll(buf, old, []byte(key+stamp+`"`))
		return out, buf
	}
	// The same length (both to the millisecond, in UTC): written over in place, without a
	// new copy of the delta.
	var was [64]byte
	old = append(was[:0], old...)
	for k := j; k >= 0; {
		copy(buf[k+len(key):], stamp)
		next := bytes.Index(buf[k+len(old):], old)
		if next < 0 {
			break
		}
		k += len(old) + next
	}
	return buf, buf
}

// processCPU answers the CPU time (user and system) this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// logBus is the CAN bus the plugin listens to: the log's frames.
type logBus struct {
	mu sync.Mutex
	fn func(plugin.CANFrame)
}

func (b *logBus) Send(plugin.CANFrame) error { return nil }

func (b *logBus) Receive(fn func(plugin.CANFrame)) (func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fn = fn
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.fn = nil
	}, nil
}

func (b *logBus) receiving() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fn != nil
}

func (b *logBus) deliver(f plugin.CANFrame) {
	b.mu.Lock()
	fn := b.fn
	b.mu.Unlock()
	if fn != nil {
		fn(f)
	}
}

// captureRouter keeps the plugin's routes so devctl can call them directly.
type captureRouter struct {
	mu     sync.Mutex
	routes []api.Route
}

func (r *captureRouter) AddApp(_ string, routes ...api.Route) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.routes = append(r.routes, routes...)
	return nil
}

func (r *captureRouter) RemoveApp(string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.routes = nil
}

func (r *captureRouter) handler(method, path string) http.HandlerFunc {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rt := range r.routes {
		if rt.Method == method && rt.Path == path {
			return rt.Handler
		}
	}
	return nil
}

// discardSK is a Signal K client that takes the values and forgets them.
type discardSK struct{}

func (discardSK) Publish(...sk.Value) error                             { return nil }
func (discardSK) PublishContext(string, ...sk.Value) error              { return nil }
func (discardSK) PublishSource(sk.Source, string, ...sk.Value) error    { return nil }
func (discardSK) DeclareMeta(string, json.RawMessage) error             { return nil }
func (discardSK) Put(string, json.RawMessage, func(sk.PutAnswer)) error { return nil }
func (discardSK) Subscribe(string, func(sk.Delta)) (func(), error) {
	return func() {}, nil
}
func (discardSK) HandlePut(string, sk.PutHandler) (func(), error) { return func() {}, nil }

// fixedConfig is the plugin's namespace with fixed values.
type fixedConfig struct{ values json.RawMessage }

func (c *fixedConfig) Register(id string, _ []byte) (string, error) { return "f_" + id, nil }
func (c *fixedConfig) Unregister(string) error                      { return nil }
func (c *fixedConfig) Purge(string) error                           { return nil }
func (c *fixedConfig) Values(string) (json.RawMessage, error)       { return c.values, nil }

// boardCAN is `devctl board can replay --file FILE [--format F] [--speed X | --max]`: it
// plays a log's frames onto the running device's simulated CAN bus through the board's
// control channel, at the log's recorded pace scaled by --speed (frames of a log without
// times go as fast as possible), or as fast as possible with --max. It prints how many
// frames went on the bus.
func (a *app) boardCAN(ctx context.Context, tgt boardTarget, args []string) error {
	if len(args) > 0 && args[0] == "capture" {
		return a.boardCANCapture(ctx, tgt, args[1:])
	}
	if len(args) == 0 || args[0] != "replay" {
		return usagef("board can: the subcommand is replay or capture")
	}
	fs := newFlags("board can replay")
	var late boardTarget
	late.register(fs)
	file := fs.String("file", "", "the log to play")
	format := fs.String("format", "auto", "auto, candump, analyzer, actisense, ydraw or ikonvert")
	speed := fs.Float64("speed", 1, "pace: 2 plays twice as fast as recorded")
	fastest := fs.Bool("max", false, "as fast as possible")
	if err := parseNoArgs(fs, args[1:]); err != nil {
		return err
	}
	if *file == "" {
		return usagef("board can replay: --file is required")
	}
	if *speed <= 0 || setFlags(fs)["speed"] && *fastest {
		return usagef("board can replay: --speed must be positive, and not given with --max")
	}
	sock, err := tgt.pathWith(late)
	if err != nil {
		return err
	}
	frames, bad, det, err := readLog("board can replay", *file, input.Format(*format))
	if err != nil {
		return err
	}
	c := board.Dial(sock)
	clk := a.clock
	if clk == nil {
		clk = clockwork.NewRealClock()
	}
	start := clk.Now()
	var first time.Time
	for i, f := range frames {
		if !*fastest && f.Time != "" {
			t, err := time.Parse(time.RFC3339Nano, f.Time)
			if err == nil {
				if first.IsZero() {
					first = t
				}
				due := start.Add(time.Duration(float64(t.Sub(first)) / *speed))
				if wait := due.Sub(clk.Now()); wait > 0 {
					select {
					case <-ctx.Done():
						return ctx.Err()
					case <-clk.After(wait):
					}
				}
			}
		}
		if _, err := c.InjectCAN(ctx, board.CANFrame{ID: f.ID, Extended: true, Data: f.Data}); err != nil {
			return fmt.Errorf("board can replay: frame %d: %w", i+1, err)
		}
	}
	_, err = fmt.Fprintf(a.stdout, "replayed %d frames (format %s, %d lines not understood)\n", len(frames), det, bad)
	return err
}

// capturePoll is how often capture reads the board's last sent frames.
const capturePoll = 50 * time.Millisecond

// boardCANCapture is `devctl board can capture [--count N] [--timeout S]`: it prints the
// frames the device sends on the simulated bus from now on, in candump -L form
// ("(SECONDS.MICROS) can0 ID#DATA", stamped when seen), until N frames (0: no limit) or S
// seconds (0: no limit) or an interrupt. The board shows its last 64 sent frames; capture
// reads them every 50 ms and prints those after the part it already saw, and says on
// stderr when more than 64 came between two reads.
func (a *app) boardCANCapture(ctx context.Context, tgt boardTarget, args []string) error {
	fs := newFlags("board can capture")
	var late boardTarget
	late.register(fs)
	count := fs.Int("count", 0, "stop after this many frames (0: no limit)")
	timeout := fs.Float64("timeout", 0, "stop after this many seconds (0: no limit)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *count < 0 || *timeout < 0 {
		return usagef("board can capture: --count and --timeout must not be negative")
	}
	sock, err := tgt.pathWith(late)
	if err != nil {
		return err
	}
	clk := a.clock
	if clk == nil {
		clk = clockwork.NewRealClock()
	}
	c := board.Dial(sock)
	st, err := c.State(ctx)
	if err != nil {
		return err
	}
	prev := st.Radios.CANSent
	var deadline <-chan time.Time
	if *timeout > 0 {
		deadline = clk.After(time.Duration(*timeout * float64(time.Second)))
	}
	printed := 0
	for *count == 0 || printed < *count {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return nil
		case <-clk.After(capturePoll):
		}
		st, err := c.State(ctx)
		if err != nil {
			return err
		}
		cur := st.Radios.CANSent
		fresh, whole := newFrames(prev, cur)
		if !whole {
			fmt.Fprintf(a.stderr, "devctl: board can capture: frames may have been missed (more than %d between reads)\n", len(cur))
		}
		now := clk.Now()
		for _, f := range fresh {
			if *count > 0 && printed == *count {
				break
			}
			if _, err := fmt.Fprintln(a.stdout, candumpLine(now, f)); err != nil {
				return err
			}
			printed++
		}
		prev = cur
	}
	return nil
}

// newFrames answers the frames of cur after the longest run of cur's start that ends prev
// (the board's list is a window sliding over the frames sent), and whether that run was
// found (false: the window moved past everything seen, frames may be missing).
func newFrames(prev, cur []board.CANFrame) ([]board.CANFrame, bool) {
	for k := min(len(prev), len(cur)); k > 0; k-- {
		if sameFrames(prev[len(prev)-k:], cur[:k]) {
			return cur[k:], true
		}
	}
	return cur, len(prev) == 0 || len(cur) == 0
}

func sameFrames(a, b []board.CANFrame) bool {
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Extended != b[i].Extended || a[i].Remote != b[i].Remote || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

// candumpLine writes a frame as candump -L does: (seconds.micros) can0 ID#DATA, the id in
// 8 hex digits when extended, 3 otherwise, R for a remote frame.
func candumpLine(t time.Time, f board.CANFrame) string {
	id := fmt.Sprintf("%03X", f.ID)
	if f.Extended {
		id = fmt.Sprintf("%08X", f.ID)
	}
	data := fmt.Sprintf("%X", f.Data)
	if f.Remote {
		data = "R"
	}
	return fmt.Sprintf("(%d.%06d) can0 %s#%s", t.Unix(), t.Nanosecond()/1000, id, data)
}
