package boot

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

var reHex = regexp.MustCompile(`^0x[0-9a-f]+$`)

func TestParseCrash(t *testing.T) {
	cases := []struct {
		file      string
		message   string
		task      string
		pc        string
		frames    int
		first     string
		signal    string
		addr      string
		corrupted bool
	}{
		{"panic", "task_wdt: boom", "goroutine 22 main.main.func2", "0x4a1c4d", 4, "0x4795af", "", "", false},
		{"nil", "runtime error: invalid memory address or nil pointer dereference", "goroutine 25 main.main.func2",
			"0x4a1b5d", 5, "0x4795af", "SIGSEGV", "0x0", false},
		{"map", "concurrent map writes", "goroutine 26 main.(*T).work.func1", "0x4a1e05", 5, "0x4459b4", "", "", false},
		{"deadlock", "all goroutines are asleep - deadlock!", "runtime", "0x4459b4", 8, "0x4459b4", "", "", false},
		{"repanic", "first [recovered]\n\tpanic: second", "goroutine 24 main.main.func2", "0x4a2086", 6, "0x4795af", "", "", false},
		// Without GOTRACEBACK=system the frames carry no PC.
		{"single", "task_wdt: boom", "goroutine 22 main.main.func2", "", 0, "", "", "", true},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "crash", c.file+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			ci := parseCrash(b)
			if ci.message != c.message || ci.task != c.task || ci.pc != c.pc || ci.signal != c.signal ||
				ci.addr != c.addr || ci.corrupted != c.corrupted || len(ci.backtrace) != c.frames {
				t.Fatalf("got %+v", ci)
			}
			if c.frames > 0 && ci.backtrace[0] != c.first {
				t.Fatalf("backtrace starts %s, want %s", ci.backtrace[0], c.first)
			}
			for _, pc := range ci.backtrace {
				if !reHex.MatchString(pc) {
					t.Fatalf("backtrace entry %q", pc)
				}
			}
		})
	}
}

