package boot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// CoreDumpFile is the core dump partition's name in the data directory.
const CoreDumpFile = "coredump"

// CoreDumpVersion is the version of the core dump record format.
const CoreDumpVersion = 1

// maxMessage caps the crash message kept in the record.
const maxMessage = 1024

// CoreDump is the record of the last crash: the spec's core dump summary (GET
// /system/coredump, with the Xtensa members) and a few members an operator needs besides.
type CoreDump struct {
	Present bool `json:"present"`
	// Size is the length of the raw crash text (GET /system/coredump/raw).
	Size  int  `json:"size"`
	Valid bool `json:"valid"`
	// Task names the crashing goroutine: "goroutine 42 pkg.(*T).run", its number and the
	// function it was started with (the nearest thing Go has to a task name); "runtime"
	// when the runtime itself failed outside any goroutine; "pid N" when the process died
	// without a Go crash report.
	Task string `json:"task"`
	// PC is the program counter where the crash happened: the first frame of the crashing
	// goroutine outside the runtime's panic machinery.
	PC                 string   `json:"pc"`
	AppELFSHA256       string   `json:"app_elf_sha256"`
	Version            int      `json:"version"`
	Backtrace          []string `json:"backtrace"`
	BacktraceCorrupted bool     `json:"backtrace_corrupted"`
	// ExcCause is the signal behind the crash (SIGSEGV for a nil dereference, SIGKILL for a
	// process killed from outside); empty for a software panic, which no signal raised.
	// Always present, as the spec's Xtensa summary has it.
	ExcCause string `json:"exc_cause"`
	// ExcVaddr is the faulting address of a memory fault; empty for any other crash.
	ExcVaddr string `json:"exc_vaddr"`

	// Message is the panic value or the fatal error ("task_wdt: ..." for the task watchdog).
	Message string `json:"message"`
	// Reason is the reset reason the crash caused: panic or task_wdt.
	Reason string `json:"reason"`
	// BootCount is the boot (since power-on) that crashed.
	BootCount int `json:"boot_count"`
	// At is the host's time of the crash.
	At time.Time `json:"at"`
	// RawSHA256 checks the raw text; a mismatch makes the record invalid.
	RawSHA256 string `json:"raw_sha256"`
}

// crashInfo is what the crash text says.
type crashInfo struct {
	message   string
	task      string
	pc        string
	backtrace []string
	corrupted bool
	signal    string
	addr      string
}

// crashPatterns are the lines of a Go crash report parseCrash looks for. They are compiled
// on the first crash, not at every start of the supervisor and the app.
type crashPatterns struct {
	goroutine, signal, addr, pc, bareSig, goWrap *regexp.Regexp
}

var crashRE = sync.OnceValue(func() crashPatterns {
	return crashPatterns{
		goroutine: regexp.MustCompile(`^goroutine (\d+)(?: [^\[]*)?\[([^\]]*)\]:$`),
		signal:    regexp.MustCompile(`^\[signal (SIG[A-Z0-9]+)`),
		addr:      regexp.MustCompile(` addr=(0x[0-9a-f]+)`),
		pc:        regexp.MustCompile(`(?:^|\s)pc=(0x[0-9a-f]+)(?:\s|$)`),
		bareSig:   regexp.MustCompile(`^(SIG[A-Z]+): `),
		goWrap:    regexp.MustCompile(`\.gowrap\d+$`),
	}
})

// frame is one function of a stack in the crash text.
type frame struct {
	fn string
	pc string // "" for an inlined frame, which has no PC of its own
}

