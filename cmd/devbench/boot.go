package main

// The boot section times whole device boots, from starting the boot supervisor (bin/devhost)
// to the first 200 on GET /api/v1/system/ping (boot.first_200) and, with the real
// signalk-server, to the device's Signal K stream being open (boot.sk_stream_open: GET
// /api/v1/sk/status shows ws.connected).
//   - The device runs on a data directory of its own, with Ethernet up on loopback (a board
//     file, as the black-box tests use) and, when the server runs, sk.server_host/port set
//     in its factory document. Its first boot is the factory boot: it creates its keys and
//     asks the server for access, which devbench approves with the admin account; that boot
//     is printed but not part of the figures. The timed boots are the ones after, on the same
//     flash, the way a device boots every day: the token kept, nothing to create.
//   - Polling is every 2 ms (ping) and 5 ms (status), so the figures are upper bounds by at
//     most that much. The ping is polled from the moment the device prints its listening
//     line, which comes once its server accepts connections.
//   - Between boots the device is stopped with SIGTERM and the next boot waits until its port
//     is free again.
//   - At the first 200 the CPU time the supervisor and the app have used so far is read too
//     (boot.first_200_cpu_supervisor, boot.first_200_cpu_app): on a loaded machine the wall
//     clock mostly measures the wait for a core, CPU time what a boot costs.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"devhost/host/signalk/sktest"
)

const (
	skStatusPath   = "/api/v1/sk/status"
	pingPollEvery  = 2 * time.Millisecond
	statusPollEach = 5 * time.Millisecond
)

// bootTimes is one boot: time from the supervisor's start to each milestone (0: not measured),
// and the CPU time of the supervisor and of the app at the first 200 (negative: not read).
type bootTimes struct {
	first200, skOpen time.Duration
	supCPU, appCPU   time.Duration
}

// bootRig is the device the boot section starts again and again.
type bootRig struct {
	devhost, tmp string
	port         int
	args, env    []string
	srv          *sktest.Server // nil: no Signal K milestone
}

