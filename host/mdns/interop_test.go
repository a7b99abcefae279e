package mdns

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"devhost/host/mdns/mdnstest"
	"devhost/host/testio"
)

// testInfo is the device the interop tests advertise.
var testInfo = DeviceInfo{Port: 8080, Version: "1.4.0", App: "devhost", Platform: "go1.26", Target: "esp32s3", ID: "1a2b"}

// TestNetnsZeroconfSeesTheDevice: python3-zeroconf resolves both device services with every
// TXT key and the host name's address, and an application service; the answer latency it
// sees is logged (measured, never asserted).
func TestNetnsZeroconfSeesTheDevice(t *testing.T) {
	if !mdnstest.Netns(t) {
		return
	}
	python := mdnstest.Python(t)
	dev := realResponder(t, "dev")
	if err := dev.Advertise(testInfo); err != nil {
		t.Fatal(err)
	}
	if err := dev.RegisterApp(Service{Instance: "logger", Type: "_nmea-0183", Proto: "_udp", Port: 10110, TXT: []string{"txtvers=1"}}); err != nil {
		t.Fatal(err)
	}
	testio.Eventually(t, netWait, func() bool {
		for _, s := range dev.Services() {
			if s.State != "announced" {
				return false
			}
		}
		return dev.hostAnnounced()
	})
	for _, s := range DeviceServices(testInfo) {
		pb := mdnstest.StartPeer(t, python, "browse", s.Type+"."+s.Proto)
		wantResolved(t, pb.Wait("added", ""), "dev."+s.Type+"."+s.Proto+".local.", s.TXT)
		pb.Stop()
	}

	const n = 50
	for _, target := range []struct{ typ, instance string }{{"_dev._tcp", "dev"}, {"_nmea-0183._udp", "logger"}} {
		pl := mdnstest.StartPeer(t, python, "latency", target.typ, target.instance, fmt.Sprint(n))
		m := pl.Wait("latency", "")
		if m["server"] != "dev.local." || !reflect.DeepEqual(m["addresses"], []any{"127.0.0.1"}) {
			t.Fatalf("latency run resolved %v", m)
		}
		var ms []float64
		for _, v := range m["ms"].([]any) {
			ms = append(ms, v.(float64))
		}
		if len(ms) != n {
			t.Fatalf("%d resolutions, want %d", len(ms), n)
		}
		sort.Float64s(ms)
		t.Logf("MEASURE mdns answer latency seen by python3-zeroconf, %s %s, %d cold resolutions (SRV+TXT+A): min %.2f ms, median %.2f ms, p90 %.2f ms, max %.2f ms",
			target.instance, target.typ, n, ms[0], ms[n/2], ms[n*9/10], ms[n-1])
	}
}

// avahi is an avahi-daemon with its own D-Bus system bus, configuration and runtime
// directory, inside the test's namespaces.
type avahi struct {
	env []string // DBUS_SYSTEM_BUS_ADDRESS for avahi's clients
}

