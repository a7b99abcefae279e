package sntp

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/beevik/ntp"
	"github.com/jonboulle/clockwork"

	"devhost/host/clock"
)

// chrony is a chronyd serving NTP on a loopback port of its own, with its configuration,
// pid and drift files in the test's temporary directory. It never touches the host's clock
// (-x) and has no command socket.
type chrony struct{ addr string }

// startChrony starts chronyd; synced makes it serve its local clock as a stratum-8 source
// (`local`), otherwise it has no source at all and answers unsynchronised.
func startChrony(t *testing.T, synced bool) chrony {
	t.Helper()
	bin, err := exec.LookPath("chronyd")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/chronyd"); serr != nil {
			t.Skipf("chronyd not installed (apt-get install -y chrony): %v", err)
		}
		bin = "/usr/sbin/chronyd"
	}
	dir := t.TempDir()
	port := freeUDPPort(t)
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
	return chrony{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
}

// freeUDPPort is a loopback UDP port nothing listens on right now.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("chronyd: %s", p)
	return len(p), nil
}

// waitAnswer queries until the server answers validly (chronyd needs a moment to bind).
func waitAnswer(t *testing.T, server string) time.Time {
	t.Helper()
	q := NTPQuery(time.Second)
	var last error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		got, err := q(context.Background(), server)
		if err == nil {
			return got
		}
		last = err
	}
	t.Fatalf("no valid answer from %s: %v", server, last)
	return time.Time{}
}

func TestChronyAnswers(t *testing.T) {
	ch := startChrony(t, true)
	got := waitAnswer(t, ch.addr)
	// chronyd serves this machine's clock: the answer is today's time, not a made-up one.
	if d := time.Since(got); d < -time.Minute || d > time.Minute {
		t.Fatalf("chronyd's time %v is %v away from this machine's", got, d)
	}
}

// An unsynchronised server's answer is refused: the clock never takes its time.
func TestChronyUnsynchronisedRefused(t *testing.T) {
	ch := startChrony(t, false)
	// Wait until chronyd answers at all, whatever it says.
	var resp *ntp.Response
	var err error
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if resp, err = ntp.QueryWithOptions(ch.addr, ntp.QueryOptions{Timeout: time.Second}); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("chronyd never answered: %v", err)
	}
	t.Logf("unsynchronised chronyd answers stratum %d, leap %d", resp.Stratum, resp.Leap)
	if got, err := NTPQuery(time.Second)(context.Background(), ch.addr); err == nil {
		t.Fatalf("unsynchronised chronyd's answer %v accepted", got)
	} else if !strings.Contains(err.Error(), "ntp answer refused") {
		t.Fatalf("refused for another reason: %v", err)
	}
}

// The client against the real server: a dead server first, then chronyd; the device clock
// becomes sntp with chronyd's time.
func TestClientSetsTheClockFromChrony(t *testing.T) {
	ch := startChrony(t, true)
	waitAnswer(t, ch.addr)
	dead := net.JoinHostPort("127.0.0.1", strconv.Itoa(freeUDPPort(t)))
	fake := clockwork.NewFakeClock()
	dev := clock.New(clock.Options{Clock: fake})
	c, err := New(Options{Config: Config{Enabled: true, Servers: []string{dead, ch.addr}}, Clock: fake,
		Query: NTPQuery(2 * time.Second),
		Set:   func(t time.Time) error { return dev.Set(clock.SourceSNTP, t) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	c.NetworkUp()
	var st Status
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && !st.Synced; time.Sleep(20 * time.Millisecond) {
		st = c.Status()
	}
	if !st.Synced || st.Server != ch.addr || !st.Running {
		t.Fatalf("status %+v", st)
	}
	now, src, synced := dev.Now()
	if src != clock.SourceSNTP || !synced {
		t.Fatalf("clock %v %v", src, synced)
	}
	if d := time.Since(now); d < -time.Minute || d > time.Minute {
		t.Fatalf("device clock %v is %v away from this machine's", now, d)
	}
}
