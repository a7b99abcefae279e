package portal

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The real-peer test: two network namespaces made by the test, joined by a veth pair. The
// portal runs on the server end (its sockets are made inside the server namespace, so it
// listens on the veth address 192.168.4.1, a real interface), Debian's udhcpc, dig and curl
// run on the client end. Nothing leaves the two namespaces.

type netns struct {
	t        *testing.T
	srv, cli string // namespace names
	srvIf    string // veth end in srv
	cliIf    string // veth end in cli
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func newNetns(t *testing.T) *netns {
	t.Helper()
	suffix := fmt.Sprintf("%04x%04x", os.Getpid()&0xffff, rand.IntN(0x10000))
	n := &netns{t: t, srv: "ptl-s-" + suffix, cli: "ptl-c-" + suffix, srvIf: "pvs" + suffix, cliIf: "pvc" + suffix}
	if err := ipCmd("netns", "add", n.srv); err != nil {
		t.Skipf("network namespaces cannot be made here: %v", err)
	}
	t.Cleanup(func() { _ = ipCmd("netns", "del", n.srv) })
	if err := ipCmd("netns", "add", n.cli); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ipCmd("netns", "del", n.cli)
		_ = os.RemoveAll(filepath.Join("/etc/netns", n.cli))
	})
	for _, args := range [][]string{
		{"link", "add", n.srvIf, "netns", n.srv, "type", "veth", "peer", "name", n.cliIf, "netns", n.cli},
		{"-n", n.srv, "addr", "add", "192.168.4.1/24", "dev", n.srvIf},
		{"-n", n.srv, "link", "set", "lo", "up"},
		{"-n", n.srv, "link", "set", n.srvIf, "up"},
		{"-n", n.cli, "link", "set", "lo", "up"},
		{"-n", n.cli, "link", "set", n.cliIf, "up"},
	} {
		if err := ipCmd(args...); err != nil {
			t.Fatal(err)
		}
	}
	// `ip netns exec` gives the client this resolv.conf: names resolve through the portal, as
	// a phone's do once DHCP has named the portal its DNS server.
	dir := filepath.Join("/etc/netns", n.cli)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte("nameserver 192.168.4.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

// inServer runs fn on an OS thread moved into the server namespace; sockets fn opens belong
// to that namespace for their whole life. The thread is never returned to the scheduler.
func (n *netns) inServer(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // no unlock: the thread ends with this goroutine
		f, err := os.Open(filepath.Join("/var/run/netns", n.srv))
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", n.srv, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// client runs a command in the client namespace.
func (n *netns) client(timeout time.Duration, name string, args ...string) (string, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.cli, "timeout", strconv.Itoa(int(timeout / time.Second)), name}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestRealPeersInNamespace(t *testing.T) {
	for _, tool := range []string{"ip", "udhcpc", "dig", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (make test-deps installs it): %v", tool, err)
		}
	}
	n := newNetns(t)
	r := newRig(t, "192.168.4.1")
	r.p.opts.Iface = n.srvIf
	r.port = 80
	if err := n.inServer(func() error { return r.p.Up("dev-abcd", "") }); err != nil {
		t.Fatalf("portal up in %s: %v", n.srv, err)
	}

	// DHCP: udhcpc asks for a lease; its script records what it was given.
	leaseFile := filepath.Join(t.TempDir(), "lease")
	script := filepath.Join(t.TempDir(), "udhcpc.sh")
	body := "#!/bin/sh\n[ \"$1\" = bound ] && env > " + leaseFile + "\nexit 0\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := n.client(60*time.Second, "udhcpc", "-f", "-q", "-n", "-t", "10", "-T", "3", "-i", n.cliIf, "-s", script)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("udhcpc: %v\n%s", err, out)
	}
	lease := readEnv(t, leaseFile)
	if lease["router"] != "192.168.4.1" || lease["dns"] != "192.168.4.1" || lease["subnet"] != "255.255.255.0" || lease["serverid"] != "192.168.4.1" {
		t.Fatalf("udhcpc was given %v", lease)
	}
	got := net.ParseIP(lease["ip"]).To4()
	if got == nil || !got.Mask(portalMask).Equal(net.IPv4(192, 168, 4, 0).To4()) || got[3] < 2 || got[3] > 254 {
		t.Fatalf("leased address %q", lease["ip"])
	}
	if lease["lease"] != strconv.Itoa(int(DefaultLeaseTime/time.Second)) {
		t.Fatalf("lease time %q s, want %d", lease["lease"], int(DefaultLeaseTime/time.Second))
	}
	t.Logf("udhcpc: lease of %s for %s s (router %s, dns %s), obtained in %v", lease["ip"], lease["lease"], lease["router"], lease["dns"], took.Round(time.Millisecond))
	if c := r.p.Clients(); c != 1 {
		t.Fatalf("Clients() = %d after udhcpc's lease", c)
	}
	if err := ipCmd("-n", n.cli, "addr", "add", lease["ip"]+"/24", "dev", n.cliIf); err != nil {
		t.Fatal(err)
	}

	// DNS: any name resolves to the portal.
	for _, name := range []string{"connectivitycheck.gstatic.com", "captive.apple.com", "www.msftconnecttest.com", "no-such-host.invalid"} {
		out, err := n.client(30*time.Second, "dig", "+short", "+time=5", "+tries=3", "@192.168.4.1", name, "A")
		if err != nil || strings.TrimSpace(out) != "192.168.4.1" {
			t.Fatalf("dig %s: %v %q", name, err, out)
		}
	}

	// HTTP: curl fetches a probe by name, follows the redirect and lands on the portal page.
	for _, probe := range []string{"http://connectivitycheck.gstatic.com/generate_204", "http://captive.apple.com/hotspot-detect.html"} {
		out, err := n.client(30*time.Second, "curl", "-sS", "-L", "--max-time", "20", "-w", "\n%{http_code} %{url_effective} %{num_redirects}", probe)
		if err != nil {
			t.Fatalf("curl %s: %v\n%s", probe, err, out)
		}
		if !strings.Contains(out, "devhost setup") || !strings.HasSuffix(out, "\n200 http://192.168.4.1/ 1") {
			t.Fatalf("curl %s: %q", probe, out)
		}
	}

	// Down: the lease table goes, and so do the services.
	r.p.Down()
	if c := r.p.Clients(); c != 0 {
		t.Fatalf("Clients() = %d while down", c)
	}
	if out, err := n.client(30*time.Second, "curl", "-sS", "--max-time", "5", "http://192.168.4.1/"); err == nil {
		t.Fatalf("the portal page answered while the portal is down: %q", out)
	}
}

func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("udhcpc's script wrote nothing: %v", err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			m[k] = v
		}
	}
	return m
}
