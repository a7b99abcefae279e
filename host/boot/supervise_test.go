package boot

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/testio"
)

// rig is one supervised test app: its plan, its records and the supervisor's output.
type rig struct {
	t      *testing.T
	dir    string // the test app's records
	data   string // the flash
	clock  *clockwork.FakeClock
	stdout testio.Buffer
	stderr testio.Buffer
	logs   testio.Buffer
	done   chan error
	cancel context.CancelFunc
}

func newRig(t *testing.T, plan ...string) *rig {
	t.Helper()
	r := &rig{t: t, dir: t.TempDir(), data: filepath.Join(t.TempDir(), "flash"), clock: clockwork.NewFakeClock()}
	if err := os.WriteFile(filepath.Join(r.dir, "plan"), []byte(strings.Join(plan, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BOOTTEST_DIR", r.dir)
	// Under -race an exiting process sleeps a second by default; the test app exits often.
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	return r
}

func (r *rig) options() Options {
	return Options{DataDir: r.data, Stdout: &r.stdout, Stderr: &r.stderr, Clock: r.clock,
		Logger: slog.New(slog.NewTextHandler(&r.logs, nil))}
}

// start runs Supervise in the background; the test ends it (if still running) at cleanup.
func (r *rig) start(opts Options) {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.done = make(chan error, 1)
	go func() { r.done <- Supervise(ctx, opts) }()
	r.t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			r.t.Error("Supervise did not return at cleanup")
		}
		if r.t.Failed() {
			r.t.Logf("supervisor log:\n%s\napp stderr:\n%s", r.logs.String(), r.stderr.String())
		}
	})
}

// autoAdvance fires every timer the supervisor arms at once (backoff, deep sleep), for tests
// about what happens across restarts rather than when.
func (r *rig) autoAdvance() {
	ctx, cancel := context.WithCancel(context.Background())
	r.t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			if r.clock.BlockUntilContext(ctx, 1) != nil {
				return
			}
			r.clock.Advance(time.Hour)
		}
	}()
}

func (r *rig) wait() error {
	r.t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for cleanup
		return err
	case <-time.After(60 * time.Second):
		r.t.Fatal("Supervise did not return")
	}
	return nil
}

func (r *rig) boots() []bootRecord {
	r.t.Helper()
	f, err := os.Open(filepath.Join(r.dir, "boots.jsonl"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	var out []bootRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var b bootRecord
		if err := json.Unmarshal(sc.Bytes(), &b); err != nil {
			r.t.Fatalf("boot record %q: %v", sc.Text(), err)
		}
		out = append(out, b)
	}
	return out
}

func (r *rig) waitFor(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *rig) waitBoots(n int) []bootRecord {
	r.t.Helper()
	r.waitFor(strconv.Itoa(n)+" boots", func() bool { return len(r.boots()) >= n })
	return r.boots()
}

// marker waits for a marker file the test app writes and returns the pid in it.
func (r *rig) marker(name string, boot int) int {
	r.t.Helper()
	p := filepath.Join(r.dir, name+"."+strconv.Itoa(boot))
	r.waitFor(p, func() bool { _, err := os.Stat(p); return err == nil })
	b, _ := os.ReadFile(p)
	pid, _ := strconv.Atoi(string(b))
	return pid
}

// alive reports whether pid is a process that has not died (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func exeSum(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestResetReasonsAcrossRestarts(t *testing.T) {
	r := newRig(t, "reboot", "watchdog", "panic boom", "panic task_wdt: main loop stalled", "deepsleep 10ms cafe01",
		"reboot", "exit 0")
	r.autoAdvance()
	r.start(r.options())
	if err := r.wait(); err != nil {
		t.Fatalf("Supervise: %v", err)
	}
	want := []struct {
		reason string
		rtc    string
	}{
		{ReasonPowerOn, ""}, {ReasonSoftware, ""}, {ReasonSoftware, ""}, {ReasonPanic, ""}, {ReasonTaskWDT, ""},
		{ReasonDeepSleep, "cafe01"}, {ReasonSoftware, ""},
	}
	got := r.boots()
	if len(got) != len(want) {
		t.Fatalf("%d boots: %+v", len(got), got)
	}
	for i, w := range want {
		b := got[i]
		if b.Reason != w.reason || hex.EncodeToString(b.RTC) != w.rtc || b.Boot != i+1 {
			t.Errorf("boot %d: reason %q rtc %x count %d; want %q rtc %s", i+1, b.Reason, b.RTC, b.Boot, w.reason, w.rtc)
		}
		if !b.PowerOnAt.Equal(got[0].PowerOnAt) || b.PowerOnAt.IsZero() {
			t.Errorf("boot %d: power-on time %v, first boot said %v", i+1, b.PowerOnAt, got[0].PowerOnAt)
		}
	}
	// The last crash is the one kept, and the task watchdog's message decided its reason.
	cd, _, err := ReadCoreDump(r.data)
	if err != nil || cd.Reason != ReasonTaskWDT || cd.Message != "task_wdt: main loop stalled" || cd.BootCount != 4 {
		t.Fatalf("core dump %+v %v", cd, err)
	}
	if !strings.Contains(r.stdout.String(), "test app stdout boot 7") {
		t.Fatalf("app stdout not forwarded: %q", r.stdout.String())
	}
	if !strings.Contains(r.stderr.String(), "panic: boom") {
		t.Fatalf("app stderr not forwarded: %q", r.stderr.String())
	}
}

