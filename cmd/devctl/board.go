package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"

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
		return usagef("board: no subcommand (state, mem, net, route, button)")
	}
	sub, rest := rest[0], rest[1:]
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
		heap := sfs.Int64("free-heap", 0, "free heap, bytes")
		internal := sfs.Int64("free-internal", 0, "free internal RAM, bytes")
		block := sfs.Int64("largest-block", 0, "largest free internal block, bytes")
		if err := parseNoArgs(sfs, rest); err != nil {
			return err
		}
		var u board.MemoryUpdate
		set := setFlags(sfs)
		if set["free-heap"] {
			u.FreeHeap = heap
		}
		if set["free-internal"] {
			u.FreeInternal = internal
		}
		if set["largest-block"] {
			u.LargestBlock = block
		}
		if u == (board.MemoryUpdate{}) {
			return usagef("board mem: give at least one of --free-heap, --free-internal, --largest-block")
		}
		call = func(c *board.Client) (board.State, error) { return c.SetMemory(ctx, u) }
	case "net":
		pos, err := parseAll(sfs, rest)
		if err != nil {
			return err
		}
		if len(pos) != 1 || (pos[0] != "up" && pos[0] != "down") {
			return usagef("board net: want up or down")
		}
		if pos[0] == "up" {
			call = func(c *board.Client) (board.State, error) { return c.NetUp(ctx) }
		} else {
			call = func(c *board.Client) (board.State, error) { return c.NetDown(ctx) }
		}
	case "route":
		iface := sfs.String("iface", "", "wifi_sta, eth or thread")
		ip := sfs.String("ip", "", "IPv4 address")
		mask := sfs.String("netmask", "", "IPv4 netmask")
		gw := sfs.String("gateway", "", "IPv4 gateway")
		rssi := sfs.Int("rssi", 0, "signal strength, dBm (wifi_sta only)")
		if err := parseNoArgs(sfs, rest); err != nil {
			return err
		}
		var u board.RouteUpdate
		set := setFlags(sfs)
		if set["iface"] {
			u.Iface = iface
		}
		if set["ip"] {
			u.IP = ip
		}
		if set["netmask"] {
			u.Netmask = mask
		}
		if set["gateway"] {
			u.Gateway = gw
		}
		if set["rssi"] {
			u.RSSI = rssi
		}
		if u == (board.RouteUpdate{}) {
			return usagef("board route: give at least one of --iface, --ip, --netmask, --gateway, --rssi")
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
		return usagef("board: unknown subcommand %q (state, mem, net, route, button)", sub)
	}
	if late.data != "" {
		tgt.data = late.data
	}
	if late.socket != "" {
		tgt.socket = late.socket
	}
	sock, err := tgt.path()
	if err != nil {
		return err
	}
	st, err := call(board.Dial(sock))
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	_, err = fmt.Fprintf(a.stdout, "%s\n", b)
	return err
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

// setFlags names the flags given on the command line, so "--rssi 0" differs from no --rssi.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
