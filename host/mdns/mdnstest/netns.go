// Package mdnstest runs a test inside a network namespace of its own, so that real multicast
// traffic never leaves the test: the test binary re-executes itself for that one test under
// `unshare -rn` (a new user and network namespace, which needs no privileges where user
// namespaces are allowed), and inside brings up loopback with multicast routed to it.
package mdnstest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// envInside marks the re-executed test binary.
const envInside = "DEVHOST_TEST_NETNS"

// The veth pair WithLink creates: LinkName carries LinkAddr, its peer only completes the
// link. Multicast sent on LinkName reaches every socket in the namespace that joined the
// group there (the kernel loops it back), as on a real LAN seen from one host.
const (
	LinkName = "mdns0"
	LinkPeer = "mdns1"
	LinkAddr = "10.99.0.1"
)

// Option changes the namespace Netns sets up.
type Option func(*setup)

type setup struct{ link, root bool }

// WithLink adds a non-loopback link (a veth pair) with LinkAddr and routes multicast and the
// default route through it instead of loopback: for peers that ignore loopback interfaces.
func WithLink() Option { return func(s *setup) { s.link = true } }

// AsRoot runs the test as the real root user in its own network, mount and PID namespaces
// instead of a user namespace: for daemons that insist on owning files as a system user
// (avahi-daemon chowns its runtime directory to "avahi", a user a user namespace mapping only
// the caller does not have). The test may then mount over /run without touching the host's,
// and every process it starts dies with it (the PID namespace's init is the test). Skipped
// unless the test runs as root.
func AsRoot() Option { return func(s *setup) { s.root = true } }

// Netns makes the calling top-level test run in a fresh network namespace. Outside the
// namespace it runs the test there, reports the result and returns false: the caller returns
// at once. Inside it sets up loopback (up, multicast on, 224.0.0.0/4 and a default route
// through it: some responders need a default route) and returns true.
//
// Where a namespace cannot be made the test is skipped, saying why; under -short it is
// skipped too (the fast loop leaves out the namespace tests).
func Netns(t *testing.T, opts ...Option) bool {
	t.Helper()
	var s setup
	for _, o := range opts {
		o(&s)
	}
	if os.Getenv(envInside) == "1" {
		setUp(t, s)
		return true
	}
	if strings.Contains(t.Name(), "/") {
		t.Fatal("mdnstest.Netns must be called from a top-level test")
	}
	if testing.Short() {
		t.Skip("runs in a network namespace with real peers: skipped in -short")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skipf("cannot create a network namespace: unshare(1) not found: %v", err)
	}
	flags := []string{"-rn"}
	if s.root {
		if os.Geteuid() != 0 {
			t.Skip("needs root: the peer daemon chowns its files to a system user, which a user namespace mapping only the caller cannot provide")
		}
		flags = []string{"-nmp", "--fork", "--kill-child"}
	}
	if out, err := exec.Command("unshare", append(flags, "true")...).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace here (unshare %s: %v: %s)", strings.Join(flags, " "), err, bytes.TrimSpace(out))
	}
	timeout := 5 * time.Minute
	if d, ok := t.Deadline(); ok {
		timeout = time.Until(d) - 5*time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := append(flags, os.Args[0],
		"-test.run", "^"+regexp.QuoteMeta(t.Name())+"$",
		"-test.count=1", "-test.v", "-test.timeout="+timeout.String())
	cmd := exec.CommandContext(ctx, "unshare", args...)
	cmd.Env = append(os.Environ(), envInside+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s failed inside its network namespace (%v):\n%s", t.Name(), err, out)
	}
	if bytes.Contains(out, []byte("--- SKIP: "+t.Name())) {
		t.Skipf("skipped inside its network namespace:\n%s", out)
	}
	if !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("%s did not run inside its network namespace:\n%s", t.Name(), out)
	}
	t.Logf("inside its network namespace:\n%s", out)
	return false
}

func setUp(t *testing.T, s setup) {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	// A fresh namespace has loopback only; anything else means this is not one, and
	// multicast would reach a real network.
	for _, i := range ifs {
		if i.Name != "lo" {
			t.Fatalf("%s=1 but interface %q exists: not a fresh network namespace", envInside, i.Name)
		}
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("cannot set up loopback in the namespace: ip(8) not found: %v", err)
	}
	cmds := [][]string{
		{"link", "set", "lo", "up"},
		{"link", "set", "lo", "multicast", "on"},
	}
	route := "lo"
	if s.link {
		route = LinkName
		cmds = append(cmds,
			[]string{"link", "add", LinkName, "type", "veth", "peer", "name", LinkPeer},
			[]string{"addr", "add", LinkAddr + "/24", "dev", LinkName},
			[]string{"link", "set", LinkName, "up", "multicast", "on"},
			[]string{"link", "set", LinkPeer, "up", "multicast", "on"},
		)
	}
	cmds = append(cmds,
		[]string{"route", "add", "224.0.0.0/4", "dev", route},
		[]string{"route", "add", "default", "dev", route},
	)
	for _, args := range cmds {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
}

// Python returns a Python 3 interpreter that has the zeroconf module (Debian's
// python3-zeroconf), or skips the test saying how to get one.
func Python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import zeroconf").Run() == nil {
			return p
		}
	}
	t.Skip("python3-zeroconf is not installed (apt-get install -y python3-zeroconf): no independent mDNS implementation to test against")
	return ""
}

// Describe is a one-line summary of the namespace's interfaces, for test logs.
func Describe() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		fmt.Fprintf(&b, "%s %v %v; ", i.Name, i.Flags, addrs)
	}
	return b.String()
}
