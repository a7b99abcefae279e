package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestParseListenLine(t *testing.T) {
	tests := []struct {
		line, want string
		ok         bool
	}{
		{"devhost: listening on http://127.0.0.1:8080", "http://127.0.0.1:8080", true},
		{"devhost: listening on http://127.0.0.1:8080/\n", "http://127.0.0.1:8080", true},
		{"devhost: listening on http://[::1]:9000", "http://[::1]:9000", true},
		{"devhost: listening on https://127.0.0.1:8080", "", false},
		{"devhost: listening on http://127.0.0.1", "", false},
		{"devhost: listening on http://127.0.0.1:0", "", false},
		{"devhost: listening on http://127.0.0.1:70000", "", false},
		{"devhost: listening on http://127.0.0.1:80/api", "", false},
		{"devhost: listening on http://u@127.0.0.1:80", "", false},
		{"devhost: starting", "", false},
		{"anchor: listening on http://127.0.0.1:8080", "", false},
	}
	for _, tc := range tests {
		got, ok := parseListenLine(tc.line, devicePrefix)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseListenLine(%q) = %q, %v; want %q, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseListenLine(f *testing.F) {
	f.Add("devhost: listening on http://127.0.0.1:8080")
	f.Add("devhost: listening on http://[::1]:1/")
	f.Add("devhost: listening on http://%zz:1")
	f.Fuzz(func(t *testing.T, line string) {
		u, ok := parseListenLine(line, devicePrefix)
		if !ok {
			return
		}
		// What it returns must announce itself the same way again.
		if again, ok := parseListenLine(devicePrefix+u, devicePrefix); !ok || again != u {
			t.Errorf("%q gave %q, which reads back as %q, %v", line, u, again, ok)
		}
	})
}

// procAlive reports whether pid is still a running process a moment after a SIGKILL could take
// effect; a zombie waiting for whoever reaps orphans counts as gone.
func procAlive(pid int) bool {
	for range 100 {
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		if i := strings.LastIndexByte(string(raw), ')'); i >= 0 && strings.HasPrefix(string(raw[i:]), ") Z") {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// A process that starts a child of its own and ignores SIGTERM: stop still ends both.
func TestChildStopKillsTheGroup(t *testing.T) {
	dir := t.TempDir()
	grandchild := filepath.Join(dir, "grandchild.pid")
	script := `trap '' TERM; sleep 60 & echo $! > ` + grandchild + `; echo "devhost: listening on http://127.0.0.1:4242"; wait`
	cmd := exec.Command("sh", "-c", script)
	c, err := startChild(context.Background(), clockwork.NewRealClock(), "script", cmd, devicePrefix, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if c.url != "http://127.0.0.1:4242" {
		t.Errorf("url %q", c.url)
	}
	raw, err := os.ReadFile(grandchild)
	if err != nil {
		t.Fatal(err)
	}
	gpid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	err = c.stop(200 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not stop") {
		t.Errorf("stop of a process ignoring SIGTERM: %v, want a report that it was killed", err)
	}
	if procAlive(gpid) {
		t.Errorf("grandchild %d survived stop", gpid)
	}
}

// A well-behaved process stops on SIGTERM without a complaint.
func TestChildStopsOnSIGTERM(t *testing.T) {
	cmd := exec.Command("sh", "-c", `echo "anchor: listening on http://127.0.0.1:1"; exec sleep 60`)
	c, err := startChild(context.Background(), clockwork.NewRealClock(), "sleeper", cmd, anchorPrefix, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.stop(10 * time.Second); err != nil {
		t.Errorf("stop: %v", err)
	}
	if procAlive(c.pid()) {
		t.Error("the process survived stop")
	}
}

func TestChildExitsBeforeAnnouncing(t *testing.T) {
	cmd := exec.Command("sh", "-c", `echo "devhost: starting"; exit 3`)
	_, err := startChild(context.Background(), clockwork.NewRealClock(), "quitter", cmd, devicePrefix, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited before answering") {
		t.Errorf("err = %v, want an early exit reported", err)
	}
}

func TestChildNeverAnnounces(t *testing.T) {
	clk := clockwork.NewFakeClock()
	cmd := exec.Command("sleep", "60")
	errc := make(chan error, 1)
	go func() {
		_, err := startChild(context.Background(), clk, "mute", cmd, devicePrefix, time.Minute)
		errc <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	// sleep ends on the SIGTERM that follows the timeout, so stop's grace timer never fires.
	clk.Advance(time.Minute)
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "did not announce") {
			t.Errorf("err = %v, want a timeout", err)
		}
	case <-ctx.Done():
		t.Fatal("startChild did not give up after its timeout")
	}
	if cmd.Process != nil && procAlive(cmd.Process.Pid) {
		t.Error("the silent process was left running")
	}
}

// The device app is the supervisor's only child; its memory is read from /proc.
func TestChildRSS(t *testing.T) {
	cmd := exec.Command("sh", "-c", `sleep 60 & echo "devhost: listening on http://127.0.0.1:1"; wait`)
	c, err := startChild(context.Background(), clockwork.NewRealClock(), "parent", cmd, devicePrefix, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.stop(time.Second) }()
	kib, cpid, err := childRSS(c.pid())
	if err != nil {
		t.Fatal(err)
	}
	if kib <= 0 || cpid == c.pid() {
		t.Errorf("child %d with %d KiB", cpid, kib)
	}
	if _, _, err := childRSS(cpid); err == nil {
		t.Error("a process without children reported one")
	}
}
