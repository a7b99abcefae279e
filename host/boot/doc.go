// Package boot is the device's boot supervisor (ROM, bootloader and RTC domain) and the app's
// side of it. The operator starts the supervisor; that start is a power-on. The supervisor
// owns the data directory (the flash; DATA/boot.lock keeps a second supervisor off it), runs
// the app (the same executable) as its child process, and restarts it after every reset,
// telling it why. The boot count lives in the supervisor's memory, like RTC memory.
// Killing the supervisor with SIGKILL is pulling the power: the app gets SIGKILL too
// (parent-death signal), and everything held only in the supervisor's memory is gone.
//
// # Handoff (supervisor to app)
//
// The app's environment carries the handoff; Child reads it:
//
//	DEVHOST_CHILD=1                 this process is the app
//	DEVHOST_RESET_REASON=poweron    poweron | software | panic | task_wdt | deepsleep
//	DEVHOST_BOOT_COUNT=3            app starts since power-on, from 1
//	DEVHOST_POWERON_AT=<RFC 3339>   when the supervisor started
//	DEVHOST_RTC=<base64>            RTC memory; present only after a deep sleep
//	DEVHOST_REQUEST_FD=3            the request pipe
//	DEVHOST_OTA_SLOT=0              the OTA slot the app was started from
//	GOTRACEBACK=system              so a crash report carries PCs (pc=0x...) for the core dump
//
// A damaged handoff reads as reset reason `unknown`.
//
// # Requests (app to supervisor)
//
// The app ends each run with an exit code; Reboot, WatchdogReset, DeepSleep and Halt write a
// one-line JSON message on the request pipe (fd 3) first and then exit:
//
//	exit 0   shut down: the supervisor stops too (Supervise returns nil)
//	exit 10  {"request":"reboot"}                                  software reset
//	exit 11  {"request":"watchdog"}                                software reset (health watchdog)
//	exit 12  {"request":"deepsleep","sleep_ns":N,"rtc":"<base64>"} wait N ns, then reset `deepsleep`
//	exit 13  {"request":"halt","message":"..."}                    the app cannot run: Supervise returns an error
//
// The exit code decides; the message only carries parameters. A deep-sleep exit whose message
// was lost wakes at once without RTC memory. Any other end is a crash: exit status 2 with a Go
// crash report ("panic: ", "fatal error: ") on stderr, any other status, or death by a signal
// the supervisor did not send. A crash writes the core dump and restarts the app with reset
// reason `panic`, or `task_wdt` when the message starts with "task_wdt:".
//
// # RTC memory
//
// RTC memory lives only in the supervisor's RAM and reaches only the app that wakes from the
// deep sleep which stored it (at most MaxRTC bytes). On an ESP32 RTC memory also survives a
// software reset or a panic, but the spec trusts it only after a deep-sleep wake; handing it
// over only then means an app cannot adopt a stale record by mistake. A power-on, a panic and
// a software reset all start without it.
//
// # OTA slots (the bootloader)
//
// The app never runs from the executable the operator started: it runs from an OTA slot,
// DATA/ota_0 or DATA/ota_1 (each the bare app executable), and DATA/otadata says which slot
// boots and what each holds (OTAData). Before every start of the app the supervisor:
//
//   - at power-on, flashes over USB when the started executable's SHA-256 differs from the one
//     last flashed (or otadata is unreadable): the executable goes into ota_0, otadata starts
//     over with ota_0 valid and ota_1 empty; the configuration (nvs) is untouched. So `make
//     run` after a rebuild runs the new build, and restarting the same build keeps an update;
//   - boots the slot otadata names if its state is valid, new or pending and its file still
//     hashes to its record; a new image becomes pending (booted, not confirmed yet);
//   - hashes a file (a slot, or the started executable at power-on) only when it does not
//     keep the stamp (device, inode, size, modification and change times) otadata recorded
//     when it last hashed to its record: FileStamp says what that guards against and what not;
//   - rolls back a pending image (it was reset before confirming itself: a panic, a power cut,
//     a watchdog or software reset) by marking it aborted and booting the other slot, when that
//     one is bootable; likewise for a damaged slot;
//   - flashes the started executable again when no slot is bootable at all.
//
// otadata is two 4 KiB copies of the record, each with a sequence number and a CRC-32; a
// write goes to the copy not holding the newest record and is synced, so a power cut during
// it leaves the previous record readable. The app writes otadata (download, confirm,
// rollback) only while it runs and the supervisor only while it does not, so they never race.
//
// # Core dump
//
// The partition DATA/coredump holds the last crash only: one line of JSON (the CoreDump
// record), a newline, then the raw crash text (the Go crash report from its first line, at
// most 64 KiB, or for a crash without a report the last 64 KiB of stderr). The record's size
// and raw_sha256 check the text; ReadCoreDump reports a damaged partition as valid false. The
// record names the crashing goroutine as task ("goroutine 42 pkg.(*T).run": its number and the
// function it was started with), the PC of the first frame outside the runtime's panic code,
// the backtrace (every frame's PC, runtime frames included), the signal and fault address of a
// memory fault (exc_cause, exc_vaddr; empty strings for a crash no signal raised), and the
// SHA-256 of the executable file that crashed.
//
// # Crash loops and stopping
//
// Software resets restart at once; a deep sleep restarts after its duration. A crash restarts
// after a backoff: 1 s, doubling per crash in a row up to 30 s, back to 1 s once a run lasted
// 60 s. When ctx ends the supervisor sends SIGTERM to the app's process group, waits up to
// 10 s, then sends SIGKILL, and returns nil. The app runs in its own process group, so a
// terminal's Ctrl-C reaches only the supervisor, which then stops the app in that order.
package boot
