package skdiscovery

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"devhost/host/mdns"
	"devhost/host/mdns/mdnstest"
	"devhost/host/signalk/sktest"
)

// The tests in this file send real multicast, only inside the network namespace that
// mdnstest.Netns creates for each of them.

func responder(t *testing.T, host, ifname string) *mdns.Responder {
	t.Helper()
	return mdnstest.Responder(t, host, func(log *slog.Logger) (*mdns.Responder, error) {
		return mdns.New(mdns.Config{Hostname: host, Interfaces: []string{ifname}, Logger: log})
	})
}

// discover runs a Discoverer with short passes on its own responder.
func discover(t *testing.T, ifname string) (*Discoverer, chan []Server) {
	t.Helper()
	passes := make(chan []Server, 64)
	d, err := New(Config{
		Browser:  responder(t, "device", ifname),
		Interval: func() time.Duration { return time.Second },
		LinkUp:   func() bool { return true },
		Window:   1500 * time.Millisecond,
		OnChange: func(s []Server) { passes <- s },
		Logger:   mdnstest.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return d, passes
}

func waitServers(t *testing.T, passes chan []Server, what string, ok func([]Server) bool) []Server {
	t.Helper()
	deadline := time.After(hangGuard)
	var last []Server
	for {
		select {
		case s := <-passes:
			if ok(s) {
				return s
			}
			last = s
		case <-deadline:
			t.Fatalf("%s: last pass saw %v", what, last)
		}
	}
}

func find(ss []Server, scheme, instance string) (Server, bool) {
	for _, s := range ss {
		if s.Scheme == scheme && s.Instance == instance {
			return s, true
		}
	}
	return Server{}, false
}

func TestNetnsDiscovery(t *testing.T) {
	if !mdnstest.Netns(t) {
		return
	}
	boat := responder(t, "pi", "lo")
	txt := []string{"txtvers=1", "swname=signalk-server", "swvers=2.32.0", "roles=master, main", "self=urn:mrn:signalk:uuid:b"}
	for _, s := range []mdns.Service{
		{Instance: "boat", Type: "_signalk-http", Proto: "_tcp", Port: 3000, TXT: txt},
		{Instance: "boat", Type: "_signalk-https", Proto: "_tcp", Port: 3443, TXT: txt},
		{Instance: "boat", Type: "_http", Proto: "_tcp", Port: 3000}, // not a Signal K type
	} {
		if err := boat.Register(s); err != nil {
			t.Fatal(err)
		}
	}
	d, passes := discover(t, "lo")
	got := waitServers(t, passes, "both advertisements", func(ss []Server) bool { return len(ss) == 2 })
	for _, want := range []struct {
		scheme string
		port   int
	}{{"http", 3000}, {"https", 3443}} {
		s, ok := find(got, want.scheme, "boat")
		if !ok || s.Port != want.port || s.Host != "pi.local" || s.Self != "urn:mrn:signalk:uuid:b" ||
			!s.HasRole("master") || s.SWVers != "2.32.0" || s.Dial() != "127.0.0.1:"+strconv.Itoa(want.port) {
			t.Fatalf("%s server %+v", want.scheme, s)
		}
	}
	if listed := d.Servers(); len(listed) != 2 || listed[0].Scheme != "http" || listed[1].Scheme != "https" {
		t.Fatalf("Servers() = %v", listed)
	}

	// Unregistering sends a goodbye: the entry leaves within a pass, not after two intervals.
	if err := boat.Unregister("boat", "_signalk-https", "_tcp"); err != nil {
		t.Fatal(err)
	}
	waitServers(t, passes, "https entry gone", func(ss []Server) bool {
		_, https := find(ss, "https", "boat")
		_, http := find(ss, "http", "boat")
		return http && !https
	})
}

func TestNetnsDiscoversZeroconfServer(t *testing.T) {
	if !mdnstest.Netns(t) {
		return
	}
	python := mdnstest.Python(t)
	script, err := filepath.Abs("../mdns/testdata/zeroconf_peer.py")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, script, "register", "_signalk-http._tcp", "zc-boat", "3000", "zcpi", "127.0.0.1",
		"txtvers=1", "swname=signalk-server", "swvers=2.32.0", "roles=master, main", "self=urn:mrn:signalk:uuid:z")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = mdnstest.Writer(t), mdnstest.Writer(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	_, passes := discover(t, "lo")
	got := waitServers(t, passes, "zeroconf server", func(ss []Server) bool { return len(ss) == 1 })
	if s := got[0]; s.Self != "urn:mrn:signalk:uuid:z" || s.Host != "zcpi.local" || s.Port != 3000 || s.Scheme != "http" {
		t.Fatalf("server %+v", s)
	}
	_, _ = io.WriteString(stdin, "stop\n")
	waitServers(t, passes, "zeroconf server gone", func(ss []Server) bool { return len(ss) == 0 })
}

// TestNetnsDiscoversRealSignalKServer finds the real signalk-server (from the harness's
// cached install) by its own mDNS advertisement. Its responder ignores loopback interfaces, so
// the namespace gets a veth link as well.
//
// The server starts one advertisement per service type, and in a namespace one of them at
// random never gets past probing the shared host name (its library's fault: the other
// advertisements carry on). So the server is restarted until `_signalk-http._tcp` is out.
func TestNetnsDiscoversRealSignalKServer(t *testing.T) {
	// Installing needs the registry, which the namespace cannot reach: do it outside.
	dir := sktest.Ensure(t)
	if !mdnstest.Netns(t, mdnstest.WithLink()) {
		return
	}
	_, passes := discover(t, mdnstest.LinkName)
	for attempt := 1; attempt <= 8; attempt++ {
		port, self, stop := startSignalK(t, dir)
		deadline := time.After(10 * time.Second) // a window, not a bound: then the server restarts
	wait:
		for {
			select {
			case ss := <-passes:
				for _, s := range ss {
					if s.Port != port || s.Scheme != "http" {
						continue
					}
					if s.Self != self || s.SWName != "signalk-server" || s.SWVers != sktest.ServerVersion || !s.HasRole("master") {
						t.Fatalf("real server %+v, self %q", s, self)
					}
					t.Logf("discovered %s on start %d, TXT %v", s, attempt, s.TXT)
					return
				}
			case <-deadline:
				break wait
			}
		}
		t.Logf("start %d: _signalk-http._tcp not advertised, restarting the server", attempt)
		stop()
	}
	t.Fatal("the real server was never discovered")
}

// startSignalK runs signalk-server with its mDNS responder on (security off: only discovery
// is tested) and returns its port, its self URN and a stop function (also run at cleanup).
func startSignalK(t *testing.T, dir string) (int, string, func()) {
	t.Helper()
	cfg := t.TempDir()
	settings := `{"interfaces":{"tcp":false,"nmea-tcp":false},"mdns":true,"pipedProviders":[]}`
	if err := os.WriteFile(filepath.Join(cfg, "settings.json"), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := sktest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sktest.NodeBinary(dir), sktest.ServerScript(dir), "-c", cfg)
	cmd.Dir = cfg
	cmd.Env = append(os.Environ(),
		"PORT="+strconv.Itoa(port),
		"NODE_OPTIONS=--require "+filepath.Join(dir, "loopback.js"),
		"SIGNALK_DISABLE_SERVER_UPDATES=1",
		"SIGNALK_NODE_CONFIG_DIR="+cfg)
	out := mdnstest.Writer(t)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start signalk-server: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		})
	}
	t.Cleanup(stop)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	var self string
	for end := time.Now().Add(hangGuard); ; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("signalk-server did not answer GET /signalk/v1/api/self")
		}
		resp, err := http.Get(base + "/signalk/v1/api/self")
		if err != nil {
			continue
		}
		err = json.NewDecoder(resp.Body).Decode(&self)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			break
		}
	}
	return port, strings.TrimPrefix(self, "vessels."), stop
}
