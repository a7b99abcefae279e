package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"time"

	"devhost/host/board"
	"devhost/plugins/ble/gattprov"
	"devhost/plugins/ble/protocomm"
	"devhost/plugins/ble/provclient"
	pb "devhost/plugins/ble/provpb"
	"devhost/plugins/ble/softap"
)

// provUsage is the `prov` command line.
const provUsage = "devctl prov --data DIR --transport ble|softap [--url URL] --pop POP --ssid S [--passphrase P] [--security 0|1|2]"

// prov plays the phone app: proto-ver, the security session, a scan, the credentials,
// apply, then the station's status every second until connected or failed.
func (a *app) prov(ctx context.Context, args []string) error {
	fs := newFlags("prov")
	data := fs.String("data", "", "the device's data directory")
	transport := fs.String("transport", "ble", "ble or softap")
	url := fs.String("url", "", "softap: the setup portal's address, http://IP:PORT (default: the board's portal address, port 80)")
	pop := fs.String("pop", "", "proof of possession (the device label)")
	ssid := fs.String("ssid", "", "network to join")
	pass := fs.String("passphrase", "", "its passphrase")
	sec := fs.Int("security", 1, "security scheme: 0, 1 or 2")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	switch {
	case *data == "":
		return usagef("prov: --data DIR is required (%s)", provUsage)
	case *ssid == "":
		return usagef("prov: --ssid is required")
	case *sec < 0 || *sec > 2:
		return usagef("prov: --security must be 0, 1 or 2")
	case *sec == 1 && *pop == "":
		return usagef("prov: --pop is required with security 1")
	}
	if *sec == 2 {
		return errors.New("prov: security 2 (SRP6a) is not supported by this device")
	}
	var x protocomm.Exchange
	switch *transport {
	case "softap":
		base := *url
		if base == "" {
			st, err := board.Dial(filepath.Join(*data, "board.sock")).State(ctx)
			if err != nil {
				return fmt.Errorf("prov: the board's portal address: %w", err)
			}
			base = "http://" + net.JoinHostPort(st.Hardware.PortalIP, "80")
		}
		jar, err := cookiejar.New(nil)
		if err != nil {
			return fmt.Errorf("prov: %w", err)
		}
		x = softap.Exchange(&http.Client{Jar: jar, Timeout: 30 * time.Second}, base)
	case "ble":
		bx, disconnect, err := bleExchange(ctx, board.Dial(filepath.Join(*data, "board.sock")))
		if err != nil {
			return fmt.Errorf("prov: %w", err)
		}
		defer disconnect()
		x = bx
	default:
		return usagef("prov: --transport must be ble or softap")
	}
	c := &provclient.Client{X: x, Sec: *sec, PoP: []byte(*pop)}
	start := a.clock.Now()
	v, err := c.Version()
	if err != nil {
		return fmt.Errorf("prov: %w", err)
	}
	fmt.Fprintf(a.stdout, "protocol %s, security %d, capabilities %v\n", v.Prov.Ver, v.Prov.SecVer, v.Prov.Cap)
	if err := c.Handshake(); err != nil {
		return fmt.Errorf("prov: session: %w", err)
	}
	fmt.Fprintf(a.stdout, "session established in %v\n", a.clock.Since(start).Round(time.Millisecond))
	if aps, err := c.Scan(); err == nil {
		fmt.Fprintf(a.stdout, "scan: %d networks\n", len(aps))
	} else {
		return fmt.Errorf("prov: %w", err)
	}
	if err := c.SetConfig(*ssid, *pass); err != nil {
		return fmt.Errorf("prov: %w", err)
	}
	if err := c.ApplyConfig(); err != nil {
		return fmt.Errorf("prov: %w", err)
	}
	fmt.Fprintf(a.stdout, "credentials for %q sent and applied\n", *ssid)
	sleep := func(d time.Duration) {
		select {
		case <-ctx.Done():
		case <-a.clock.After(d):
		}
	}
	st, err := c.WaitConnected(time.Second, 120*time.Second, sleep)
	if err != nil {
		return fmt.Errorf("prov: %w", err)
	}
	fmt.Fprintf(a.stdout, "connected: %s %s\n", pb.WifiStationState_Connected, st.GetConnected().GetIp4Addr())
	return nil
}

// bleExchange connects the board's simulated central to the device, as the app does: MTU
// exchange, discovery, the endpoints found by their user descriptions.
func bleExchange(ctx context.Context, c *board.Client) (protocomm.Exchange, func(), error) {
	res, err := c.Central(ctx, board.CentralOp{Op: "connect"})
	if err != nil {
		return nil, nil, fmt.Errorf("connect (is the device provisioning over BLE?): %w", err)
	}
	central := bleCentral{ctx: ctx, c: c, conn: res.Conn}
	disconnect := func() {
		_, _ = c.Central(context.WithoutCancel(ctx), board.CentralOp{Op: "disconnect", Conn: central.conn})
	}
	fail := func(err error) (protocomm.Exchange, func(), error) { disconnect(); return nil, nil, err }
	res, err = c.Central(ctx, board.CentralOp{Op: "mtu", Conn: central.conn, MTU: 512})
	if err != nil {
		return fail(fmt.Errorf("mtu: %w", err))
	}
	mtu := res.MTU
	res, err = c.Central(ctx, board.CentralOp{Op: "discover", Conn: central.conn})
	if err != nil {
		return fail(fmt.Errorf("discover: %w", err))
	}
	handles := map[string]uint16{}
	for _, svc := range res.Services {
		if svc.UUID != gattprov.ServiceUUID {
			continue
		}
		for _, ch := range svc.Chars {
			d, err := central.Read(ch.DescHandle, 0)
			if err != nil {
				return fail(fmt.Errorf("user description: %w", err))
			}
			handles[string(d)] = ch.Handle
		}
	}
	if len(handles) == 0 {
		return fail(errors.New("the device serves no provisioning service"))
	}
	return gattprov.Exchange(central, handles, mtu), disconnect, nil
}

// bleCentral is one connection of the board's simulated central.
type bleCentral struct {
	ctx  context.Context
	c    *board.Client
	conn int
}

func (b bleCentral) op(op board.CentralOp) (board.CentralResult, error) {
	op.Conn = b.conn
	res, err := b.c.Central(b.ctx, op)
	if err != nil {
		return res, err
	}
	if res.ATTError != 0 {
		return res, fmt.Errorf("ATT error %#02x", res.ATTError)
	}
	return res, nil
}

func (b bleCentral) Write(h uint16, off int, v []byte, prepare bool) error {
	_, err := b.op(board.CentralOp{Op: "write", Handle: h, Offset: off, Data: v, Prepare: prepare})
	return err
}

func (b bleCentral) Execute() error {
	_, err := b.op(board.CentralOp{Op: "execute", Commit: true})
	return err
}

func (b bleCentral) Read(h uint16, off int) ([]byte, error) {
	res, err := b.op(board.CentralOp{Op: "read", Handle: h, Offset: off})
	return res.Value, err
}
