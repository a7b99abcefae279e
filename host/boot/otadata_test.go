package boot

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestOTADataTwoCopies(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadOTAData(dir); !errors.Is(err, ErrNoOTAData) {
		t.Fatalf("empty partition: %v", err)
	}
	a := OTAData{Boot: 0, Flashed: "a"}
	a.Slots[0] = Slot{State: SlotValid, Version: "1.0.0"}
	if err := WriteOTAData(dir, a); err != nil {
		t.Fatal(err)
	}
	b := a
	b.Boot, b.Slots[1] = 1, Slot{State: SlotNew, Version: "1.1.0"}
	if err := WriteOTAData(dir, b); err != nil {
		t.Fatal(err)
	}
	got, err := ReadOTAData(dir)
	if err != nil || got.Seq != 2 || got.Boot != 1 || got.Slots[1].Version != "1.1.0" {
		t.Fatalf("after two writes: %+v %v", got, err)
	}
	// A power cut tearing the newest copy (sequence 2 lives in the first sector) leaves the
	// one before it.
	path := filepath.Join(dir, OTADataFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	torn := bytes.Clone(raw)
	copy(torn[10:40], bytes.Repeat([]byte{0xff}, 30))
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = ReadOTAData(dir)
	if err != nil || got.Seq != 1 || got.Boot != 0 {
		t.Fatalf("torn newest copy: %+v %v", got, err)
	}
	// The next write goes over the torn copy, never over the intact one.
	c := got
	c.Flashed = "c"
	if err := WriteOTAData(dir, c); err != nil {
		t.Fatal(err)
	}
	if got, err = ReadOTAData(dir); err != nil || got.Seq != 2 || got.Flashed != "c" {
		t.Fatalf("write after a torn copy: %+v %v", got, err)
	}
	// Both copies gone: no record.
	if err := os.WriteFile(path, make([]byte, 2*sectorSize), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadOTAData(dir); !errors.Is(err, ErrNoOTAData) {
		t.Fatalf("zeroed partition: %v", err)
	}
}

// slotRig is a data directory and a bootloader over it; executables are small files, since
// chooseSlot only reads them.
type slotRig struct {
	t   testing.TB
	s   *supervisor
	dir string
}

func newSlotRig(t testing.TB, exe string) *slotRig {
	dir := t.TempDir()
	path := filepath.Join(t.TempDir(), "devhost")
	if err := os.WriteFile(path, []byte(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	clk := clockwork.NewFakeClockAt(time.Now())
	s := &supervisor{o: Options{DataDir: dir, Exe: path, Version: "1.0.0", Clock: clk}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return &slotRig{t: t, s: s, dir: dir}
}

func (r *slotRig) boot(powerOn bool) (int, OTAData) {
	r.t.Helper()
	n, sum, err := r.s.chooseSlot(powerOn)
	if err != nil {
		r.t.Fatal(err)
	}
	d, err := ReadOTAData(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	if sum != d.Slots[n].SHA256 {
		r.t.Fatalf("boot sum %s, slot record %s", sum, d.Slots[n].SHA256)
	}
	return n, d
}

// install writes exe into slot n as a verified download would, and selects it.
func (r *slotRig) install(n int, exe, version string) {
	r.t.Helper()
	if err := os.WriteFile(SlotPath(r.dir, n), []byte(exe), 0o755); err != nil {
		r.t.Fatal(err)
	}
	sum, size, err := fileSHA256Hex(SlotPath(r.dir, n))
	if err != nil {
		r.t.Fatal(err)
	}
	err = UpdateOTAData(r.dir, func(d *OTAData) error {
		d.Slots[n] = Slot{State: SlotNew, Version: version, Size: size, SHA256: sum}
		d.Boot = n
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

func TestUSBFlash(t *testing.T) {
	r := newSlotRig(t, "build one")
	if err := os.WriteFile(filepath.Join(r.dir, "nvs"), []byte("config"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, d := r.boot(true)
	if n != 0 || d.Slots[0].State != SlotValid || d.Slots[0].Version != "1.0.0" || d.Slots[1].State != SlotEmpty {
		t.Fatalf("first power-on: slot %d %+v", n, d)
	}
	r.install(1, "build two", "1.1.0")
	r.boot(false)
	if err := UpdateOTAData(r.dir, func(d *OTAData) error { d.Slots[1].State = SlotValid; return nil }); err != nil {
		t.Fatal(err)
	}
	// The same executable started again is no flash: the installed slot stays.
	n, d = r.boot(true)
	if n != 1 || d.Slots[1].Version != "1.1.0" {
		t.Fatalf("same executable: slot %d %+v", n, d)
	}
	// A rebuilt executable is a flash over USB: ota_0, otadata reset, configuration kept.
	if err := os.WriteFile(r.s.o.Exe, []byte("build three"), 0o755); err != nil {
		t.Fatal(err)
	}
	n, d = r.boot(true)
	if n != 0 || d.Slots[1].State != SlotEmpty {
		t.Fatalf("rebuilt executable: slot %d %+v", n, d)
	}
	if b, _ := os.ReadFile(SlotPath(r.dir, 0)); string(b) != "build three" {
		t.Fatalf("ota_0 holds %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(r.dir, "nvs")); string(b) != "config" {
		t.Fatalf("configuration changed: %q", b)
	}
}

// TestBootTransitions walks the bootloader's table: each row is the state before a reset and
// what the next boot picks.
func TestBootTransitions(t *testing.T) {
	type step struct {
		name    string
		act     func(r *slotRig)
		powerOn bool
		slot    int
		states  [2]string
	}
	steps := []step{
		{name: "power-on flashes ota_0", act: func(*slotRig) {}, powerOn: true, slot: 0, states: [2]string{SlotValid, SlotEmpty}},
		{name: "new image boots pending", act: func(r *slotRig) { r.install(1, "two", "1.1.0") }, slot: 1, states: [2]string{SlotValid, SlotPending}},
		{name: "reset while pending rolls back", act: func(*slotRig) {}, slot: 0, states: [2]string{SlotValid, SlotAborted}},
		{name: "rolled back stays on the old slot", act: func(*slotRig) {}, powerOn: true, slot: 0, states: [2]string{SlotValid, SlotAborted}},
		{name: "second install boots pending", act: func(r *slotRig) { r.install(1, "three", "1.2.0") }, slot: 1, states: [2]string{SlotValid, SlotPending}},
		{name: "confirmed image stays", act: func(r *slotRig) {
			_ = UpdateOTAData(r.dir, func(d *OTAData) error { d.Slots[1].State = SlotValid; return nil })
		}, powerOn: true, slot: 1, states: [2]string{SlotValid, SlotValid}},
		{name: "corrupt active slot boots the other", act: func(r *slotRig) {
			_ = os.WriteFile(SlotPath(r.dir, 1), []byte("thrAe"), 0o755)
		}, slot: 0, states: [2]string{SlotValid, SlotAborted}},
		{name: "app rollback (invalid) boots the other", act: func(r *slotRig) {
			r.install(1, "four", "1.3.0")
			r.boot(false)
			_ = UpdateOTAData(r.dir, func(d *OTAData) error { d.Slots[1].State, d.Boot = SlotInvalid, 0; return nil })
		}, slot: 0, states: [2]string{SlotValid, SlotInvalid}},
		{name: "download in progress (empty) is never booted", act: func(r *slotRig) {
			_ = UpdateOTAData(r.dir, func(d *OTAData) error { d.Slots[1] = Slot{State: SlotEmpty}; return nil })
			_ = os.WriteFile(SlotPath(r.dir, 1), []byte("half"), 0o755)
		}, powerOn: true, slot: 0, states: [2]string{SlotValid, SlotEmpty}},
	}
	r := newSlotRig(t, "one")
	for _, s := range steps {
		s.act(r)
		n, d := r.boot(s.powerOn)
		if n != s.slot || d.Boot != s.slot || d.Slots[0].State != s.states[0] || d.Slots[1].State != s.states[1] {
			t.Fatalf("%s: slot %d, otadata %+v; want slot %d states %v", s.name, n, d, s.slot, s.states)
		}
	}
}

func TestNothingBootableFlashesAgain(t *testing.T) {
	r := newSlotRig(t, "one")
	r.boot(true)
	if err := os.WriteFile(SlotPath(r.dir, 0), []byte("damaged"), 0o755); err != nil {
		t.Fatal(err)
	}
	n, d := r.boot(false)
	if n != 0 || d.Slots[0].State != SlotValid {
		t.Fatalf("slot %d %+v", n, d)
	}
	if b, _ := os.ReadFile(SlotPath(r.dir, 0)); string(b) != "one" {
		t.Fatalf("ota_0 holds %q", b)
	}
}

// At power-on the bootloader hashes ota_0 while comparing the executable with it (one hash
// for both questions): a damaged ota_0 is still refused, whether the executable is the one
// flashed (nothing else bootable: flashed again) or a new one (flashed anyway), and an
// executable of ota_0's size with other bytes is still a new one.
func TestPowerOnWithOneHash(t *testing.T) {
	for _, c := range []struct {
		name, slot0, exe, want string
	}{
		{"damaged ota_0, same executable", "onX", "one", "one"},
		{"damaged ota_0, new executable", "onX", "two", "two"},
		{"intact ota_0, new executable of the same size", "one", "onf", "onf"},
		{"intact ota_0, longer executable", "one", "one more", "one more"},
		{"intact ota_0, same executable", "one", "one", "one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newSlotRig(t, "one")
			r.boot(true)
			if err := os.WriteFile(SlotPath(r.dir, 0), []byte(c.slot0), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(r.s.o.Exe, []byte(c.exe), 0o755); err != nil {
				t.Fatal(err)
			}
			n, d := r.boot(true)
			if n != 0 || d.Slots[0].State != SlotValid {
				t.Fatalf("slot %d %+v", n, d)
			}
			if b, _ := os.ReadFile(SlotPath(r.dir, 0)); string(b) != c.want {
				t.Fatalf("ota_0 holds %q, want %q", b, c.want)
			}
		})
	}
}

// hashesAt boots and returns how many files the bootloader hashed for it.
func (r *slotRig) hashesAt(powerOn bool) (int, int, OTAData) {
	r.t.Helper()
	before := r.s.hashes
	n, d := r.boot(powerOn)
	return r.s.hashes - before, n, d
}

// rewrite writes b into path in place, its modification time set back to what it was: only
// the change time (and the content) tells.
func rewrite(t *testing.T, path, b string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// A file found to hash to its record is stamped in otadata and not hashed again while it
// keeps its stamp; any write to it, even of the same size with its modification time set
// back, makes the next boot hash it again, and a damaged one is still refused.
func TestStampSkipsTheHash(t *testing.T) {
	r := newSlotRig(t, "one")
	if h, _, _ := r.hashesAt(true); h != 2 {
		t.Fatalf("flash over USB hashed %d files, want 2 (the executable, then its copy)", h)
	}
	// Files written after the clock's now are not stamped: the next boots still hash.
	if h, _, d := r.hashesAt(true); h != 1 || d.FlashedFrom != (FileStamp{}) || d.Slots[0].Verified != (FileStamp{}) {
		t.Fatalf("power-on right after the flash: %d hashes, stamps %+v %+v", h, d.FlashedFrom, d.Slots[0].Verified)
	}
	r.s.o.Clock.(*clockwork.FakeClock).Advance(time.Hour)
	h, _, d := r.hashesAt(true)
	if h != 1 || d.FlashedFrom.SHA256 != d.Flashed || d.Slots[0].Verified.SHA256 != d.Slots[0].SHA256 {
		t.Fatalf("power-on an hour later: %d hashes, stamps %+v %+v", h, d.FlashedFrom, d.Slots[0].Verified)
	}
	for _, powerOn := range []bool{true, false} {
		if h, n, _ := r.hashesAt(powerOn); h != 0 || n != 0 {
			t.Fatalf("stamped boot (power-on %v): %d hashes, slot %d", powerOn, h, n)
		}
	}
	rewrite(t, SlotPath(r.dir, 0), "one")
	if h, n, d := r.hashesAt(false); h != 1 || n != 0 || d.Slots[0].State != SlotValid {
		t.Fatalf("ota_0 rewritten with the same bytes: %d hashes, slot %d %+v", h, n, d)
	}
	rewrite(t, SlotPath(r.dir, 0), "onX")
	if h, n, _ := r.hashesAt(false); h < 1 || n != 0 {
		t.Fatalf("damaged ota_0: %d hashes, slot %d", h, n)
	}
	if b, _ := os.ReadFile(SlotPath(r.dir, 0)); string(b) != "one" {
		t.Fatalf("damaged ota_0 booted: it holds %q", b)
	}
	r.s.o.Clock.(*clockwork.FakeClock).Advance(time.Hour)
	r.boot(true)
	if h, _, _ := r.hashesAt(true); h != 0 {
		t.Fatalf("stamped again: %d hashes", h)
	}
	// A new executable of the same size with the old modification time is a new one.
	rewrite(t, r.s.o.Exe, "two")
	r.boot(true)
	if b, _ := os.ReadFile(SlotPath(r.dir, 0)); string(b) != "two" {
		t.Fatalf("changed executable not flashed: ota_0 holds %q", b)
	}
}

// A stamp vouches only for the hash it was taken with: a record naming another image is
// checked by hashing.
func TestStampIsForItsHash(t *testing.T) {
	r := newSlotRig(t, "one")
	r.boot(true)
	r.s.o.Clock.(*clockwork.FakeClock).Advance(time.Hour)
	r.boot(true)
	err := UpdateOTAData(r.dir, func(d *OTAData) error {
		d.Slots[0].SHA256 = "0000000000000000000000000000000000000000000000000000000000000000"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if h, n, d := r.hashesAt(false); h < 1 || n != 0 || d.Slots[0].SHA256 == "0000000000000000000000000000000000000000000000000000000000000000" {
		t.Fatalf("record of another image: %d hashes, slot %d %+v", h, n, d)
	}
}

// BenchmarkPowerOnCheck is the bootloader's work at a power-on with an executable of 40 MB
// (the size of bin/devhost with its bundled plugins) already flashed into ota_0: hash ota_0
// while comparing the executable with it (hash), or find both stamped in otadata (stamped).
func BenchmarkPowerOnCheck(b *testing.B) {
	r := newSlotRig(b, strings.Repeat("devhost!", 5<<20))
	r.boot(true)
	r.s.o.Clock.(*clockwork.FakeClock).Advance(time.Hour)
	for _, c := range []struct {
		name    string
		stamped bool
	}{{"hash", false}, {"stamped", true}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if !c.stamped {
					b.StopTimer()
					err := UpdateOTAData(r.dir, func(d *OTAData) error {
						d.FlashedFrom, d.Slots[0].Verified = FileStamp{}, FileStamp{}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if h, _, _ := r.hashesAt(true); (h == 0) != c.stamped {
					b.Fatalf("%d files hashed", h)
				}
			}
		})
	}
}

// A file is stamped only once its times are older than the file system's timestamp
// granularity allows a later change to repeat: 100 ms for nanosecond times, 2 s for times in
// whole seconds.
func TestRacy(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 10, 0, time.UTC)
	at := func(d time.Duration) int64 { return now.Add(-d).UnixNano() }
	for _, c := range []struct {
		name         string
		mtime, ctime int64
		want         bool
	}{
		{"nanosecond times, 50 ms old", at(50*time.Millisecond + 7), at(50*time.Millisecond + 7), true},
		{"nanosecond times, 150 ms old", at(150*time.Millisecond + 7), at(150*time.Millisecond + 7), false},
		{"mtime old, ctime new", at(time.Hour + 7), at(20*time.Millisecond + 7), true},
		{"whole seconds, 1 s old", at(time.Second), at(time.Second), true},
		{"whole seconds, 3 s old", at(3 * time.Second), at(3 * time.Second), false},
		{"in the future", at(-time.Second + 7), at(-time.Second + 7), true},
	} {
		if got := racy(FileStamp{MtimeNS: c.mtime, CtimeNS: c.ctime}, now); got != c.want {
			t.Errorf("%s: racy %v, want %v", c.name, got, c.want)
		}
	}
}

// A full flash that refuses a record whose only news is the stamps does not stop the boot:
// the stamps only spare the next power-on a hash. A change of state it refuses does.
func TestStampsNotWrittenStillBoot(t *testing.T) {
	r := newSlotRig(t, "one")
	r.boot(true)
	r.s.o.Clock.(*clockwork.FakeClock).Advance(time.Hour)
	full := errors.New("no space left on device")
	r.s.writeOTA = func(string, OTAData) error { return full }
	n, sum, err := r.s.chooseSlot(true)
	if err != nil || n != 0 || sum == "" {
		t.Fatalf("power-on with only new stamps on a full flash: slot %d %q, %v", n, sum, err)
	}
	if d, _ := ReadOTAData(r.dir); d.FlashedFrom != (FileStamp{}) {
		t.Fatalf("stamps recorded although the write failed: %+v", d.FlashedFrom)
	}
	// A new image to move to pending is state: its write must succeed.
	if err := UpdateOTAData(r.dir, func(d *OTAData) error { d.Slots[0].State = SlotNew; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.s.chooseSlot(false); !errors.Is(err, full) {
		t.Fatalf("a state change not written: %v, want the write's error", err)
	}
}