// startAvahi starts a private D-Bus system bus and avahi-daemon on the namespace's veth
// link. /run is a directory of the test's own (bind-mounted in the test's mount namespace),
// so the daemon's pid file and sockets never meet the host's.
func startAvahi(t *testing.T) *avahi {
	t.Helper()
	for _, bin := range []string{"avahi-daemon", "avahi-browse", "avahi-resolve", "avahi-publish", "dbus-daemon"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed (apt-get install -y avahi-daemon avahi-utils dbus): %v", bin, err)
		}
	}
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	if err := os.MkdirAll(filepath.Join(run, "avahi-daemon"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(run, "/run", "", syscall.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s over /run in the test's mount namespace: %v", run, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount("/run", syscall.MNT_DETACH) })
	// avahi-daemon insists that its runtime directory belongs to the avahi user.
	if out, err := exec.Command("chown", "avahi:avahi", "/run/avahi-daemon").CombinedOutput(); err != nil {
		t.Fatalf("chown /run/avahi-daemon: %v: %s", err, out)
	}
	bus := filepath.Join(dir, "bus")
	busConf := filepath.Join(dir, "bus.conf")
	writeFile(t, busConf, `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=`+bus+`</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
`)
	conf := filepath.Join(dir, "avahi-daemon.conf")
	writeFile(t, conf, `[server]
host-name=avahipeer
domain-name=local
use-ipv4=yes
use-ipv6=no
allow-interfaces=`+mdnstest.LinkName+`
enable-dbus=yes
[publish]
publish-workstation=no
publish-hinfo=no
`)
	a := &avahi{env: append(os.Environ(), "DBUS_SYSTEM_BUS_ADDRESS=unix:path="+bus)}
	dbusLines := a.start(t, "dbus-daemon", "--config-file="+busConf, "--nofork", "--nopidfile", "--print-address")
	waitLine(t, dbusLines, "the D-Bus address", func(l string) bool { return strings.HasPrefix(l, "unix:path=") })
	daemon := a.start(t, "avahi-daemon", "-f", conf, "--no-drop-root", "--no-chroot", "--no-rlimits", "--no-proc-title")
	waitLine(t, daemon, "avahi-daemon's startup", func(l string) bool { return strings.Contains(l, "Server startup complete") })
	return a
}

// start runs a program of the peer until the test ends and returns its output lines
// (stdout and stderr).
func (a *avahi) start(t *testing.T, name string, args ...string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = a.env
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", name, err)
	}
	lines := make(chan string, 256)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads any more
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		_ = pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return lines
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitLine waits for a line that matches, logging the others.
func waitLine(t *testing.T, lines <-chan string, what string, match func(string) bool) string {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("output ended while waiting for %s", what)
			}
			if match(l) {
				return l
			}
			t.Logf("  %s", l)
		case <-deadline:
			t.Fatalf("no %s", what)
		}
	}
}

// avahiResolved is one avahi-browse -p resolution line:
// =;iface;proto;name;type;domain;host;address;port;txt.
type avahiResolved struct {
	name, typ, host, addr, port string
	txt                         map[string]string
}

func parseResolved(l string) (avahiResolved, bool) {
	f := strings.SplitN(l, ";", 10)
	if len(f) != 10 || f[0] != "=" {
		return avahiResolved{}, false
	}
	r := avahiResolved{name: f[3], typ: f[4], host: f[6], addr: f[7], port: f[8], txt: map[string]string{}}
	// The TXT items are quoted strings separated by spaces.
	for _, q := range strings.Split(f[9], "\" \"") {
		q = strings.Trim(q, "\"")
		if q == "" {
			continue
		}
		k, v, _ := strings.Cut(q, "=")
		r.txt[k] = v
	}
	return r, true
}