func TestCrashKinds(t *testing.T) {
	sum := exeSum(t)
	cases := []struct {
		name, action string
		check        func(t *testing.T, cd *CoreDump, raw []byte)
	}{
		{"panic", "panic deliberate crash", func(t *testing.T, cd *CoreDump, raw []byte) {
			if cd.Message != "deliberate crash" || !strings.HasPrefix(string(raw), "panic: deliberate crash\n") {
				t.Fatalf("message %q raw %.80q", cd.Message, raw)
			}
			if !strings.HasPrefix(cd.Task, "goroutine ") || !strings.HasSuffix(cd.Task, " devhost/host/boot.crashingWorker") {
				t.Fatalf("task %q", cd.Task)
			}
			// The PC is crashingWorker's frame, not the runtime's panic code.
			frame := "devhost/host/boot.crashingWorker("
			i := strings.Index(string(raw), frame)
			if i < 0 || !strings.Contains(strings.SplitN(string(raw[i:]), "\n", 3)[1], "pc="+cd.PC) {
				t.Fatalf("pc %s is not crashingWorker's in\n%s", cd.PC, raw)
			}
			if cd.BacktraceCorrupted || len(cd.Backtrace) < 3 || cd.Backtrace[0] == cd.PC {
				t.Fatalf("backtrace %v corrupted %v", cd.Backtrace, cd.BacktraceCorrupted)
			}
		}},
		{"nil dereference", "nil", func(t *testing.T, cd *CoreDump, raw []byte) {
			if cd.ExcCause != "SIGSEGV" || cd.ExcVaddr != "0x0" || !strings.Contains(cd.Message, "nil pointer dereference") ||
				!strings.HasSuffix(cd.Task, "boot.nilWorker") || len(cd.Backtrace) == 0 {
				t.Fatalf("record %+v", cd)
			}
		}},
		{"killed by a signal", "kill", func(t *testing.T, cd *CoreDump, raw []byte) {
			if cd.ExcCause != "SIGKILL" || cd.Message != "killed by signal SIGKILL" || !strings.HasPrefix(cd.Task, "pid ") ||
				!cd.BacktraceCorrupted || len(cd.Backtrace) != 0 {
				t.Fatalf("record %+v", cd)
			}
		}},
		{"other exit status", "exit 3", func(t *testing.T, cd *CoreDump, raw []byte) {
			if cd.Message != "exit status 3: leaving with 3" || !strings.Contains(string(raw), "leaving with 3") {
				t.Fatalf("record %+v raw %q", cd, raw)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, c.action, "exit 0")
			r.autoAdvance()
			r.start(r.options())
			if err := r.wait(); err != nil {
				t.Fatal(err)
			}
			if b := r.boots(); len(b) != 2 || b[1].Reason != ReasonPanic {
				t.Fatalf("boots %+v", b)
			}
			cd, raw, err := ReadCoreDump(r.data)
			if err != nil {
				t.Fatal(err)
			}
			if !cd.Present || !cd.Valid || cd.Version != CoreDumpVersion || cd.Size != len(raw) || cd.AppELFSHA256 != sum ||
				cd.Reason != ReasonPanic || cd.BootCount != 1 {
				t.Fatalf("record %+v", cd)
			}
			for _, pc := range append([]string{cd.PC}, cd.Backtrace...) {
				if pc != "" && !reHex.MatchString(pc) {
					t.Fatalf("pc %q", pc)
				}
			}
			c.check(t, cd, raw)
		})
	}
}

