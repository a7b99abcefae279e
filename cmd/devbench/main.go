// Command devbench measures the device's HTTP speed side by side with an anchor in one run and
// prints the ratios. It never judges a timing: besides the numbers it only says whether the ping
// target (device at least 0.70 of the anchor's requests per second) was met, and it exits 0
// whenever the measurement itself could be made.
//
//	go run ./cmd/devbench [-devhost bin/devhost] [-duration 3s] [-rounds 3] [-puts 300] ...
//
// What it does, in one run:
//   - starts bin/devhost on a fresh data directory in a temporary folder with a factory document
//     that sets a free loopback port and an API key, and waits for its listening line;
//   - fetches GET /api/v1/system/ping, an authenticated GET /api/v1/config and one PUT
//     /api/v1/config answer from it, and starts the anchor: a bare net/http server that answers
//     the same requests with exactly those bytes;
//   - loads each GET target over loopback with the same load generator settings, anchor and
//     device alternating, several rounds, and prints the medians and the device/anchor ratios;
//   - times sequential PUT /api/v1/config writes with changing values (each one a real, durable
//     write) against the bare handler answering the same PUT and against a raw write+fsync of a
//     small record in the same folder, and prints the ratios;
//   - prints the resident memory of the anchor and of the device at rest (once the device's
//     plugins have left their loading state) and after the load;
//   - unless -signalk=false, starts the real signalk-server (host/signalk/sktest) and measures
//     values per second published into it by the device's delta stream (host/skstream, driven
//     through its Go API with sk.batch_ms from -sk-batch-ms) beside a plain WebSocket client
//     writing frames of the same size, each side in a process of its own (devbench -sk-side),
//     with each side's CPU per 1000 values/s and the Publish call latency; a server that
//     cannot be started skips this with a printed line. signalk.go says how each side is
//     measured;
//   - unless -boots 0, times whole boots of bin/devhost: to the first 200 on the ping and, with
//     the server, to the device's Signal K stream open (boot.go says how);
//   - with -json FILE, writes every figure beside its baseline and the machine as JSON
//     (report.go); -merge -gobench OUT adds the output of Go benchmarks to that file
//     afterwards (gobench.go), which is how `make bench BENCH_JSON=FILE` collects the rest.
//
// Choices where nothing else decides:
//   - The anchor is a separate process (devbench re-executed with -serve-anchor), because the
//     device is one too: both pay the same scheduling and loopback costs. It copies the device's
//     status, headers (all but Date and the hop-by-hop ones) and body, and frames the body the
//     same way (Content-Length when the device sent one, chunked otherwise), so both put the same
//     bytes on the wire. It does no authentication: that cost is part of what is measured.
//   - The load generator is Debian's wrk (`make bench` installs it); without it a closed-loop Go
//     client with keep-alive connections stands in and the report says so. The Go client runs in
//     this process, so its numbers are lower than wrk's for both sides; only ratios compare.
//   - Rounds alternate which side goes first, so warm-up and drift do not favour one side; each
//     target and side gets one unrecorded warm-up run first. The reported figure is the median
//     over rounds; every round's req/s is printed too.
//   - The PUT measurements are interleaved (device, bare handler, raw fsync, rotating the order
//     each iteration) on one keep-alive connection per server. The fsync file lives beside the
//     device's data directory, and the report names that folder's file system, since fsync on a
//     tmpfs costs nothing.
//   - The device's log goes to a file in the temporary folder (printed when it fails to start);
//     the device is stopped with SIGTERM and, in any case, its process group is killed at the end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command-line settings.
type options struct {
	devhost      string
	load         schedule // the HTTP section's load runs
	threads      int
	conns        int
	puts         int
	key          string
	loadgen      string
	tmp          string
	keep         bool
	startTimeout time.Duration
	serveAnchor  string
	http         bool
	signalk      bool
	sk           schedule // the Signal K section's publishing runs
	skBatchMs    int
	skPublishers int
	jsonOut      string
	gobench      []string
	merge        bool
	boots        int
	skPublish    bool
	// A Signal K side process (skside.go): which side, the server, the plain side's frame size.
	skSide     string
	skServer   string
	skPerFrame int
	skProfile  string
	skSample   bool
}

// schedule is how a section measures: a warm-up run per side (0: none), then rounds of one
// run per side, each duration long.
type schedule struct {
	duration, warmup time.Duration
	rounds           int
}

