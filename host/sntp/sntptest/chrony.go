// Package sntptest runs a real NTP server for tests: Debian's chronyd on a loopback port of
// its own.
package sntptest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// Server is a chronyd serving NTP on a loopback port of its own, with its configuration,
// pid and drift files in the test's temporary directory. It never touches the host's clock
// (-x) and has no command socket.
type Server struct {
	Addr string // host:port
}

// Chrony starts chronyd until the test ends, skipping the test where chrony is not
// installed. synced makes it serve its local clock as a stratum-8 source (`local`);
// otherwise it has no source at all and answers unsynchronised.
func Chrony(t testing.TB, synced bool) Server {
	t.Helper()
	bin, err := exec.LookPath("chronyd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/chronyd"); serr != nil {
			t.Skipf("chronyd not installed (apt-get install -y chrony): %v", err)
		}
		bin = "/usr/sbin/chronyd"
	}
	dir := t.TempDir()
	port := FreeUDPPort(t)
	conf := fmt.Sprintf("port %d\nbindaddress 127.0.0.1\nallow 127.0.0.1\ncmdport 0\npidfile %s\ndriftfile %s\n",
		port, filepath.Join(dir, "chronyd.pid"), filepath.Join(dir, "drift"))
	if synced {
		conf += "local stratum 8\n"
	}
	confPath := filepath.Join(dir, "chrony.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-d", "-x", "-f", confPath}
	if os.Geteuid() == 0 {
		args = append(args, "-u", "root") // keep root: the temporary files are root's
	} else {
		args = append(args, "-U")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = testWriter{t}, testWriter{t}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start chronyd: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
}

// FreeUDPPort is a loopback UDP port nothing listens on right now.
func FreeUDPPort(t testing.TB) int {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("chronyd: %s", p)
	return len(p), nil
}