func TestCrashBackoff(t *testing.T) {
	r := newRig(t, "panic one", "panic two", "panic three", "panic-on-go four", "exit 0")
	r.start(r.options())
	ctx := t.Context()

	// expectWait checks the supervisor restarts the app exactly d after its crash.
	expectWait := func(before int, d time.Duration) {
		t.Helper()
		if err := r.clock.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		r.clock.Advance(d - time.Millisecond)
		time.Sleep(50 * time.Millisecond)
		if n := len(r.boots()); n != before {
			t.Fatalf("restarted before the %v backoff ran out (%d boots)", d, n)
		}
		r.clock.Advance(time.Millisecond)
		r.waitBoots(before + 1)
	}
	r.waitBoots(1)
	expectWait(1, time.Second)
	expectWait(2, 2*time.Second)
	expectWait(3, 4*time.Second)

	// Boot 4 runs for a healthy minute before it crashes: the series starts again.
	r.waitFor("boot 4 started", func() bool { return strings.Contains(r.logs.String(), "boot=4") })
	r.clock.Advance(DefaultBackoffHealthy)
	if err := os.WriteFile(filepath.Join(r.dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expectWait(4, time.Second)
	if err := r.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestDeepSleepHonoursDuration(t *testing.T) {
	r := newRig(t, "deepsleep 10m 0102", "exit 0")
	r.start(r.options())
	r.waitBoots(1)
	if err := r.clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(10*time.Minute - time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	if n := len(r.boots()); n != 1 {
		t.Fatalf("woke before the sleep ended (%d boots)", n)
	}
	r.clock.Advance(time.Millisecond)
	b := r.waitBoots(2)
	if b[1].Reason != ReasonDeepSleep || hex.EncodeToString(b[1].RTC) != "0102" {
		t.Fatalf("wake %+v", b[1])
	}
	if err := r.wait(); err != nil {
		t.Fatal(err)
	}
}

func TestStopDuringDeepSleep(t *testing.T) {
	r := newRig(t, "deepsleep 1h 01")
	r.start(r.options())
	r.waitBoots(1)
	if err := r.clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	r.cancel()
	if err := r.wait(); err != nil {
		t.Fatal(err)
	}
	if n := len(r.boots()); n != 1 {
		t.Fatalf("%d boots", n)
	}
}

func TestShutdownOnCancel(t *testing.T) {
	r := newRig(t, "hang")
	opts := r.options()
	opts.Clock = nil // real time: the app answers SIGTERM at once
	r.start(opts)
	pid := r.marker("pid", 1)
	if !alive(pid) {
		t.Fatal("app not running")
	}
	r.cancel()
	if err := r.wait(); err != nil {
		t.Fatalf("Supervise: %v", err)
	}
	if got := r.marker("term", 1); got != pid {
		t.Fatalf("SIGTERM reached pid %d, want %d", got, pid)
	}
	if alive(pid) {
		t.Fatal("app still running after Supervise returned")
	}
	if _, _, err := ReadCoreDump(r.data); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a stop left a core dump: %v", err)
	}
}

func TestShutdownKillsAppIgnoringSIGTERM(t *testing.T) {
	r := newRig(t, "hang-stubborn")
	r.start(r.options())
	pid := r.marker("pid", 1)
	r.cancel()
	if err := r.clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(DefaultStopTimeout - time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	if !alive(pid) {
		t.Fatal("app killed before the stop timeout")
	}
	r.clock.Advance(time.Millisecond)
	if err := r.wait(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Fatal("app survived SIGKILL")
	}
}

func TestPowerCutTakesTheApp(t *testing.T) {
	r := newRig(t, "hang")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "BOOTTEST_ROLE=supervisor", "BOOTTEST_DATA="+r.data)
	var out testio.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd.WaitDelay = time.Second // an orphaned app would hold the output pipe
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := r.marker("pid", 1)
	t.Cleanup(func() {
		if alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if !alive(pid) {
		t.Fatal("app not running")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	r.waitFor("the app to die with its supervisor", func() bool { return !alive(pid) })

	// The next power-on boots with reason poweron and finds the flash unlocked.
	if err := os.WriteFile(filepath.Join(r.dir, "plan"), []byte("exit 0"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.start(r.options())
	if err := r.wait(); err != nil {
		t.Fatal(err)
	}
	if b := r.boots(); len(b) != 2 || b[1].Reason != ReasonPowerOn || b[1].Boot != 1 {
		t.Fatalf("boots %+v", b)
	}
}

func TestHaltStopsTheSupervisor(t *testing.T) {
	r := newRig(t, "halt port 80 is taken")
	r.start(r.options())
	err := r.wait()
	if err == nil || !strings.Contains(err.Error(), "port 80 is taken") {
		t.Fatalf("Supervise: %v", err)
	}
	if n := len(r.boots()); n != 1 {
		t.Fatalf("%d boots after a halt", n)
	}
}

func TestDataDirectoryIsExclusive(t *testing.T) {
	r := newRig(t, "hang")
	r.start(r.options())
	r.marker("pid", 1)
	err := Supervise(context.Background(), r.options())
	if err == nil || !strings.Contains(err.Error(), "in use by another devhost") {
		t.Fatalf("second supervisor: %v", err)
	}
}

func TestStartFailure(t *testing.T) {
	r := newRig(t, "exit 0")
	opts := r.options()
	// Not a program: the USB flash copies it, and starting it fails.
	opts.Exe = filepath.Join(t.TempDir(), "not-a-program")
	if err := os.WriteFile(opts.Exe, []byte("plain text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := Supervise(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "start the app") {
		t.Fatalf("Supervise: %v", err)
	}
}

func TestParseHandoff(t *testing.T) {
	cases := []struct {
		name  string
		env   map[string]string
		child bool
		want  Handoff
	}{
		{"not a child", map[string]string{EnvReason: "poweron"}, false, Handoff{}},
		{"power-on", map[string]string{EnvChild: "1", EnvReason: "poweron", EnvBootCount: "1", EnvPowerOnAt: "2026-01-02T03:04:05Z"},
			true, Handoff{ResetReason: "poweron", BootCount: 1, PowerOnAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}},
		{"deep sleep with RTC", map[string]string{EnvChild: "1", EnvReason: "deepsleep", EnvBootCount: "4", EnvRTC: "yv4="},
			true, Handoff{ResetReason: "deepsleep", BootCount: 4, RTC: []byte{0xca, 0xfe}}},
		{"RTC after anything else is ignored", map[string]string{EnvChild: "1", EnvReason: "software", EnvRTC: "yv4="},
			true, Handoff{ResetReason: "software"}},
		{"bad RTC", map[string]string{EnvChild: "1", EnvReason: "deepsleep", EnvRTC: "!!"}, true, Handoff{ResetReason: "deepsleep"}},
		{"unknown reason", map[string]string{EnvChild: "1", EnvReason: "brownout?"}, true, Handoff{ResetReason: "unknown"}},
		{"bad count", map[string]string{EnvChild: "1", EnvReason: "panic", EnvBootCount: "-2"}, true, Handoff{ResetReason: "panic"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, ok := parseHandoff(func(k string) string { return c.env[k] })
			if ok != c.child || h.ResetReason != c.want.ResetReason || h.BootCount != c.want.BootCount ||
				!bytes.Equal(h.RTC, c.want.RTC) || !h.PowerOnAt.Equal(c.want.PowerOnAt) {
				t.Fatalf("got %+v %v, want %+v %v", h, ok, c.want, c.child)
			}
		})
	}
}

func TestChildEnv(t *testing.T) {
	base := []string{"PATH=/bin", EnvChild + "=1", EnvRTC + "=AAAA", "GOTRACEBACK=none", "DEVHOST_OTHER=keep"}
	env := childEnv(base, Handoff{ResetReason: ReasonPowerOn, BootCount: 1})
	joined := "\n" + strings.Join(env, "\n") + "\n"
	for _, want := range []string{"PATH=/bin", "DEVHOST_OTHER=keep", EnvChild + "=1", EnvReason + "=poweron",
		EnvBootCount + "=1", "GOTRACEBACK=system", EnvRequestFD + "=3"} {
		if !strings.Contains(joined, "\n"+want+"\n") {
			t.Errorf("missing %s in %v", want, env)
		}
	}
	if strings.Contains(joined, EnvRTC) || strings.Contains(joined, "GOTRACEBACK=none") || strings.Count(joined, EnvChild) != 1 {
		t.Fatalf("inherited handoff leaked: %v", env)
	}
	env = childEnv(nil, Handoff{ResetReason: ReasonDeepSleep, RTC: []byte{0xca, 0xfe}})
	if !strings.Contains(strings.Join(env, "\n"), EnvRTC+"=yv4=") {
		t.Fatalf("RTC not handed over: %v", env)
	}
}

func TestRequestsOutsideTheSupervisor(t *testing.T) {
	if err := DeepSleep(-time.Second, nil); err == nil {
		t.Fatal("negative sleep accepted")
	}
	if err := DeepSleep(time.Second, make([]byte, MaxRTC+1)); err == nil {
		t.Fatal("oversized RTC memory accepted")
	}
	// This test process has no supervisor: the requests must not exit it.
	exited := false
	exit = func(int) { exited = true }
	defer func() { exit = os.Exit }()
	for _, f := range []func() error{Reboot, WatchdogReset, func() error { return Halt("x") }, func() error { return DeepSleep(0, nil) }} {
		if err := f(); !errors.Is(err, ErrNotChild) {
			t.Fatalf("request outside a supervisor: %v", err)
		}
	}
	if exited {
		t.Fatal("a request exited a process that has no supervisor")
	}
}

func TestParseRequest(t *testing.T) {
	cases := map[string]*request{
		"":                     nil,
		"garbage":              nil,
		`{"request":"reboot"}`: {Request: "reboot"},
		"{\"request\":\"deepsleep\",\"sleep_ns\":5,\"rtc\":\"AQI=\"}\n":        {Request: "deepsleep", SleepNS: 5, RTC: []byte{1, 2}},
		"{\"request\":\"reboot\"}\n{\"request\":\"halt\",\"message\":\"m\"}\n": {Request: "halt", Message: "m"},
		`{"request":""}`: nil,
	}
	for in, want := range cases {
		got := parseRequest([]byte(in))
		if (got == nil) != (want == nil) || (got != nil && (got.Request != want.Request || got.SleepNS != want.SleepNS ||
			!bytes.Equal(got.RTC, want.RTC) || got.Message != want.Message)) {
			t.Errorf("parseRequest(%q) = %+v, want %+v", in, got, want)
		}
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{"request":"deepsleep","sleep_ns":5,"rtc":"AQI="}`))
	f.Add([]byte("{\"request\":\"reboot\"}\n{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r := parseRequest(b); r != nil && r.Request == "" {
			t.Fatal("empty request accepted")
		}
	})
}
