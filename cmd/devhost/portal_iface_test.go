package main_test

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The setup portal on a real interface the board file names (portal_iface): the device runs
// in a network namespace the test makes, its portal on one end of a veth pair with the spec's
// 192.168.4.1/24, and Debian's udhcpc and curl on the other end, in a second namespace.
// Nothing leaves the two namespaces.

func nsIP(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// waitLine waits until the output has a line containing s.
func (l *lines) waitLine(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	l.await(t, timeout, fmt.Sprintf("no line with %q", s), func(all []string) bool {
		return slices.ContainsFunc(all, func(line string) bool { return strings.Contains(line, s) })
	})
}

func TestPortalOnBoardInterface(t *testing.T) {
	for _, tool := range []string{"ip", "udhcpc", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (make test-deps installs it): %v", tool, err)
		}
	}
	suffix := fmt.Sprintf("%04x%04x", os.Getpid()&0xffff, rand.IntN(0x10000))
	srv, cli, srvIf, cliIf := "pif-s-"+suffix, "pif-c-"+suffix, "pis"+suffix, "pic"+suffix
	if err := nsIP("netns", "add", srv); err != nil {
		t.Skipf("network namespaces cannot be made here: %v", err)
	}
	t.Cleanup(func() { _ = nsIP("netns", "del", srv) })
	if err := nsIP("netns", "add", cli); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nsIP("netns", "del", cli) })
	for _, args := range [][]string{
		{"link", "add", srvIf, "netns", srv, "type", "veth", "peer", "name", cliIf, "netns", cli},
		{"-n", srv, "addr", "add", "192.168.4.1/24", "dev", srvIf},
		{"-n", srv, "link", "set", "lo", "up"},
		{"-n", srv, "link", "set", srvIf, "up"},
		{"-n", cli, "link", "set", "lo", "up"},
		{"-n", cli, "link", "set", cliIf, "up"},
	} {
		if err := nsIP(args...); err != nil {
			t.Fatal(err)
		}
	}

	// A fresh device (no network configured) has its portal up from boot. httpd.port is 80
	// inside the device's own namespace, so the probe redirects to http://192.168.4.1/.
	dir := t.TempDir()
	factory, board := filepath.Join(dir, "factory.json"), filepath.Join(dir, "board.json")
	if err := os.WriteFile(factory, []byte(`{"httpd":{"port":80},"time":{"server0":""}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(board, []byte(fmt.Sprintf(`{"portal_iface":%q,"portal_ip":"192.168.4.1"}`, srvIf)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := newLines()
	cmd := exec.Command("ip", "netns", "exec", srv, binary, "--data", filepath.Join(dir, "flash"),
		"--factory", factory, "--listen", "127.0.0.1", "--board", board)
	cmd.Env = append(os.Environ(), "DEVHOST_KEYS="+filepath.Join(dir, "keys"))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		if strings.Contains(out.String(), "WARNING: DATA RACE") {
			t.Errorf("the device reported a data race")
		}
		if t.Failed() {
			t.Logf("device output:\n%s", out.String())
		}
	})
	out.waitLine(t, "devhost: setup portal on http://192.168.4.1/", hangGuard)

	client := func(name string, args ...string) (string, error) {
		c := exec.Command("ip", append([]string{"netns", "exec", cli, "timeout", "120", name}, args...)...)
		b, err := c.CombinedOutput()
		return string(b), err
	}

	// DHCP: the portal's server, bound to the board file's interface, answers a client that
	// has no address yet (broadcast), which a loopback portal could not.
	leaseFile := filepath.Join(dir, "lease")
	script := filepath.Join(dir, "udhcpc.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n[ \"$1\" = bound ] && env > "+leaseFile+"\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if o, err := client("udhcpc", "-f", "-q", "-n", "-t", "20", "-T", "3", "-i", cliIf, "-s", script); err != nil {
		t.Fatalf("udhcpc: %v\n%s", err, o)
	}
	lease := map[string]string{}
	f, err := os.Open(leaseFile)
	if err != nil {
		t.Fatalf("udhcpc's script wrote nothing: %v", err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			lease[k] = v
		}
	}
	f.Close()
	// The portal's lease is 2 hours (README, "The setup portal").
	if lease["serverid"] != "192.168.4.1" || lease["router"] != "192.168.4.1" || !strings.HasPrefix(lease["ip"], "192.168.4.") || lease["lease"] != "7200" {
		t.Fatalf("udhcpc was given %v", lease)
	}
	if err := nsIP("-n", cli, "addr", "add", lease["ip"]+"/24", "dev", cliIf); err != nil {
		t.Fatal(err)
	}

	// HTTP: the device's server answers on the interface's address; a probe redirects to the
	// portal root on it.
	o, err := client("curl", "-sS", "--max-time", "60", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", "http://192.168.4.1/generate_204")
	if err != nil || o != "302 http://192.168.4.1/" {
		t.Fatalf("curl probe: %v %q", err, o)
	}
}
