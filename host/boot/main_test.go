package boot

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary is also the app the tests supervise: started by Supervise it finds the
// handoff, records it, and does what the plan in $BOOTTEST_DIR/plan says for its boot (one
// action per line; the last line repeats). Started with BOOTTEST_ROLE=supervisor it is a
// supervisor, so a test can pull its power with kill -9.
func TestMain(m *testing.M) {
	if h, ok := Child(); ok {
		os.Exit(testApp(h))
	}
	if os.Getenv("BOOTTEST_ROLE") == "supervisor" {
		os.Exit(testSupervisor())
	}
	os.Exit(m.Run())
}

// bootRecord is what each start of the test app saw.
type bootRecord struct {
	Reason    string    `json:"reason"`
	Boot      int       `json:"boot"`
	RTC       []byte    `json:"rtc"`
	PID       int       `json:"pid"`
	PowerOnAt time.Time `json:"poweron_at"`
}

func testApp(h Handoff) int {
	dir := os.Getenv("BOOTTEST_DIR")
	rec, _ := json.Marshal(bootRecord{Reason: h.ResetReason, Boot: h.BootCount, RTC: h.RTC, PID: os.Getpid(), PowerOnAt: h.PowerOnAt})
	f, err := os.OpenFile(filepath.Join(dir, "boots.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test app:", err)
		return 70
	}
	_, _ = f.Write(append(rec, '\n'))
	f.Close()
	fmt.Printf("test app stdout boot %d\n", h.BootCount)

	plan, _ := os.ReadFile(filepath.Join(dir, "plan"))
	lines := strings.Split(strings.TrimSpace(string(plan)), "\n")
	action := lines[min(h.BootCount, len(lines))-1]
	verb, arg, _ := strings.Cut(action, " ")
	// A marker appears whole: written aside and renamed, so a test that sees the file never
	// reads it empty (os.WriteFile creates the file before it writes the pid).
	marker := func(name string) {
		p := filepath.Join(dir, fmt.Sprintf("%s.%d", name, h.BootCount))
		if os.WriteFile(p+".tmp", []byte(strconv.Itoa(os.Getpid())), 0o644) == nil {
			_ = os.Rename(p+".tmp", p)
		}
	}
	switch verb {
	case "exit":
		n, _ := strconv.Atoi(arg)
		fmt.Fprintf(os.Stderr, "leaving with %d\n", n)
		return n
	case "reboot":
		_ = Reboot()
	case "watchdog":
		_ = WatchdogReset()
	case "deepsleep":
		ds, hx, _ := strings.Cut(arg, " ")
		d, _ := time.ParseDuration(ds)
		rtc, _ := hex.DecodeString(hx)
		_ = DeepSleep(d, rtc)
	case "halt":
		_ = Halt(arg)
	case "panic":
		go crashingWorker(arg)
		sleepForever()
	case "panic-on-go":
		for {
			if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
				go crashingWorker(arg)
				sleepForever()
			}
			time.Sleep(5 * time.Millisecond)
		}
	case "nil":
		go nilWorker()
		sleepForever()
	case "kill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		sleepForever()
	case "hang":
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		marker("pid")
		<-term
		marker("term")
		return 0
	case "hang-stubborn":
		signal.Ignore(syscall.SIGTERM)
		marker("pid")
		sleepForever()
	}
	fmt.Fprintf(os.Stderr, "test app: action %q did not end the process\n", action)
	return 71
}

// sleepForever blocks the calling goroutine for good. A bare select {} would do it too, but
// when every goroutine blocks that way the runtime (without -race, whose helper goroutines
// keep it from noticing) ends the process as a deadlock instead of waiting for the signal
// or the kill the test is about; a sleeping goroutine is never a deadlock.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// crashingWorker is not inlined so that it has a frame (and a PC) of its own.
//
//go:noinline
func crashingWorker(msg string) {
	panic(msg)
}

var nilTarget *struct{ n int }

//go:noinline
func nilWorker() {
	fmt.Println(nilTarget.n)
}

func testSupervisor() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err := Supervise(ctx, Options{DataDir: os.Getenv("BOOTTEST_DATA")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "test supervisor:", err)
		return 1
	}
	return 0
}