func (b *bench) runBoot(ctx context.Context) (err error) {
	fmt.Fprintf(b.out, "Boot: supervisor start to the first 200 on GET %s and to the Signal K stream open\n", pingPath)
	devhost, tmp, release, err := b.workspace("devbench-boot-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, release()) }()
	var srv *sktest.Server
	if b.opts.signalk {
		var skErr error
		if srv, skErr = b.skServer(ctx); skErr != nil {
			fmt.Fprintf(b.out, "Signal K stream open: not measured, the server could not be started: %v\n", skErr)
		}
	} else {
		fmt.Fprintln(b.out, "Signal K stream open: not measured (-signalk=false)")
	}
	rig, err := b.prepareBootRig(devhost, tmp, srv)
	if err != nil {
		return err
	}
	factory, err := b.boot(ctx, rig, true)
	if err != nil {
		return fmt.Errorf("factory boot: %w", err)
	}
	var boots []bootTimes
	for i := range b.opts.boots {
		b.log.Info("timing a boot", "boot", i+1, "of", b.opts.boots)
		t, err := b.boot(ctx, rig, false)
		if err != nil {
			return fmt.Errorf("boot %d: %w", i+1, err)
		}
		boots = append(boots, t)
	}
	b.printBoot(factory, boots, srv != nil)
	return nil
}

// prepareBootRig writes the factory document and the board file.
func (b *bench) prepareBootRig(devhost, tmp string, srv *sktest.Server) (*bootRig, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	// No NTP server: the bench sends traffic to loopback only.
	doc := map[string]any{
		"httpd": map[string]any{"port": port, "api_key": b.opts.key},
		"time":  map[string]any{"server0": ""},
	}
	if srv != nil {
		doc["sk"] = map[string]any{"server_host": srv.Host, "server_port": srv.Port}
	}
	factory := filepath.Join(tmp, "factory.json")
	if err := writeJSONFile(factory, doc, "factory document"); err != nil {
		return nil, err
	}
	// Ethernet up on loopback from the first instant; a setup-portal address of its own, so it
	// never shares the portal's sockets with another device on this machine.
	board := filepath.Join(tmp, "board.json")
	portal := fmt.Sprintf("127.6.%d.%d", port>>8&0xff, port&0xff|1)
	if err := os.WriteFile(board, fmt.Appendf(nil, `{"eth":{"up":true,"ip":"127.0.0.1"},"portal_ip":%q}`, portal), 0o600); err != nil {
		return nil, fmt.Errorf("board file: %w", err)
	}
	return &bootRig{
		devhost: devhost, tmp: tmp, port: port, srv: srv,
		args: []string{"--data", filepath.Join(tmp, "data"), "--factory", factory, "--listen", "127.0.0.1", "--board", board},
		env:  append(os.Environ(), "DEVHOST_KEYS="+filepath.Join(tmp, "keys")),
	}, nil
}

// boot starts the device, times its milestones and stops it again. The factory boot also gets
// the device's Signal K access request approved.
func (b *bench) boot(ctx context.Context, rig *bootRig, factory bool) (t bootTimes, err error) {
	if err := b.waitPortFree(ctx, rig.port); err != nil {
		return t, err
	}
	// A client of its own: no connection kept from the previous boot.
	client := newClient()
	defer client.CloseIdleConnections()
	logPath := filepath.Join(rig.tmp, "devhost.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return t, fmt.Errorf("device log: %w", err)
	}
	defer logFile.Close() // the child holds its own copy
	cmd := exec.Command(rig.devhost, rig.args...)
	cmd.Env = rig.env
	cmd.Stderr = logFile
	t0 := b.clk.Now()
	dev, err := startChild(ctx, b.clk, "devhost", cmd, devicePrefix, b.opts.startTimeout)
	if err != nil {
		return t, fmt.Errorf("%w\n--- device log (%s), last lines:\n%s", err, logPath, tail(logPath, 20))
	}
	defer func() { err = errors.Join(err, dev.stop(10*time.Second)) }()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := b.poll(ctx, pingPollEvery, func() (bool, error) {
		return b.answers200(ctx, client, dev.url+pingPath, "")
	}); err != nil {
		return t, fmt.Errorf("waiting for the first 200 on %s: %w", pingPath, err)
	}
	t.first200 = b.clk.Since(t0)
	t.supCPU, t.appCPU = bootCPU(dev.pid())
	if rig.srv == nil {
		return t, nil
	}
	if factory {
		if err := b.approveDevice(ctx, client, dev.url, rig.srv); err != nil {
			return t, err
		}
	}
	if err := b.poll(ctx, statusPollEach, func() (bool, error) {
		st, err := b.skStatus(ctx, client, dev.url)
		return st.WS.Connected, err
	}); err != nil {
		return t, fmt.Errorf("waiting for the Signal K stream: %w", err)
	}
	t.skOpen = b.clk.Since(t0)
	return t, nil
}

// bootCPU reads the CPU time of the supervisor (pid) and of its app; a figure that cannot be
// read is negative.
func bootCPU(pid int) (sup, app time.Duration) {
	sup, app = -1, -1
	if d, err := processCPU(pid); err == nil {
		sup = d
	}
	if cpid, err := onlyChild(pid); err == nil {
		if d, err := processCPU(cpid); err == nil {
			app = d
		}
	}
	return sup, app
}

// skStatusDoc is the part of GET /api/v1/sk/status the boot section reads.
type skStatusDoc struct {
	Token struct {
		State    string `json:"state"`
		ClientID string `json:"client_id"`
	} `json:"token"`
	WS struct {
		Connected bool `json:"connected"`
	} `json:"ws"`
}

func (b *bench) skStatus(ctx context.Context, client *http.Client, base string) (skStatusDoc, error) {
	var st skStatusDoc
	resp, err := request(ctx, client, http.MethodGet, base+skStatusPath, b.opts.key, nil)
	if err != nil {
		return st, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return st, fmt.Errorf("GET %s: %w", skStatusPath, err)
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET %s answered %d: %s", skStatusPath, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("GET %s: %w", skStatusPath, err)
	}
	return st, nil
}

// approveDevice waits for the device's access request and approves it on the server.
func (b *bench) approveDevice(ctx context.Context, client *http.Client, base string, srv *sktest.Server) error {
	var clientID string
	if err := b.poll(ctx, 50*time.Millisecond, func() (bool, error) {
		st, err := b.skStatus(ctx, client, base)
		clientID = st.Token.ClientID
		return st.Token.State == "REQUESTED" && clientID != "", err
	}); err != nil {
		return fmt.Errorf("waiting for the device's access request: %w", err)
	}
	if _, err := srv.WaitRequest(ctx, clientID); err != nil {
		return fmt.Errorf("the server never saw the device's request: %w", err)
	}
	if err := srv.Approve(ctx, clientID, "readwrite"); err != nil {
		return fmt.Errorf("approving the device: %w", err)
	}
	return nil
}

// answers200 reports whether url answers 200; a refused connection is a plain "not yet".
func (b *bench) answers200(ctx context.Context, client *http.Client, url, key string) (bool, error) {
	resp, err := request(ctx, client, http.MethodGet, url, key, nil)
	if err != nil {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return false, nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// poll calls check every interval until it reports true, fails, or ctx ends.
func (b *bench) poll(ctx context.Context, every time.Duration, check func() (bool, error)) error {
	for {
		ok, err := check()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-b.clk.After(every):
		}
	}
}

// waitPortFree waits until the device's port can be bound again (the previous boot's app has
// let it go).
func (b *bench) waitPortFree(ctx context.Context, port int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	err := b.poll(ctx, 20*time.Millisecond, func() (bool, error) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return false, nil
		}
		return true, ln.Close()
	})
	if err != nil {
		return fmt.Errorf("port %d still taken: %w", port, err)
	}
	return nil
}