// parseCrash reads a Go crash report as printed with GOTRACEBACK=system: the message, the
// signal line of a fault, then "runtime stack:" (a failure on the system stack) and/or the
// goroutines, the crashing one first. It never fails: what it cannot read is left empty and
// marks the backtrace corrupted.
func parseCrash(text []byte) crashInfo {
	var ci crashInfo
	lines := strings.Split(string(text), "\n")
	i := 0
	// The message: from the marker line to the first blank line.
	for ; i < len(lines); i++ {
		l := lines[i]
		if rest, ok := cutAny(l, "panic: ", "fatal error: "); ok {
			msg := []string{rest}
			for i++; i < len(lines) && lines[i] != "" && !strings.HasPrefix(lines[i], "[signal ") && !strings.HasPrefix(lines[i], "goroutine "); i++ {
				msg = append(msg, lines[i])
			}
			ci.message = strings.Join(msg, "\n")
			break
		}
		if m := crashRE().bareSig.FindStringSubmatch(l); m != nil {
			ci.message = l
			ci.signal = m[1]
			i++
			break
		}
	}
	if len(ci.message) > maxMessage {
		ci.message = ci.message[:maxMessage]
	}
	var runtimeStack, gstack []frame
	gid, gstatus := "", ""
	badRuntime, badG := false, false
	for ; i < len(lines); i++ {
		l := lines[i]
		if m := crashRE().signal.FindStringSubmatch(l); m != nil && ci.signal == "" {
			ci.signal = m[1]
			if a := crashRE().addr.FindStringSubmatch(l); a != nil {
				ci.addr = a[1]
			}
			continue
		}
		if l == "runtime stack:" && gid == "" && runtimeStack == nil {
			runtimeStack, i, badRuntime = readStack(lines, i+1, false)
			continue
		}
		if m := crashRE().goroutine.FindStringSubmatch(l); m != nil {
			gid, gstatus = m[1], m[2]
			gstack, _, badG = readStack(lines, i+1, true)
			break
		}
	}
	// A goroutine that is not running did not crash: after "runtime stack:" (a deadlock, a
	// scheduler failure) the goroutines that follow are only the state of the program.
	running := gid != "" && (strings.HasPrefix(gstatus, "running") || strings.HasPrefix(gstatus, "syscall"))
	var stack []frame
	corrupt := false
	switch {
	case runtimeStack != nil && !running:
		stack, corrupt = runtimeStack, badRuntime
		ci.task = "runtime"
	case gid != "":
		stack, corrupt = append(runtimeStack, gstack...), badRuntime || badG
		ci.task = "goroutine " + gid
		if entry := entryFunc(gstack); entry != "" {
			ci.task += " " + entry
		}
	}
	for _, f := range stack {
		if f.pc != "" {
			ci.backtrace = append(ci.backtrace, f.pc)
		}
	}
	ci.pc = crashPC(stack)
	ci.corrupted = corrupt || len(ci.backtrace) == 0
	return ci
}

func cutAny(s string, prefixes ...string) (string, bool) {
	for _, p := range prefixes {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return rest, true
		}
	}
	return "", false
}

// readStack reads frames from lines[i:] up to the blank line that ends the stack; it returns
// the index of that line and whether the stack was incomplete (frames elided, a location
// line missing, or the text ending mid-stack). A goroutine's stack is whole only down to its
// bottom: runtime.goexit, or the "created by" line.
func readStack(lines []string, i int, goroutine bool) ([]frame, int, bool) {
	var frames []frame
	bad, bottom := false, !goroutine
	for ; i < len(lines); i++ {
		l := lines[i]
		switch {
		case l == "":
			return frames, i, bad || !bottom
		case strings.HasPrefix(l, "created by "):
			bottom = true
			i++ // its location line
			continue
		case strings.HasPrefix(l, "...") && strings.Contains(l, "frames elided"):
			bad = true
			continue
		case strings.HasPrefix(l, "\t"):
			// A location line with no function line before it.
			bad = true
			continue
		}
		f := frame{fn: funcName(l)}
		if f.fn == "runtime.goexit" {
			bottom = true
		}
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "\t") {
			i++
			if m := crashRE().pc.FindStringSubmatch(lines[i]); m != nil {
				f.pc = m[1]
			} else if strings.Contains(lines[i], " +0x") {
				// A real frame (it has an offset) printed without its PC: GOTRACEBACK was
				// lower than system.
				bad = true
			}
		} else {
			bad = true
		}
		frames = append(frames, f)
	}
	return frames, i, true
}

// funcName strips the argument list from a frame's function line.
func funcName(l string) string {
	if j := strings.LastIndex(l, "("); j > 0 && strings.HasSuffix(l, ")") {
		return l[:j]
	}
	return l
}

