package boot

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/build"
)

// Options configures Supervise. Only DataDir is required.
type Options struct {
	// DataDir is the flash: created if missing, locked for the supervisor's life.
	DataDir string
	// Exe is the executable started by the operator; default the running executable
	// (os.Executable). At power-on, an Exe that differs from the one last flashed is flashed
	// over USB into ota_0; the app always runs from its OTA slot.
	Exe string
	// Version is Exe's version, recorded for ota_0 by a USB flash; default build.Version.
	Version string
	// Args are the app's command-line arguments.
	Args []string
	// Stdout and Stderr receive the app's output; default the supervisor's own.
	Stdout, Stderr io.Writer
	// Logger receives the supervisor's own lines; default text lines on Stderr.
	Logger *slog.Logger
	// Clock times the crash backoff, deep sleep and the stop timeout; default real time.
	Clock clockwork.Clock
	// StopTimeout is how long a stopping app has after SIGTERM before SIGKILL; default 10 s.
	StopTimeout time.Duration
	// Backoff paces restarts after crashes; zero members take their defaults.
	Backoff Backoff
}

// Backoff paces restarts after crashes: the first waits Min, each further crash in a row
// doubles the wait up to Max, and a run of Healthy or longer starts the series again.
type Backoff struct {
	Min, Max, Healthy time.Duration
}

// Default crash backoff.
const (
	DefaultBackoffMin     = time.Second
	DefaultBackoffMax     = 30 * time.Second
	DefaultBackoffHealthy = time.Minute
	DefaultStopTimeout    = 10 * time.Second
)

// maxRequest caps the request message (RTC memory is at most 8 KiB, 11 KiB in base64).
const maxRequest = 64 << 10

// lockFile keeps a second supervisor off the same flash.
const lockFile = "boot.lock"

func (o Options) withDefaults() (Options, error) {
	if o.DataDir == "" {
		return o, errors.New("boot: no data directory")
	}
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return o, fmt.Errorf("boot: find the app executable: %w", err)
		}
		o.Exe = exe
	}
	if o.Version == "" {
		o.Version = build.Version
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(o.Stderr, nil)).With("component", "boot")
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.StopTimeout <= 0 {
		o.StopTimeout = DefaultStopTimeout
	}
	if o.Backoff.Min <= 0 {
		o.Backoff.Min = DefaultBackoffMin
	}
	if o.Backoff.Max < o.Backoff.Min {
		o.Backoff.Max = max(DefaultBackoffMax, o.Backoff.Min)
	}
	if o.Backoff.Healthy <= 0 {
		o.Backoff.Healthy = DefaultBackoffHealthy
	}
	return o, nil
}

// backoff is the crash restart pacing state.
type backoff struct {
	cfg    Backoff
	streak int
}

// next is the wait before restarting an app that crashed after running for uptime.
func (b *backoff) next(uptime time.Duration) time.Duration {
	if uptime >= b.cfg.Healthy {
		b.streak = 0
	}
	d := b.cfg.Min
	for i := 0; i < b.streak && d < b.cfg.Max; i++ {
		d *= 2
	}
	b.streak++
	return min(d, b.cfg.Max)
}

// endKind is how one run of the app ended.
type endKind int

const (
	endStopped   endKind = iota // the supervisor stopped it
	endShutdown                 // exit 0
	endReboot                   // software reset
	endWatchdog                 // software reset by the health watchdog
	endDeepSleep                // deep sleep
	endHalt                     // the app cannot run
	endCrash                    // panic, fatal error, signal, or any other exit
)

type outcome struct {
	kind    endKind
	pid     int
	code    int            // exit status when not signalled
	signal  syscall.Signal // the killing signal, 0 when the app exited
	uptime  time.Duration
	req     *request
	capture *capture
	exeSum  string
}

type supervisor struct {
	o   Options
	log *slog.Logger
	bo  backoff
	// hashes counts the files the bootloader hashed (the tests read it).
	hashes int
	// writeOTA writes otadata: WriteOTAData unless a test stands in for the flash.
	writeOTA func(dir string, d OTAData) error
}

