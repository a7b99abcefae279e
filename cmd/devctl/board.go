package main

import (
	"context"
	"flag"
	"path/filepath"
	"strconv"
	"strings"

	"devhost/host/board"
)

// boardTarget is where the control socket is: --socket, or board.sock in --data.
type boardTarget struct {
	data, socket string
}

func (t *boardTarget) register(fs *flag.FlagSet) {
	fs.StringVar(&t.data, "data", "", "the device's data directory (its control socket is DIR/board.sock)")
	fs.StringVar(&t.socket, "socket", "", "the control socket itself")
}

// pathWith is the control socket with the flags given after the subcommand (late) taking
// precedence over those given before it.
func (t boardTarget) pathWith(late boardTarget) (string, error) {
	if late.data != "" {
		t.data = late.data
	}
	if late.socket != "" {
		t.socket = late.socket
	}
	return t.path()
}

func (t *boardTarget) path() (string, error) {
	switch {
	case t.socket != "" && t.data != "":
		return "", usagef("board: give --data or --socket, not both")
	case t.socket != "":
		return t.socket, nil
	case t.data != "":
		return filepath.Join(t.data, "board.sock"), nil
	}
	return "", usagef("board: --data DIR is required")
}

func (a *app) board(ctx context.Context, args []string) error {
	var tgt boardTarget
	fs := newFlags("board")
	tgt.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usagef("board: no subcommand (state, mem, wifi, eth, thread, net, route, button)")
	}
	sub, rest := rest[0], rest[1:]
	if sub == "ble" {
		return a.boardBLE(ctx, tgt, rest)
	}
	sfs := newFlags("board " + sub)
	// The same flags after the subcommand; registering them on tgt would reset its values.
	var late boardTarget
	late.register(sfs)

	var call func(*board.Client) (board.State, error)
	switch sub {
	case "can":
		return a.boardCAN(ctx, tgt, rest)
	case "state":
		if err := parseNoArgs(sfs, rest); err != nil {
			return err
		}
		call = func(c *board.Client) (board.State, error) { return c.State(ctx) }
	case "mem":
		var u board.MemoryUpdate
		optional(sfs, &u.FreeHeap, "free-heap", "free heap, bytes", parseInt64)
		optional(sfs, &u.FreeInternal, "free-internal", "free internal RAM, bytes", parseInt64)
		optional(sfs, &u.LargestBlock, "largest-block", "largest free internal block, bytes", parseInt64)
		if err := parseUpdate(sfs, rest, &u, "board mem: give at least one of --free-heap, --free-internal, --largest-block"); err != nil {
			return err
		}
		call = func(c *board.Client) (board.State, error) { return c.SetMemory(ctx, u) }
	case "net":
		up, err := parseSwitch(sfs, rest, "up", "down", "board net: want up or down")
		if err != nil {
			return err
		}
		if up {
			call = func(c *board.Client) (board.State, error) { return c.NetUp(ctx) }
		} else {
			call = func(c *board.Client) (board.State, error) { return c.NetDown(ctx) }
		}
	case "eth", "thread":
		ip := sfs.String("ip", "", "IPv4 address (with up)")
		up, err := parseSwitch(sfs, rest, "up", "down", "board "+sub+": want up [--ip IP] or down")
		if err != nil {
			return err
		}
		u := board.IfUpdate{Up: &up}
		if setFlags(sfs)["ip"] {
			if !up {
				return usagef("board %s down: --ip goes with up", sub)
			}
			u.IP = ip
		}
		name := sub
		call = func(c *board.Client) (board.State, error) { return c.SetIface(ctx, name, u) }
	case "wifi":
		var err error
		if call, err = boardWiFi(ctx, sfs, rest); err != nil {
			return err
		}
	case "route":
		var u board.RouteUpdate
		optional(sfs, &u.IP, "ip", "IPv4 address", parseString)
		optional(sfs, &u.Netmask, "netmask", "IPv4 netmask", parseString)
		optional(sfs, &u.Gateway, "gateway", "IPv4 gateway", parseString)
		if err := parseUpdate(sfs, rest, &u, "board route: give at least one of --ip, --netmask, --gateway (the Ethernet address)"); err != nil {
			return err
		}
		call = func(c *board.Client) (board.State, error) { return c.SetRoute(ctx, u) }
	case "button":
		secs := sfs.Int("seconds", 0, "recovery window to ask for, seconds (default: the device's 600)")
		if err := parseNoArgs(sfs, rest); err != nil {
			return err
		}
		if *secs < 0 {
			return usagef("board button: --seconds must not be negative")
		}
		call = func(c *board.Client) (board.State, error) { return c.Button(ctx, *secs) }
	default:
		return usagef("board: unknown subcommand %q (state, mem, wifi, eth, thread, net, route, button)", sub)
	}
	sock, err := tgt.pathWith(late)
	if err != nil {
		return err
	}
	st, err := call(board.Dial(sock))
	if err != nil {
		return err
	}
	return printJSON(a.stdout, st)
}