// isRuntimeFrame reports frames of the runtime's own crash machinery.
func isRuntimeFrame(fn string) bool {
	return fn == "panic" || strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "internal/runtime/")
}

// entryFunc is the function a goroutine was started with: its last frame outside the runtime
// and the compiler's wrappers for `go f(args)`.
func entryFunc(stack []frame) string {
	for j := len(stack) - 1; j >= 0; j-- {
		if !isRuntimeFrame(stack[j].fn) && !crashRE().goWrap.MatchString(stack[j].fn) {
			return stack[j].fn
		}
	}
	return ""
}

// crashPC is the PC of the first frame outside the runtime (where the program panicked or
// faulted); the top frame's when every frame is the runtime's.
func crashPC(stack []frame) string {
	first := ""
	for _, f := range stack {
		if f.pc == "" {
			continue
		}
		if first == "" {
			first = f.pc
		}
		if !isRuntimeFrame(f.fn) {
			return f.pc
		}
	}
	return first
}

// Core dump file layout: the record as one line of JSON, a newline, then exactly `size`
// bytes of raw crash text. The record's raw_sha256 checks the text.

func encodeCoreDump(cd *CoreDump, raw []byte) ([]byte, error) {
	sum := sha256.Sum256(raw)
	cd.Size = len(raw)
	cd.RawSHA256 = hex.EncodeToString(sum[:])
	cd.Present, cd.Valid, cd.Version = true, true, CoreDumpVersion
	if cd.Backtrace == nil {
		cd.Backtrace = []string{}
	}
	head, err := json.Marshal(cd)
	if err != nil {
		return nil, fmt.Errorf("encode core dump record: %w", err)
	}
	out := make([]byte, 0, len(head)+1+len(raw))
	out = append(out, head...)
	out = append(out, '\n')
	return append(out, raw...), nil
}

// decodeCoreDump reads a core dump partition. A damaged partition is still a core dump,
// reported with valid false and the whole partition as its raw image.
func decodeCoreDump(b []byte) (*CoreDump, []byte) {
	invalid := func() (*CoreDump, []byte) {
		return &CoreDump{Present: true, Valid: false, Size: len(b), Backtrace: []string{}}, b
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return invalid()
	}
	var cd CoreDump
	if err := json.Unmarshal(b[:nl], &cd); err != nil {
		return invalid()
	}
	raw := b[nl+1:]
	sum := sha256.Sum256(raw)
	cd.Present = true
	cd.Valid = cd.Version == CoreDumpVersion && cd.Size == len(raw) && cd.RawSHA256 == hex.EncodeToString(sum[:])
	if !cd.Valid {
		cd.Size = len(raw)
	}
	if cd.Backtrace == nil {
		cd.Backtrace = []string{}
	}
	return &cd, raw
}

// ReadCoreDump reads the last crash record and its raw crash text from the data directory;
// the error wraps fs.ErrNotExist when there is none.
func ReadCoreDump(dataDir string) (*CoreDump, []byte, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, CoreDumpFile))
	if err != nil {
		return nil, nil, fmt.Errorf("core dump: %w", err)
	}
	cd, raw := decodeCoreDump(b)
	return cd, raw, nil
}

// EraseCoreDump removes the crash record; the error wraps fs.ErrNotExist when there was none.
func EraseCoreDump(dataDir string) error {
	if err := os.Remove(filepath.Join(dataDir, CoreDumpFile)); err != nil {
		return fmt.Errorf("erase core dump: %w", err)
	}
	return syncDir(dataDir)
}

// writeCoreDump replaces the partition atomically: a power cut leaves the old record or the
// new one, never half of one.
func writeCoreDump(dataDir string, cd *CoreDump, raw []byte) error {
	b, err := encodeCoreDump(cd, raw)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dataDir, CoreDumpFile+".tmp*")
	if err != nil {
		return fmt.Errorf("write core dump: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write core dump: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write core dump: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write core dump: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dataDir, CoreDumpFile)); err != nil {
		return fmt.Errorf("write core dump: %w", err)
	}
	return syncDir(dataDir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