// Supervise is the boot supervisor: it runs the app until ctx ends or the app shuts down,
// restarting it after every reset. It returns nil when ctx ends (the app is stopped first) or
// the app exits 0; an error when it cannot start the app, the data directory is unusable or
// taken, or the app halts.
func Supervise(ctx context.Context, opts Options) error {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return fmt.Errorf("boot: data directory: %w", err)
	}
	unlock, err := lockDataDir(o.DataDir)
	if err != nil {
		return err
	}
	defer unlock()

	s := &supervisor{o: o, log: o.Logger, bo: backoff{cfg: o.Backoff}}
	powerOn := o.Clock.Now()
	h := Handoff{ResetReason: ReasonPowerOn, PowerOnAt: powerOn}
	for boot := 1; ; boot++ {
		h.BootCount = boot
		slot, sum, err := s.chooseSlot(boot == 1)
		if err != nil {
			return err
		}
		h.Slot = slot
		out, err := s.run(ctx, h, SlotPath(o.DataDir, slot), sum)
		if err != nil {
			return err
		}
		next := Handoff{PowerOnAt: powerOn}
		var wait time.Duration
		switch out.kind {
		case endStopped:
			s.log.Info("app stopped", "pid", out.pid)
			return nil
		case endShutdown:
			s.log.Info("app shut down", "pid", out.pid)
			return nil
		case endHalt:
			msg := "no reason given"
			if out.req != nil && out.req.Message != "" {
				msg = out.req.Message
			}
			s.log.Error("app halted", "pid", out.pid, "message", msg)
			return fmt.Errorf("boot: the app halted: %s", msg)
		case endReboot:
			s.log.Info("app rebooting", "pid", out.pid)
			next.ResetReason = ReasonSoftware
		case endWatchdog:
			s.log.Warn("app restarted by its health watchdog", "pid", out.pid)
			next.ResetReason = ReasonSoftware
		case endDeepSleep:
			next.ResetReason = ReasonDeepSleep
			if out.req != nil && out.req.Request == "deepsleep" {
				wait, next.RTC = time.Duration(out.req.SleepNS), out.req.RTC
			} else {
				s.log.Warn("deep sleep without its request message: waking at once, RTC memory lost", "pid", out.pid)
			}
			s.log.Info("app in deep sleep", "pid", out.pid, "sleep", wait, "rtc_bytes", len(next.RTC))
		case endCrash:
			next.ResetReason = s.recordCrash(out, boot)
			wait = s.bo.next(out.uptime)
			s.log.Warn("restarting the app after a crash", "in", wait)
		}
		if wait > 0 && !s.sleep(ctx, wait) {
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		h = next
	}
}

func (s *supervisor) sleep(ctx context.Context, d time.Duration) bool {
	t := s.o.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.Chan():
		return true
	}
}

func lockDataDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("boot: lock the data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("boot: data directory %s is in use by another devhost", dir)
		}
		return nil, fmt.Errorf("boot: lock the data directory: %w", err)
	}
	return func() { f.Close() }, nil
}

// childEnv is the app's environment: the supervisor's, less any handoff it inherited, plus
// this boot's handoff. GOTRACEBACK=system makes crash reports carry PCs (pc=0x...) and list
// every goroutine.
func childEnv(base []string, h Handoff) []string {
	ours := map[string]bool{EnvChild: true, EnvReason: true, EnvBootCount: true, EnvPowerOnAt: true,
		EnvRTC: true, EnvRequestFD: true, EnvSlot: true, "GOTRACEBACK": true}
	env := make([]string, 0, len(base)+7)
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if !ours[k] {
			env = append(env, kv)
		}
	}
	env = append(env,
		EnvChild+"=1",
		EnvReason+"="+h.ResetReason,
		EnvBootCount+"="+strconv.Itoa(h.BootCount),
		EnvPowerOnAt+"="+h.PowerOnAt.UTC().Format(time.RFC3339Nano),
		EnvRequestFD+"="+strconv.Itoa(requestFD),
		EnvSlot+"="+strconv.Itoa(h.Slot),
		"GOTRACEBACK=system",
	)
	if len(h.RTC) > 0 {
		env = append(env, EnvRTC+"="+base64.StdEncoding.EncodeToString(h.RTC))
	}
	return env
}