// boardWiFi parses `wifi ap add|remove|fault ...` and `wifi scan-busy on|off`. The late
// --data/--socket flags are registered on fs by the caller.
func boardWiFi(ctx context.Context, fs *flag.FlagSet, args []string) (func(*board.Client) (board.State, error), error) {
	if len(args) == 0 {
		return nil, usagef("board wifi: want ap add|remove|fault or scan-busy on|off")
	}
	switch args[0] {
	case "scan-busy":
		busy, err := parseSwitch(fs, args[1:], "on", "off", "board wifi scan-busy: want on or off")
		if err != nil {
			return nil, err
		}
		return func(c *board.Client) (board.State, error) { return c.SetScanBusy(ctx, busy) }, nil
	case "ap":
	default:
		return nil, usagef("board wifi: unknown subcommand %q (ap, scan-busy)", args[0])
	}
	if len(args) < 2 {
		return nil, usagef("board wifi ap: want add, remove or fault")
	}
	verb, rest := args[1], args[2:]
	ssid := fs.String("ssid", "", "the network name")
	switch verb {
	case "add":
		psk := fs.String("psk", "", "password (makes the default auth wpa2)")
		auth := fs.String("auth", "", "one of "+strings.Join(board.AuthModes, " ")+" (default wpa2 with --psk, else open)")
		bssid := fs.String("bssid", "", "aa:bb:cc:dd:ee:ff (default derived from the SSID)")
		channel := fs.Int("channel", 0, "channel (default 6)")
		rssi := fs.Int("rssi", board.DefaultAPRSSI, "signal strength, dBm")
		if err := parseNoArgs(fs, rest); err != nil {
			return nil, err
		}
		if *ssid == "" {
			return nil, usagef("board wifi ap add: --ssid is required")
		}
		u := board.APUpdate{SSID: *ssid, PSK: *psk, Auth: *auth, BSSID: *bssid, Channel: *channel, RSSI: rssi}
		if setFlags(fs)["channel"] && *channel == 0 {
			return nil, usagef("board wifi ap add: --channel must be 1..196")
		}
		return func(c *board.Client) (board.State, error) { return c.AddAP(ctx, u) }, nil
	case "remove":
		if err := parseNoArgs(fs, rest); err != nil {
			return nil, err
		}
		if *ssid == "" {
			return nil, usagef("board wifi ap remove: --ssid is required")
		}
		return func(c *board.Client) (board.State, error) { return c.RemoveAP(ctx, *ssid) }, nil
	case "fault":
		fault := fs.String("fault", "", "none, wrong_password, no_answer, no_ip or drop")
		if err := parseNoArgs(fs, rest); err != nil {
			return nil, err
		}
		if *ssid == "" || *fault == "" {
			return nil, usagef("board wifi ap fault: --ssid and --fault are required")
		}
		return func(c *board.Client) (board.State, error) { return c.SetFault(ctx, *ssid, *fault) }, nil
	}
	return nil, usagef("board wifi ap: unknown subcommand %q (add, remove, fault)", verb)
}

// parseAll parses flags wherever they stand among the arguments and returns the others.
func parseAll(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := parse(fs, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

func parseNoArgs(fs *flag.FlagSet, args []string) error {
	pos, err := parseAll(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), pos[0])
	}
	return nil
}

// parseOne parses the flags and the one argument, what it is named in the usage error; def
// stands in when none is given ("" makes the argument required).
func parseOne(fs *flag.FlagSet, args []string, what, def string) (string, error) {
	pos, err := parseAll(fs, args)
	switch {
	case err != nil:
		return "", err
	case len(pos) > 1 || (len(pos) == 0 && def == ""):
		return "", usagef("%s: give one %s", fs.Name(), what)
	case len(pos) == 1:
		return pos[0], nil
	}
	return def, nil
}

// parseSwitch parses flags anywhere among args and the one argument on or off (up or down:
// the words are given), answering whether it is on; anything else is a usage error.
func parseSwitch(fs *flag.FlagSet, args []string, on, off, usage string) (bool, error) {
	pos, err := parseAll(fs, args)
	if err != nil {
		return false, err
	}
	if len(pos) != 1 || (pos[0] != on && pos[0] != off) {
		return false, usagef("%s", usage)
	}
	return pos[0] == on, nil
}

// optional registers a flag whose value lands in *dst only when it is given, so an update
// carries only what the user set ("--free-heap 0" differs from no --free-heap).
func optional[T any](fs *flag.FlagSet, dst **T, name, usage string, parse func(string) (T, error)) {
	fs.Func(name, usage, func(s string) error {
		v, err := parse(s)
		if err != nil {
			return err
		}
		*dst = &v
		return nil
	})
}

func parseInt64(s string) (int64, error) { return strconv.ParseInt(s, 0, 64) }

func parseString(s string) (string, error) { return s, nil }

// parseUpdate parses an update's flags and refuses, with the usage text none, an update
// that changes nothing.
func parseUpdate[U comparable](fs *flag.FlagSet, args []string, u *U, none string) error {
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	var zero U
	if *u == zero {
		return usagef("%s", none)
	}
	return nil
}

// setFlags names the flags given on the command line, so "--rssi 0" differs from no --rssi.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
