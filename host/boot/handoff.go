package boot

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Reset reasons the supervisor hands to the app (the spec's `reset_reason` values it can
// produce).
const (
	ReasonPowerOn   = "poweron"
	ReasonSoftware  = "software"
	ReasonPanic     = "panic"
	ReasonTaskWDT   = "task_wdt"
	ReasonDeepSleep = "deepsleep"
	ReasonUnknown   = "unknown"
)

// Environment of the app child.
const (
	EnvChild     = "DEVHOST_CHILD"        // "1" in the app
	EnvReason    = "DEVHOST_RESET_REASON" // one of the Reason constants
	EnvBootCount = "DEVHOST_BOOT_COUNT"   // 1 for the first app since power-on
	EnvPowerOnAt = "DEVHOST_POWERON_AT"   // RFC 3339 time the supervisor started
	EnvRTC       = "DEVHOST_RTC"          // RTC memory, standard base64; only after a deep sleep
	EnvRequestFD = "DEVHOST_REQUEST_FD"   // descriptor of the request pipe (3)
	EnvSlot      = "DEVHOST_OTA_SLOT"     // the OTA slot the app was started from (0 or 1)
)

// Exit codes of the app. A code the table does not name is an abnormal end (see Supervise).
const (
	ExitShutdown  = 0  // stop: the supervisor stops too
	ExitReboot    = 10 // software reset
	ExitWatchdog  = 11 // software reset by the health watchdog
	ExitDeepSleep = 12 // deep sleep; the request message carries duration and RTC memory
	ExitHalt      = 13 // the app cannot run at all; the supervisor stops with an error
)

// MaxRTC is the RTC memory size: the 8 KiB of an ESP32's RTC slow memory.
const MaxRTC = 8 << 10

// requestFD is the descriptor the request pipe lands on in the app (the first ExtraFiles).
const requestFD = 3

// Handoff is what the supervisor tells the app at start.
type Handoff struct {
	ResetReason string
	// BootCount counts the app starts since the supervisor started (power-on): 1, 2, ...
	BootCount int
	// RTC is the RTC memory the app left before its deep sleep; nil after any other reset.
	RTC []byte
	// PowerOnAt is when the supervisor started; zero when unknown.
	PowerOnAt time.Time
	// Slot is the OTA slot the app runs from.
	Slot int
}

// request is the message the app writes on the request pipe before it exits.
type request struct {
	Request string `json:"request"` // reboot, watchdog, deepsleep, halt
	SleepNS int64  `json:"sleep_ns,omitempty"`
	RTC     []byte `json:"rtc,omitempty"` // base64 in JSON
	Message string `json:"message,omitempty"`
}

var (
	childOnce sync.Once
	child     Handoff
	isChild   bool
	reqFile   *os.File
)

// Child reports whether this process is the app started by a supervisor, and what the
// supervisor handed over. It is cheap to call more than once.
func Child() (Handoff, bool) {
	childOnce.Do(func() {
		child, isChild = parseHandoff(os.Getenv)
		if !isChild {
			return
		}
		fd := requestFD
		if v := os.Getenv(EnvRequestFD); v != "" {
			if n, err := strconv.Atoi(v); err == nil && n > 2 {
				fd = n
			}
		}
		// The pipe must not leak into processes the app starts: the supervisor reads it to
		// the end, and a grandchild holding it open would delay that.
		if _, err := fcntlGetFD(fd); err == nil {
			syscall.CloseOnExec(fd)
			reqFile = os.NewFile(uintptr(fd), "boot-request")
		}
	})
	return child, isChild
}

func fcntlGetFD(fd int) (int, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// parseHandoff reads the handoff from the environment. A damaged handoff in a child reads as
// reset reason `unknown` rather than failing the boot.
func parseHandoff(getenv func(string) string) (Handoff, bool) {
	if getenv(EnvChild) != "1" {
		return Handoff{}, false
	}
	h := Handoff{ResetReason: getenv(EnvReason)}
	switch h.ResetReason {
	case ReasonPowerOn, ReasonSoftware, ReasonPanic, ReasonTaskWDT, ReasonDeepSleep:
	default:
		h.ResetReason = ReasonUnknown
	}
	if n, err := strconv.Atoi(getenv(EnvBootCount)); err == nil && n > 0 {
		h.BootCount = n
	}
	if n, err := strconv.Atoi(getenv(EnvSlot)); err == nil && (n == 0 || n == 1) {
		h.Slot = n
	}
	if t, err := time.Parse(time.RFC3339Nano, getenv(EnvPowerOnAt)); err == nil {
		h.PowerOnAt = t
	}
	if v := getenv(EnvRTC); v != "" && h.ResetReason == ReasonDeepSleep {
		if b, err := base64.StdEncoding.DecodeString(v); err == nil && len(b) <= MaxRTC {
			h.RTC = b
		}
	}
	return h, true
}

// ErrNotChild: the process was not started by a supervisor, so there is nobody to restart it.
var ErrNotChild = errors.New("boot: not running under the boot supervisor")

// exit ends the process; tests of the request encoding replace it.
var exit = os.Exit

// Reboot ends the app with a software reset. Call it last, after the app closed its stores;
// it returns only when the request could not be made.
func Reboot() error { return send(request{Request: "reboot"}, ExitReboot) }

// WatchdogReset ends the app with a software reset on behalf of the health watchdog.
func WatchdogReset() error { return send(request{Request: "watchdog"}, ExitWatchdog) }

// DeepSleep ends the app; the supervisor waits d, then starts it again with reset reason
// `deepsleep` and rtc as its RTC memory (at most MaxRTC bytes).
func DeepSleep(d time.Duration, rtc []byte) error {
	if d < 0 {
		return fmt.Errorf("boot: deep sleep of %v", d)
	}
	if len(rtc) > MaxRTC {
		return fmt.Errorf("boot: %d bytes of RTC memory; the board has %d", len(rtc), MaxRTC)
	}
	return send(request{Request: "deepsleep", SleepNS: int64(d), RTC: rtc}, ExitDeepSleep)
}

// Halt ends the app for good: the app cannot run (its port is taken, its flash is
// unreadable) and restarting it would only loop. Supervise returns an error with message.
func Halt(message string) error {
	return send(request{Request: "halt", Message: message}, ExitHalt)
}

func send(req request, code int) error {
	if _, ok := Child(); !ok {
		return ErrNotChild
	}
	if reqFile != nil {
		b, err := json.Marshal(req)
		if err != nil {
			return fmt.Errorf("boot: encode request: %w", err)
		}
		// A lost message still leaves the exit code, which is enough for all but deep sleep
		// (which then wakes at once, without RTC memory).
		_, _ = reqFile.Write(append(b, '\n'))
	}
	exit(code)
	return nil
}