// run starts the app once and waits for it to end.
func (s *supervisor) run(ctx context.Context, h Handoff, exe, sum string) (outcome, error) {
	if ctx.Err() != nil {
		return outcome{kind: endStopped}, nil
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return outcome{}, fmt.Errorf("boot: request pipe: %w", err)
	}
	defer pr.Close()

	cp := newCapture()
	cmd := exec.Command(exe, s.o.Args...)
	cmd.Env = childEnv(os.Environ(), h)
	cmd.Stdout = s.o.Stdout
	cmd.Stderr = teeWriter{out: s.o.Stderr, cap: cp}
	cmd.ExtraFiles = []*os.File{pw}
	// Pdeathsig: pulling the supervisor's power (kill -9) takes the app with it. Setpgid:
	// a terminal's Ctrl-C reaches only the supervisor, which then stops the app in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Output the app's own children keep open must not hold the supervisor.
	cmd.WaitDelay = time.Second

	startc := make(chan error, 1)
	waitc := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the thread that started the child ends, not
		// the process. Keep this goroutine on its thread for the child's whole life; it is
		// never unlocked, so the runtime retires the thread only after the child is gone.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			startc <- err
			return
		}
		startc <- nil
		waitc <- cmd.Wait()
	}()
	if err := <-startc; err != nil {
		pw.Close()
		return outcome{}, fmt.Errorf("boot: start the app %s: %w", exe, err)
	}
	pw.Close()
	started := s.o.Clock.Now()
	pid := cmd.Process.Pid
	s.log.Info("app started", "pid", pid, "reset_reason", h.ResetReason, "boot", h.BootCount, "slot", h.Slot)

	msgc := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(pr, maxRequest))
		msgc <- b
	}()

	stopped := false
	select {
	case <-waitc:
	case <-ctx.Done():
		stopped = true
		s.stop(pid, waitc)
	}
	// The request was written before the app exited; a descendant still holding the pipe
	// must not hold the supervisor.
	_ = pr.SetReadDeadline(time.Now().Add(time.Second))
	msg := <-msgc

	out := outcome{pid: pid, uptime: s.o.Clock.Since(started), req: parseRequest(msg), capture: cp, exeSum: sum}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case stopped:
		out.kind = endStopped
	case ws.Signaled():
		out.kind, out.signal = endCrash, ws.Signal()
	default:
		out.code = ws.ExitStatus()
		switch out.code {
		case ExitShutdown:
			out.kind = endShutdown
		case ExitReboot:
			out.kind = endReboot
		case ExitWatchdog:
			out.kind = endWatchdog
		case ExitDeepSleep:
			out.kind = endDeepSleep
		case ExitHalt:
			out.kind = endHalt
		default:
			out.kind = endCrash
		}
	}
	return out, nil
}

// stop ends the app: SIGTERM to its process group, SIGKILL after StopTimeout.
func (s *supervisor) stop(pid int, waitc <-chan error) {
	s.log.Info("stopping the app", "pid", pid)
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	t := s.o.Clock.NewTimer(s.o.StopTimeout)
	defer t.Stop()
	select {
	case <-waitc:
		return
	case <-t.Chan():
	}
	s.log.Warn("app ignored SIGTERM; killing it", "pid", pid, "after", s.o.StopTimeout)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-waitc
}

// parseRequest reads the last request line the app wrote; nil when there is none.
func parseRequest(b []byte) *request {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		var r request
		if json.Unmarshal(lines[i], &r) == nil && r.Request != "" {
			return &r
		}
	}
	return nil
}

// recordCrash writes the core dump of a crashed app and returns the reset reason it causes.
func (s *supervisor) recordCrash(out outcome, boot int) string {
	cd := &CoreDump{AppELFSHA256: out.exeSum, BootCount: boot, At: s.o.Clock.Now().UTC()}
	var raw []byte
	head, _ := out.capture.crash()
	if out.signal == 0 && out.code == 2 && head != nil {
		// Go's own crash exit: a panic or fatal error with its report.
		ci := parseCrash(head)
		raw = head
		cd.Message, cd.Task, cd.PC, cd.Backtrace = ci.message, ci.task, ci.pc, ci.backtrace
		cd.BacktraceCorrupted, cd.ExcCause, cd.ExcVaddr = ci.corrupted, ci.signal, ci.addr
	} else {
		raw = out.capture.tail()
		cd.Task = "pid " + strconv.Itoa(out.pid)
		cd.BacktraceCorrupted = true
		if out.signal != 0 {
			cd.ExcCause = signalName(out.signal)
			cd.Message = "killed by signal " + cd.ExcCause
		} else {
			cd.Message = "exit status " + strconv.Itoa(out.code)
			if last := lastLine(raw); last != "" {
				cd.Message += ": " + last
			}
		}
		if len(cd.Message) > maxMessage {
			cd.Message = cd.Message[:maxMessage]
		}
	}
	cd.Reason = ReasonPanic
	if strings.HasPrefix(cd.Message, "task_wdt:") {
		cd.Reason = ReasonTaskWDT
	}
	if err := writeCoreDump(s.o.DataDir, cd, raw); err != nil {
		s.log.Error("core dump not written", "err", err)
	}
	s.log.Error("app crashed", "pid", out.pid, "reason", cd.Reason, "task", cd.Task, "pc", cd.PC,
		"message", cd.Message, "uptime", out.uptime)
	return cd.Reason
}

func lastLine(b []byte) string {
	b = bytes.TrimRight(b, "\r\n\t ")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return string(bytes.TrimSpace(b))
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL",
	syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE",
	syscall.SIGKILL: "SIGKILL", syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM", syscall.SIGXCPU: "SIGXCPU",
	syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGSYS: "SIGSYS",
}

func signalName(sig syscall.Signal) string {
	if n, ok := signalNames[sig]; ok {
		return n
	}
	return "SIG" + strconv.Itoa(int(sig))
}
