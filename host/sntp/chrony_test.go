package sntp

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/beevik/ntp"
	"github.com/jonboulle/clockwork"

	"devhost/host/clock"
	"devhost/host/sntp/sntptest"
	"devhost/host/testio"
)

// chronyWait bounds a wait for chronyd: it needs a moment to bind, longer on a loaded machine.
const chronyWait = 30 * time.Second

// waitAnswer queries until the server answers validly (chronyd needs a moment to bind).
func waitAnswer(t *testing.T, server string) time.Time {
	t.Helper()
	q := NTPQuery(time.Second)
	var got time.Time
	var err error
	defer func() {
		if t.Failed() {
			t.Logf("no valid answer from %s: %v", server, err)
		}
	}()
	testio.Eventually(t, chronyWait, func() bool { got, err = q(context.Background(), server); return err == nil })
	return got
}

func TestChronyAnswers(t *testing.T) {
	ch := sntptest.Chrony(t, true)
	got := waitAnswer(t, ch.Addr)
	// chronyd serves this machine's clock: the answer is today's time, not a made-up one.
	if d := time.Since(got); d < -time.Minute || d > time.Minute {
		t.Fatalf("chronyd's time %v is %v away from this machine's", got, d)
	}
}

// An unsynchronised server's answer is refused: the clock never takes its time.
func TestChronyUnsynchronisedRefused(t *testing.T) {
	ch := sntptest.Chrony(t, false)
	// Wait until chronyd answers at all, whatever it says.
	var resp *ntp.Response
	testio.Eventually(t, chronyWait, func() bool {
		var err error
		resp, err = ntp.QueryWithOptions(ch.Addr, ntp.QueryOptions{Timeout: time.Second})
		return err == nil
	})
	t.Logf("unsynchronised chronyd answers stratum %d, leap %d", resp.Stratum, resp.Leap)
	if got, err := NTPQuery(time.Second)(context.Background(), ch.Addr); err == nil {
		t.Fatalf("unsynchronised chronyd's answer %v accepted", got)
	} else if !strings.Contains(err.Error(), "ntp answer refused") {
		t.Fatalf("refused for another reason: %v", err)
	}
}

// The client against the real server: a dead server first, then chronyd; the device clock
// becomes sntp with chronyd's time.
func TestClientSetsTheClockFromChrony(t *testing.T) {
	ch := sntptest.Chrony(t, true)
	waitAnswer(t, ch.Addr)
	dead := net.JoinHostPort("127.0.0.1", strconv.Itoa(sntptest.FreeUDPPort(t)))
	fake := clockwork.NewFakeClock()
	dev := clock.New(clock.Options{Clock: fake})
	c, err := New(Options{Config: Config{Enabled: true, Servers: []string{dead, ch.Addr}}, Clock: fake,
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
	st := testio.Await(t, chronyWait, "synced", c.Status, func(st Status) bool { return st.Synced })
	if st.Server != ch.Addr || !st.Running {
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