// check refuses a schedule that measures nothing; prefix is its flags' prefix.
func (s schedule) check(prefix string) error {
	switch {
	case s.duration <= 0:
		return fmt.Errorf("-%sduration must be positive", prefix)
	case s.warmup < 0:
		return fmt.Errorf("-%swarmup must not be negative", prefix)
	case s.rounds < 1:
		return fmt.Errorf("-%srounds must be at least 1", prefix)
	}
	return nil
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("devbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: devbench [options]  (measures bin/devhost against a bare net/http anchor)")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.devhost, "devhost", "bin/devhost", "device binary to measure")
	fs.DurationVar(&o.load.duration, "duration", 3*time.Second, "length of one load run (wrk: whole seconds)")
	fs.DurationVar(&o.load.warmup, "warmup", time.Second, "unrecorded warm-up run per target and side (0: none)")
	fs.IntVar(&o.load.rounds, "rounds", 3, "load rounds per target and side; the median is reported")
	fs.IntVar(&o.threads, "threads", 2, "load generator threads")
	fs.IntVar(&o.conns, "connections", 16, "keep-alive connections held open by the load generator")
	fs.IntVar(&o.puts, "puts", 300, "sequential PUT /config writes per measured side")
	fs.StringVar(&o.key, "key", "bench-key-123", "API key given to the device in its factory document")
	fs.StringVar(&o.loadgen, "loadgen", "auto", "load generator: auto (wrk if installed), wrk, go")
	fs.StringVar(&o.tmp, "tmp", "", "folder for the temporary data directory (default: the system's)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary folder (device log and data) at the end")
	fs.DurationVar(&o.startTimeout, "start-timeout", time.Minute, "how long the device may take to answer")
	fs.StringVar(&o.serveAnchor, "serve-anchor", "", "internal: serve the anchor from this answers file")
	fs.BoolVar(&o.http, "http", true, "measure the device's HTTP API against the bare anchor (false: only the Signal K section)")
	fs.BoolVar(&o.signalk, "signalk", true, "measure publishing into the real signalk-server (skipped when it cannot start)")
	fs.DurationVar(&o.sk.duration, "sk-duration", 5*time.Second, "length of each Signal K publishing run")
	fs.DurationVar(&o.sk.warmup, "sk-warmup", 2*time.Second, "unrecorded Signal K run of each side before the rounds (0: none)")
	fs.IntVar(&o.sk.rounds, "sk-rounds", 6, "Signal K rounds, alternating which side goes first (an even count gives each side the lead equally); medians are reported")
	fs.IntVar(&o.skBatchMs, "sk-batch-ms", 100, "sk.batch_ms of the device stream in the Signal K runs")
	fs.IntVar(&o.skPublishers, "sk-publishers", 2, "goroutines publishing into the device stream")
	fs.StringVar(&o.jsonOut, "json", "", "also write every figure, with its baseline and the machine, as JSON to this file")
	fs.Func("gobench", "text output of `go test -bench` to add to the -json report (repeatable)", func(v string) error {
		o.gobench = append(o.gobench, v)
		return nil
	})
	fs.BoolVar(&o.merge, "merge", false, "measure nothing: add the -gobench results to the report already in the -json file")
	fs.BoolVar(&o.skPublish, "sk-publish", true, "with -signalk, measure publishing into signalk-server (false: the server is only used for boot.sk_stream_open)")
	fs.StringVar(&o.skSide, "sk-side", "", "internal: run one side of the Signal K section (dev or plain) in this process")
	fs.StringVar(&o.skServer, "sk-server", "", "internal: with -sk-side, the signalk-server's http URL")
	fs.IntVar(&o.skPerFrame, "sk-per-frame", 1, "internal: with -sk-side plain, values per frame")
	fs.StringVar(&o.skProfile, "sk-profile", "", "write a CPU profile of each Signal K side process, over the span its CPU is counted, into this folder (<side>-<pid>.pprof)")
	fs.BoolVar(&o.skSample, "sk-sample", false, "internal: with -sk-side, sample every 10 ms whether the side has nothing for the socket")
	fs.IntVar(&o.boots, "boots", 5, "device boots timed for boot.first_200 and boot.sk_stream_open (0: none)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.serveAnchor != "" {
		return o, nil
	}
	if o.merge && o.jsonOut == "" {
		return o, errors.New("-merge needs -json FILE")
	}
	if err := o.load.check(""); err != nil {
		return o, err
	}
	if err := o.sk.check("sk-"); err != nil {
		return o, err
	}
	switch {
	case o.threads < 1:
		return o, errors.New("-threads must be at least 1")
	case o.conns < o.threads:
		return o, errors.New("-connections must be at least -threads")
	case o.puts < 1:
		return o, errors.New("-puts must be at least 1")
	case o.key == "":
		return o, errors.New("-key must not be empty")
	case o.startTimeout <= 0:
		return o, errors.New("-start-timeout must be positive")
	case o.skBatchMs < 0:
		return o, errors.New("-sk-batch-ms must not be negative")
	case o.skPublishers < 1:
		return o, errors.New("-sk-publishers must be at least 1")
	case o.boots < 0:
		return o, errors.New("-boots must not be negative")
	case o.skSide != "" && o.skSide != "dev" && o.skSide != "plain":
		return o, fmt.Errorf("-sk-side %q: want dev or plain", o.skSide)
	case o.skSide != "" && o.skServer == "":
		return o, errors.New("-sk-side needs -sk-server")
	case o.skPerFrame < 1:
		return o, errors.New("-sk-per-frame must be at least 1")
	}
	switch o.loadgen {
	case "auto", "wrk", "go":
	default:
		return o, fmt.Errorf("-loadgen %q: want auto, wrk or go", o.loadgen)
	}
	return o, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	opts, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "devbench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if opts.serveAnchor != "" {
		if err := serveAnchor(ctx, opts.serveAnchor, os.Stdin, stdout); err != nil {
			fmt.Fprintln(stderr, "devbench anchor:", err)
			return 1
		}
		return 0
	}
	if opts.skSide != "" {
		log := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "devbench", "sk_side", opts.skSide)
		if err := runSKSide(ctx, opts, os.Stdin, stdout, log); err != nil {
			fmt.Fprintln(stderr, "devbench signal k side:", err)
			return 1
		}
		return 0
	}
	if opts.merge {
		if err := mergeGoBench(opts.jsonOut, opts.gobench, stderr); err != nil {
			fmt.Fprintln(stderr, "devbench:", err)
			return 1
		}
		return 0
	}
	clk := clockwork.NewRealClock()
	b := &bench{
		opts: opts,
		clk:  clk,
		out:  stdout,
		log:  slog.New(slog.NewTextHandler(stderr, nil)).With("component", "devbench"),
	}
	if opts.jsonOut != "" {
		b.rep = &Report{Figures: []Figure{}, Machine: thisMachine(clk.Now())}
	}
	if err := b.run(ctx); err != nil {
		fmt.Fprintln(stderr, "devbench:", err)
		return 1
	}
	if b.rep != nil {
		if err := finishReport(b.rep, opts.jsonOut, opts.gobench, stderr); err != nil {
			fmt.Fprintln(stderr, "devbench:", err)
			return 1
		}
	}
	return 0
}

// mergeGoBench adds Go benchmark results to the report a previous run wrote to path; `make
// bench` runs the Go benchmarks after devbench.
func mergeGoBench(path string, files []string, stderr io.Writer) error {
	rep, err := readReport(path)
	if err != nil {
		return err
	}
	return finishReport(rep, path, files, stderr)
}

// finishReport adds the Go benchmark files and writes the report; once the Go benchmarks are
// in, it names the contract figures the report lacks (a skipped section or a benchmark that did
// not run).
func finishReport(rep *Report, path string, files []string, stderr io.Writer) error {
	if len(files) > 0 {
		g := newGoBench()
		for _, f := range files {
			if err := g.readFile(f); err != nil {
				return err
			}
		}
		g.addTo(rep)
		for _, e := range g.skipped {
			fmt.Fprintf(stderr, "devbench: go benchmark output: skipped a result line: %v\n", e)
		}
	}
	if err := rep.writeJSON(path); err != nil {
		return err
	}
	if m := rep.missing(); len(m) > 0 && len(files) > 0 {
		fmt.Fprintf(stderr, "devbench: %s: %d figures written; not measured in this run: %s\n", path, len(rep.Figures), strings.Join(m, ", "))
	}
	return nil
}
