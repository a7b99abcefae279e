package main_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"reflect"
	"syscall"
	"testing"
	"time"

	"devhost/host/mdns/mdnstest"
	"devhost/host/sntp/sntptest"
)

// The device takes its clock from a real NTP server (chronyd on loopback) once the network
// is up: source sntp, which a manual set can no longer override.
func TestSNTPSetsTheDeviceClock(t *testing.T) {
	ntpd := sntptest.Chrony(t, true)
	d := newDev(t)
	if r := d.call("PUT", "/api/v1/config", fmt.Sprintf(`{"time":{"server0":%q}}`, ntpd.Addr)); r.status != 200 {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	// The SNTP keys take effect at the next boot.
	if r := d.call("POST", "/api/v1/system/reboot", ""); r.status != 202 {
		t.Fatalf("reboot: %d %s", r.status, r.body)
	}
	d.waitBoot()
	var doc map[string]any
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if doc = d.call("GET", "/api/v1/time", "").json(t); doc["source"] == "sntp" {
			break
		}
	}
	if doc["source"] != "sntp" || doc["synced"] != true {
		t.Fatalf("time document %v", doc)
	}
	want := map[string]any{"enabled": true, "running": true, "from_dhcp": true, "servers": []any{ntpd.Addr}}
	if !reflect.DeepEqual(doc["sntp"], want) {
		t.Fatalf("sntp %v, want %v", doc["sntp"], want)
	}
	if now := time.UnixMilli(int64(doc["now"].(float64))); time.Since(now) > time.Minute || time.Until(now) > time.Minute {
		t.Fatalf("device time %v, this machine's %v", now, time.Now())
	}
	if r := d.call("PUT", "/api/v1/time", `{"now":1795000000000}`); r.status != 409 || r.json(t)["error"] != "outranked" {
		t.Fatalf("manual time over sntp: %d %s", r.status, r.body)
	}
}

// zeroconfBrowse runs python3-zeroconf browsing one service type.
func zeroconfBrowse(t *testing.T, python, typ string) <-chan map[string]any {
	t.Helper()
	cmd := exec.Command(python, "../../host/mdns/testdata/zeroconf_peer.py", "browse", typ)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = mdnstest.Writer(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := make(chan map[string]any, 64)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				out <- m
			}
		}
	}()
	t.Cleanup(func() {
		_, _ = io.WriteString(stdin, "stop\n")
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return out
}

func waitPeer(t *testing.T, ch <-chan map[string]any, event, name string) map[string]any {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				t.Fatalf("zeroconf ended while waiting for %s %s", event, name)
			}
			if m["event"] == event && (name == "" || m["name"] == name) {
				return m
			}
			t.Logf("zeroconf: %v", m)
		case <-deadline:
			t.Fatalf("zeroconf: no %s %s", event, name)
		}
	}
}

// The device started with --mdns-iface advertises itself as the spec's "mDNS records" say,
// follows a host name change and says goodbye at shutdown; python3-zeroconf watches, in a
// network namespace of the test's own.
func TestMDNSAdvertisesTheDevice(t *testing.T) {
	if !mdnstest.Netns(t) {
		return
	}
	python := mdnstest.Python(t)
	devs := zeroconfBrowse(t, python, "_dev._tcp")
	https := zeroconfBrowse(t, python, "_http._tcp")
	waitPeer(t, devs, "browsing", "")
	waitPeer(t, https, "browsing", "")
	d := newDev(t, withArgs("--mdns-iface", "lo"))
	info := d.info()
	st := d.call("GET", "/api/v1/net/status", "").json(t)
	host := st["hostname"].(string)
	m := waitPeer(t, devs, "added", host+"._dev._tcp.local.")
	txt := m["txt"].(map[string]any)
	want := map[string]any{"v": info["version"], "app": info["app"], "dev": info["idf_version"], "target": info["chip"],
		"id": st["id"], "api": "/api/v1", "auth": "0"}
	if !reflect.DeepEqual(txt, want) || m["server"] != host+".local." || m["port"] != float64(d.port) ||
		!reflect.DeepEqual(m["addresses"], []any{"127.0.0.1"}) {
		t.Fatalf("zeroconf resolved %v\nwant TXT %v on %s.local:%d", m, want, host, d.port)
	}
	m = waitPeer(t, https, "added", host+"._http._tcp.local.")
	if !reflect.DeepEqual(m["txt"], map[string]any{"path": "/"}) || m["port"] != float64(d.port) {
		t.Fatalf("zeroconf resolved %v", m)
	}

	// A new host name: goodbye under the old one, the services under the new one.
	if r := d.call("PUT", "/api/v1/config", `{"net":{"hostname":"boat"}}`); r.status != 200 {
		t.Fatalf("put hostname: %d %s", r.status, r.body)
	}
	waitPeer(t, devs, "removed", host+"._dev._tcp.local.")
	waitPeer(t, https, "removed", host+"._http._tcp.local.")
	if m := waitPeer(t, devs, "added", "boat._dev._tcp.local."); m["server"] != "boat.local." {
		t.Fatalf("after the rename %v", m)
	}
	waitPeer(t, https, "added", "boat._http._tcp.local.")

	// Shutdown: goodbyes.
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-d.exited:
		if err != nil {
			t.Fatalf("supervisor exit after SIGTERM: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("supervisor did not stop after SIGTERM")
	}
	waitPeer(t, devs, "removed", "boat._dev._tcp.local.")
	waitPeer(t, https, "removed", "boat._http._tcp.local.")
}