func TestParseCrashDamaged(t *testing.T) {
	full, err := os.ReadFile(filepath.Join("testdata", "crash", "panic.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// Cut inside the crashing goroutine's stack: what is there is kept, flagged corrupted.
	cut := full[:bytes.Index(full, []byte("main.main.func2()"))]
	ci := parseCrash(cut)
	if !ci.corrupted || len(ci.backtrace) != 2 || ci.pc != "0x4a1c4d" {
		t.Fatalf("cut report: %+v", ci)
	}
	// Elided frames are a partial backtrace.
	elided := bytes.Replace(full, []byte("runtime.goexit({})"), []byte("...additional frames elided...\nruntime.goexit({})"), 1)
	if ci := parseCrash(elided); !ci.corrupted || len(ci.backtrace) != 4 {
		t.Fatalf("elided: %+v", ci)
	}
	// No report at all.
	if ci := parseCrash([]byte("some log line\n")); ci.task != "" || !ci.corrupted || ci.message != "" {
		t.Fatalf("no report: %+v", ci)
	}
	// A non-Go fault.
	sig := "SIGSEGV: segmentation violation\nPC=0x7f00 m=0 sigcode=1\n\ngoroutine 0 gp=0x1 m=0 [idle]:\nruntime.x()\n\t/x.go:1 +0x1 fp=0x2 sp=0x3 pc=0x7f00\n"
	if ci := parseCrash([]byte(sig)); ci.signal != "SIGSEGV" || ci.pc != "0x7f00" || ci.message != "SIGSEGV: segmentation violation" {
		t.Fatalf("signal report: %+v", ci)
	}
	long := "panic: " + strings.Repeat("x", 5000) + "\n"
	if ci := parseCrash([]byte(long)); len(ci.message) != maxMessage {
		t.Fatalf("message of %d bytes kept", len(ci.message))
	}
}

func FuzzParseCrash(f *testing.F) {
	for _, n := range []string{"panic", "nil", "map", "deadlock", "repanic", "single"} {
		b, err := os.ReadFile(filepath.Join("testdata", "crash", n+".txt"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("runtime stack:\n\ngoroutine 1 [running]:\n"))
	f.Add([]byte("goroutine x [running]:\n\tpc=0x1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		ci := parseCrash(b)
		for _, pc := range ci.backtrace {
			if !reHex.MatchString(pc) {
				t.Fatalf("backtrace entry %q", pc)
			}
		}
		if ci.pc != "" && !reHex.MatchString(ci.pc) {
			t.Fatalf("pc %q", ci.pc)
		}
		if len(ci.backtrace) == 0 && !ci.corrupted {
			t.Fatal("empty backtrace not flagged")
		}
		if len(ci.message) > maxMessage {
			t.Fatalf("message of %d bytes", len(ci.message))
		}
	})
}

func TestCoreDumpFile(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := ReadCoreDump(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no dump: %v", err)
	}
	if err := EraseCoreDump(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("erase with no dump: %v", err)
	}
	raw := []byte("panic: boom\n\ngoroutine 1 [running]:\n")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in := &CoreDump{Task: "goroutine 1 main.main", PC: "0x10", Backtrace: []string{"0x10", "0x20"}, AppELFSHA256: "ab",
		Message: "boom", Reason: ReasonPanic, BootCount: 3, At: at}
	if err := writeCoreDump(dir, in, raw); err != nil {
		t.Fatal(err)
	}
	cd, got, err := ReadCoreDump(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, raw) || !cd.Present || !cd.Valid || cd.Size != len(raw) || cd.Version != CoreDumpVersion ||
		cd.Task != in.Task || cd.PC != "0x10" || len(cd.Backtrace) != 2 || cd.BootCount != 3 || !cd.At.Equal(at) {
		t.Fatalf("read back %+v %q", cd, got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}

	// A flipped byte in the raw text makes the record invalid, but it is still reported.
	b, _ := os.ReadFile(filepath.Join(dir, CoreDumpFile))
	b[len(b)-2] ^= 1
	if err := os.WriteFile(filepath.Join(dir, CoreDumpFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	cd, _, err = ReadCoreDump(dir)
	if err != nil || cd.Valid || !cd.Present || cd.Task != in.Task {
		t.Fatalf("damaged text: %+v %v", cd, err)
	}
	// A damaged header: the whole partition is the raw image.
	if err := os.WriteFile(filepath.Join(dir, CoreDumpFile), []byte("\x00\x01garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	cd, got, err = ReadCoreDump(dir)
	if err != nil || cd.Valid || !cd.Present || cd.Size != 9 || string(got) != "\x00\x01garbage" || cd.Backtrace == nil {
		t.Fatalf("damaged header: %+v %q %v", cd, got, err)
	}

	if err := EraseCoreDump(dir); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadCoreDump(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after erase: %v", err)
	}
}

func FuzzDecodeCoreDump(f *testing.F) {
	good, _ := encodeCoreDump(&CoreDump{Task: "goroutine 1", Backtrace: []string{"0x1"}}, []byte("panic: x\n"))
	f.Add(good)
	f.Add([]byte("{}\n"))
	f.Add([]byte(`{"version":1,"size":0,"raw_sha256":""}` + "\n"))
	f.Add([]byte("no newline"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cd, raw := decodeCoreDump(b)
		if !cd.Present || cd.Backtrace == nil {
			t.Fatalf("decoded %+v", cd)
		}
		if cd.Size != len(raw) {
			t.Fatalf("size %d, raw %d", cd.Size, len(raw))
		}
		if cd.Valid {
			// A valid record re-encodes to the same partition.
			again, err := encodeCoreDump(cd, raw)
			if err != nil {
				t.Fatal(err)
			}
			cd2, raw2 := decodeCoreDump(again)
			if !cd2.Valid || !bytes.Equal(raw, raw2) {
				t.Fatal("valid record does not round-trip")
			}
		}
	})
}

// TestCoreDumpSummaryMembers: the summary has every member of the spec's Xtensa core dump
// summary, also for a crash that leaves some of them empty (a panic has no signal).
func TestCoreDumpSummaryMembers(t *testing.T) {
	b, err := json.Marshal(CoreDump{Present: true, Valid: true, Message: "panic: boom"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"present", "size", "valid", "task", "pc", "app_elf_sha256", "version",
		"exc_cause", "exc_vaddr", "backtrace", "backtrace_corrupted"} {
		if _, ok := m[k]; !ok {
			t.Errorf("summary lacks %q: %s", k, b)
		}
	}
}
