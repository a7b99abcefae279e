// Command devctl is the operator's and plugin author's command line for a devhost device.
//
//	devctl board [--data DIR | --socket PATH] state
//	devctl board [--data DIR | --socket PATH] mem [--free-heap N] [--free-internal N] [--largest-block N]
//	devctl board [--data DIR | --socket PATH] wifi ap add --ssid S [--psk P] [--auth AUTH] [--bssid B] [--channel N] [--rssi DBM]
//	devctl board [--data DIR | --socket PATH] wifi ap remove --ssid S
//	devctl board [--data DIR | --socket PATH] wifi ap fault --ssid S --fault none|wrong_password|no_answer|no_ip|drop
//	devctl board [--data DIR | --socket PATH] wifi scan-busy on|off
//	devctl board [--data DIR | --socket PATH] eth up [--ip IP] | eth down
//	devctl board [--data DIR | --socket PATH] thread up [--ip IP] | thread down
//	devctl board [--data DIR | --socket PATH] net up|down (Ethernet, as eth)
//	devctl board [--data DIR | --socket PATH] route [--ip IP] [--netmask M] [--gateway GW] (the Ethernet address)
//	devctl board [--data DIR | --socket PATH] button [--seconds N]
//	devctl logs [--url http://HOST:PORT] [--key KEY] [--follow] [--limit N]
//	devctl events [--url http://HOST:PORT] [--key KEY] [--raw]
//
// The device is --url, else $DEVCTL_URL, else http://127.0.0.1:8080 (what `make run` serves).
// `board` drives the simulated board through its control channel (the unix socket
// DIR/board.sock of a running device) and prints the board's state as JSON after the change.
// `logs` prints the device's log lines (GET /api/v1/logs, paging with after = next - 1), or
// with --limit N only the N newest; with --follow it polls every second until interrupted, says so on stderr when lines were lost or
// the device restarted, and rides out a device that is rebooting. `events` prints the SSE
// stream (GET /api/v1/events) one event per line as `NAME DATA`, or unchanged with --raw, and
// reconnects after the stream's retry delay until interrupted.
//
// The API key comes from --key or, to keep it out of shell history, $DEVCTL_KEY; it is sent
// as `Authorization: Bearer`. Exit status: 0 success (an interrupt included), 1 failure,
// 2 usage error. Subcommands use the standard flag package: the command set is small, and
// flags may also follow the subcommand (`devctl board state --data DIR`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/jonboulle/clockwork"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	a := &app{stdout: os.Stdout, stderr: os.Stderr, clock: clockwork.NewRealClock(), getenv: os.Getenv,
		http: &http.Client{}}
	os.Exit(a.run(ctx, os.Args[1:]))
}

// app is one invocation; tests build it with their own writers, clock and client.
type app struct {
	stdout, stderr io.Writer
	clock          clockwork.Clock
	getenv         func(string) string
	http           *http.Client
}

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const usage = `usage:
  devctl board [--data DIR | --socket PATH] state
  devctl board [--data DIR | --socket PATH] mem [--free-heap N] [--free-internal N] [--largest-block N]
  devctl board [--data DIR | --socket PATH] wifi ap add --ssid S [--psk P] [--auth AUTH] [--bssid B] [--channel N] [--rssi DBM]
  devctl board [--data DIR | --socket PATH] wifi ap remove --ssid S
  devctl board [--data DIR | --socket PATH] wifi ap fault --ssid S --fault none|wrong_password|no_answer|no_ip|drop
  devctl board [--data DIR | --socket PATH] wifi scan-busy on|off
  devctl board [--data DIR | --socket PATH] eth up [--ip IP] | eth down
  devctl board [--data DIR | --socket PATH] thread up [--ip IP] | thread down
  devctl board [--data DIR | --socket PATH] net up|down (Ethernet, as eth)
  devctl board [--data DIR | --socket PATH] route [--ip IP] [--netmask M] [--gateway GW] (the Ethernet address)
  devctl board [--data DIR | --socket PATH] button [--seconds N]
  devctl logs [--url http://HOST:PORT] [--key KEY] [--follow] [--limit N]
  devctl events [--url http://HOST:PORT] [--key KEY] [--raw]
  devctl plugin new|build|keygen|pack|sign|install|list|start|stop|remove|keys ... (devctl plugin help)
  devctl board [--data DIR | --socket PATH] can replay --file FILE [--format F] [--speed X | --max]
  devctl board [--data DIR | --socket PATH] can capture [--count N] [--timeout S]
  devctl n2k decode [--format auto|candump|analyzer|actisense|ydraw|ikonvert] [--module WASM] FILE
  devctl ota pack|manifest|push ... (devctl ota help)
  devctl board --data DIR ble advert --addr AA:BB:CC:DD:EE:FF --data HEX [--rssi DBM]
  devctl board --data DIR ble adverts
  devctl prov --data DIR --transport ble|softap [--url URL] --pop POP --ssid S [--passphrase P] [--security 0|1|2]

The device is --url, else $DEVCTL_URL, else ` + defaultURL + `; the API key is
--key, else $DEVCTL_KEY.
`