func (b *bench) printBoot(factory bootTimes, boots []bootTimes, sk bool) {
	var first, open, sup, app []time.Duration
	for _, t := range boots {
		first = append(first, t.first200)
		open = append(open, t.skOpen)
		if t.supCPU >= 0 && t.appCPU >= 0 {
			sup = append(sup, t.supCPU)
			app = append(app, t.appCPU)
		}
	}
	each := func(ds []time.Duration) string {
		parts := make([]string, len(ds))
		for i, d := range ds {
			parts[i] = fmtDuration(d)
		}
		return strings.Join(parts, " ")
	}
	fmt.Fprintf(b.out, "factory boot (keys created, access requested; not in the figures): first 200 after %s\n", fmtDuration(factory.first200))
	fmt.Fprintf(b.out, "first 200:            median %s over %d boots (%s)\n", fmtDuration(medianDuration(first)), len(first), each(first))
	b.rep.add("boot.first_200", "ms", ms(medianDuration(first)))
	if len(sup) > 0 {
		fmt.Fprintf(b.out, "CPU at the first 200: supervisor median %s (%s); app median %s (%s)\n",
			fmtDuration(medianDuration(sup)), each(sup), fmtDuration(medianDuration(app)), each(app))
		b.rep.add("boot.first_200_cpu_supervisor", "ms", ms(medianDuration(sup)))
		b.rep.add("boot.first_200_cpu_app", "ms", ms(medianDuration(app)))
	} else {
		fmt.Fprintln(b.out, "CPU at the first 200: not read (/proc/PID/task/*/schedstat unavailable)")
	}
	if sk {
		fmt.Fprintf(b.out, "Signal K stream open: median %s over %d boots (%s), against the real signalk-server\n", fmtDuration(medianDuration(open)), len(open), each(open))
		b.rep.add("boot.sk_stream_open", "ms", ms(medianDuration(open)))
	}
}

// ms is d in milliseconds, the unit of the report's boot and start times.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
