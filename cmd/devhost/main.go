// Command devhost is the device. Started by an operator it is the boot supervisor (a power-on):
// it owns the data directory and runs the app, the same executable, as its child, restarting
// it after a reboot, a factory reset, a panic or a watchdog restart.
//
//	devhost --data DIR [--factory FILE] [--board FILE] [--listen HOST] [--port N]
//
// The app prints `devhost: listening on http://HOST:PORT` once it answers requests.
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

	"devhost/host/boot"
	"devhost/host/build"
	"devhost/host/device"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type flags struct {
	data, factory, board, listen string
	port                         int
	authRequired, debugCrash     bool
	noWatchdog, noRecovery       bool
	healthTick                   time.Duration
	mdnsIfaces                   string
	version, buildInfo           bool
	otaConfirmUptime             time.Duration
}

func parse(args []string, stderr io.Writer) (flags, []string, error) {
	var f flags
	fs := flag.NewFlagSet("devhost", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: devhost --data DIR [--factory FILE] [--board FILE] [--listen HOST] [--port N] [options]")
		fs.PrintDefaults()
	}
	fs.StringVar(&f.data, "data", "", "data directory: the device's flash (created if missing)")
	fs.StringVar(&f.factory, "factory", "", "configuration document (PUT /config shape) applied to an empty store")
	fs.StringVar(&f.board, "board", "", "simulated board file (JSON); empty means the default board")
	fs.StringVar(&f.listen, "listen", "", "station-side bind address (default: all addresses)")
	fs.IntVar(&f.port, "port", 0, "HTTP port for this run, over the stored httpd.port (which it does not change)")
	fs.BoolVar(&f.authRequired, "auth-required", build.On(build.AuthRequired), "HTTPD_AUTH_REQUIRED: refuse protected endpoints until a key is set")
	fs.BoolVar(&f.debugCrash, "debug-crash", build.On(build.DebugCrash), "HTTPD_DEBUG_CRASH: enable POST /system/crash")
	fs.BoolVar(&f.noWatchdog, "no-health-watchdog", !build.On(build.HealthWatchdog), "disable the health watchdog policy (conditions still reported)")
	fs.BoolVar(&f.noRecovery, "no-portal-recovery", !build.On(build.PortalRecovery), "HTTPD_PORTAL_RECOVERY=n: no lost-key power-cycle recovery")
	fs.StringVar(&f.mdnsIfaces, "mdns-iface", "", "comma-separated interfaces for mDNS: the device's advertisement and Signal K discovery (default: none)")
	fs.DurationVar(&f.healthTick, "health-tick", 0, "health policy tick (default 10s; for tests of the watchdog)")
	fs.BoolVar(&f.version, "version", false, "print the version alone and exit")
	fs.BoolVar(&f.buildInfo, "build-info", false, "print the image identity (project, version, target, build time) as JSON and exit")
	fs.DurationVar(&f.otaConfirmUptime, "ota-confirm-uptime", 0, "uptime after which a new image without a WiFi station confirms itself (default 60s; for tests)")
	if err := fs.Parse(args); err != nil {
		return f, nil, err
	}
	if f.version || f.buildInfo {
		return f, nil, nil
	}
	if fs.NArg() > 0 {
		return f, nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if f.data == "" {
		return f, nil, errors.New("--data is required")
	}
	if f.port < 0 || f.port > 65535 {
		return f, nil, fmt.Errorf("--port %d: want 1..65535", f.port)
	}
	return f, args, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	f, childArgs, err := parse(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "devhost:", err)
		}
		return 2
	}
	if f.version || f.buildInfo {
		return printIdentity(f, stdout)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	if h, ok := boot.Child(); ok {
		return runApp(ctx, f, h, stdout, stderr)
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil)).With("component", "boot")
	err = boot.Supervise(ctx, boot.Options{DataDir: f.data, Args: childArgs, Stdout: stdout, Stderr: stderr, Logger: logger})
	if err != nil {
		fmt.Fprintln(stderr, "devhost:", err)
		return 1
	}
	return 0
}

func runApp(ctx context.Context, f flags, h boot.Handoff, stdout, stderr io.Writer) int {
	var (
		sleepFor time.Duration
		rtc      []byte
	)
	exit, err := device.Run(ctx, device.Options{
		DataDir: f.data, FactoryFile: f.factory, BoardFile: f.board, Listen: f.listen, Port: f.port,
		Stdout: stdout, Stderr: stderr, Handoff: h,
		AuthRequired: f.authRequired, DebugCrash: f.debugCrash,
		HealthWatchdog: !f.noWatchdog, PortalRecovery: !f.noRecovery, HealthTick: f.healthTick,
		MDNSInterfaces: splitList(f.mdnsIfaces), OTAConfirmUptime: f.otaConfirmUptime,
		DeepSleep: func(d time.Duration, b []byte) { sleepFor, rtc = d, b },
	})
	if err != nil {
		// A restart cannot fix a device that cannot boot (a port in use, a broken board
		// file): stop the supervisor instead of crash-looping.
		fmt.Fprintln(stderr, "devhost:", err)
		err = boot.Halt(err.Error())
	} else {
		switch exit {
		case device.ExitReboot:
			err = boot.Reboot()
		case device.ExitWatchdog:
			err = boot.WatchdogReset()
		case device.ExitDeepSleep:
			err = boot.DeepSleep(sleepFor, rtc)
		default:
			return 0
		}
	}
	fmt.Fprintln(stderr, "devhost: hand control back to the supervisor:", err)
	return 1
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