// defaultURL is the device `make run` serves.
const defaultURL = "http://127.0.0.1:8080"

// helpError asks for a command's own usage text on stdout, exit 0.
type helpError struct{ text string }

func (e *helpError) Error() string { return "help requested" }

// usageError is a command line that makes no sense; it exits 2 with the usage text (the
// command's own when usage is set).
type usageError struct{ msg, usage string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func (a *app) run(ctx context.Context, args []string) int {
	err := a.dispatch(ctx, args)
	var ue *usageError
	var he *helpError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &he):
		fmt.Fprint(a.stdout, he.text)
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(a.stdout, usage)
		return exitOK
	case errors.As(err, &ue):
		text := usage
		if ue.usage != "" {
			text = ue.usage
		}
		fmt.Fprintf(a.stderr, "devctl: %s\n%s", ue.msg, text)
		return exitUsage
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return exitOK
	default:
		fmt.Fprintf(a.stderr, "devctl: %v\n", err)
		return exitFail
	}
}

func (a *app) dispatch(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("no command")
	}
	switch args[0] {
	case "board":
		return a.board(ctx, args[1:])
	case "logs":
		return a.logs(ctx, args[1:])
	case "events":
		return a.events(ctx, args[1:])
	case "plugin":
		return a.pluginAuthoring(ctx, args[1:])
	case "ota":
		return a.ota(ctx, args[1:])
	case "n2k":
		return a.n2k(ctx, args[1:])
	case "prov":
		return a.prov(ctx, args[1:])
	case "help", "-h", "--help", "-help":
		return flag.ErrHelp
	default:
		return usagef("unknown command %q", args[0])
	}
}

// newFlags is a flag set that reports errors to the caller instead of printing them.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses a flag set and turns its errors into usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usagef("%s: %v", fs.Name(), err)
	}
	return nil
}

// apiBase turns --url (else $DEVCTL_URL, else defaultURL) into the API root:
// http://HOST:PORT/api/v1.
func (a *app) apiBase(raw string) (string, error) {
	if raw == "" {
		raw = a.getenv("DEVCTL_URL")
	}
	if raw == "" {
		raw = defaultURL
	}
	if !strings.HasPrefix(raw, "http://") && !strings.HasPrefix(raw, "https://") {
		return "", usagef("--url %q: want http://HOST:PORT", raw)
	}
	u := strings.TrimRight(raw, "/")
	u = strings.TrimSuffix(u, "/api/v1")
	return u + "/api/v1", nil
}

// key is the API key from --key or $DEVCTL_KEY.
func (a *app) key(flagKey string) string {
	if flagKey != "" {
		return flagKey
	}
	return a.getenv("DEVCTL_KEY")
}