// TestNetnsInteropAvahi: avahi-daemon (through avahi-browse and avahi-resolve) sees the
// device's services with every TXT key, an application service and the host name, and acts
// on the goodbyes; the device's browse finds a service avahi publishes.
func TestNetnsInteropAvahi(t *testing.T) {
	if !mdnstest.Netns(t, mdnstest.WithLink(), mdnstest.AsRoot()) {
		return
	}
	av := startAvahi(t)
	dev, err := New(Config{Hostname: "dev", Interfaces: []string{mdnstest.LinkName}, Logger: mdnstest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = dev.Close()
		}
	})
	if err := dev.Advertise(testInfo); err != nil {
		t.Fatal(err)
	}
	if err := dev.RegisterApp(Service{Instance: "logger", Type: "_nmea-0183", Proto: "_udp", Port: 10110, TXT: []string{"txtvers=1"}}); err != nil {
		t.Fatal(err)
	}
	if err := dev.Start(); err != nil {
		t.Fatalf("start: %v (%s)", err, mdnstest.Describe())
	}

	// -k: raw service types; -r: resolve; -p: parseable lines.
	browses := map[string]<-chan string{}
	for _, typ := range []string{"_http._tcp", "_dev._tcp", "_nmea-0183._udp"} {
		browses[typ] = av.start(t, "avahi-browse", "-k", "-r", "-p", typ)
	}
	want := map[string]avahiResolved{
		"_http._tcp":      {name: "dev", typ: "_http._tcp", host: "dev.local", addr: mdnstest.LinkAddr, port: "8080", txt: ParseTXT(DeviceServices(testInfo)[0].TXT)},
		"_dev._tcp":       {name: "dev", typ: "_dev._tcp", host: "dev.local", addr: mdnstest.LinkAddr, port: "8080", txt: ParseTXT(DeviceServices(testInfo)[1].TXT)},
		"_nmea-0183._udp": {name: "logger", typ: "_nmea-0183._udp", host: "dev.local", addr: mdnstest.LinkAddr, port: "10110", txt: map[string]string{"txtvers": "1"}},
	}
	for typ, lines := range browses {
		l := waitLine(t, lines, "avahi resolving "+typ, func(l string) bool { return strings.HasPrefix(l, "=;") })
		got, _ := parseResolved(l)
		if !reflect.DeepEqual(got, want[typ]) {
			t.Fatalf("avahi resolved %s as %+v\nwant %+v", typ, got, want[typ])
		}
	}
	c := exec.Command("avahi-resolve", "-4", "-n", "dev.local")
	c.Env = av.env
	out, err := c.CombinedOutput()
	if err != nil || !slices.Equal(strings.Fields(string(out)), []string{"dev.local", mdnstest.LinkAddr}) {
		t.Fatalf("avahi-resolve dev.local: %v: %q", err, out)
	}

	// AAAA: the link's IPv6 (link-local) address, asked over IPv4 mDNS.
	link, err := net.InterfaceByName(mdnstest.LinkName)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := link.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	var v6 []string
	for _, a := range addrs {
		if ip := a.(*net.IPNet).IP; ip.To4() == nil {
			v6 = append(v6, ip.String())
		}
	}
	c = exec.Command("avahi-resolve", "-6", "-n", "dev.local")
	c.Env = av.env
	out, err = c.CombinedOutput()
	if f := strings.Fields(string(out)); err != nil || len(f) != 2 || f[0] != "dev.local" || !slices.Contains(v6, strings.SplitN(f[1], "%", 2)[0]) {
		t.Fatalf("avahi-resolve -6 dev.local: %v: %q, want one of %v", err, out, v6)
	}

	// Ours finds what avahi publishes.
	pub := av.start(t, "avahi-publish", "-s", "boat", "_signalk-http._tcp", "3000", "swname=signalk-server", "roles=master")
	waitLine(t, pub, "avahi-publish established", func(l string) bool { return strings.Contains(l, "Established") })
	b := browse(t, dev, "_signalk-http._tcp")
	e := b.wait(t, "avahi's service added", func(e Event) bool { return e.Type == Added && e.Instance == "boat" })
	if e.Host != "avahipeer.local" || e.Port != 3000 || e.TXT["swname"] != "signalk-server" || e.TXT["roles"] != "master" {
		t.Fatalf("avahi's service %+v", e)
	}

	// Goodbyes: a withdrawn application service, then everything at Close.
	if err := dev.Unregister("logger", "_nmea-0183", "_udp"); err != nil {
		t.Fatal(err)
	}
	waitLine(t, browses["_nmea-0183._udp"], "avahi removing logger", func(l string) bool { return strings.HasPrefix(l, "-;") && strings.Contains(l, ";logger;") })
	closed = true
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"_http._tcp", "_dev._tcp"} {
		waitLine(t, browses[typ], "avahi removing "+typ, func(l string) bool { return strings.HasPrefix(l, "-;") && strings.Contains(l, ";dev;") })
	}
}
