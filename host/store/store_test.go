package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func openT(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

// dump returns every user key of s.
func dump(t *testing.T, s *Store) map[string]string {
	t.Helper()
	m := map[string]string{}
	if err := s.Scan("", func(k, v string) bool { m[k] = v; return true }); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return m
}

func TestSetGetDeleteScanPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nvs")
	s := openT(t, path)
	if s.ErasedAtBoot() {
		t.Fatal("a new partition reported as erased")
	}
	for k, v := range map[string]string{"cfg/a/x": "1", "cfg/a/y": "two\r\nlines", "cfg/b/z": "", "st/q": "\x00bin"} {
		if err := s.Set(k, v); err != nil {
			t.Fatalf("Set(%q): %v", k, err)
		}
	}
	if err := s.Delete("cfg/a/x"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.Delete("never/stored"); err != nil {
		t.Fatalf("Delete of an absent key: %v", err)
	}
	var got []string
	if err := s.Scan("cfg/", func(k, v string) bool { got = append(got, k+"="+v); return true }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"cfg/a/y=two\r\nlines", "cfg/b/z="}; !slices.Equal(got, want) {
		t.Fatalf("Scan(cfg/) = %q, want %q", got, want)
	}
	got = nil
	_ = s.Scan("", func(k, v string) bool { got = append(got, k); return false })
	if len(got) != 1 {
		t.Fatalf("Scan did not stop when fn returned false: %q", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get("cfg/a/y"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v, want ErrClosed", err)
	}

	s = openT(t, path)
	defer s.Close()
	want := map[string]string{"cfg/a/y": "two\r\nlines", "cfg/b/z": "", "st/q": "\x00bin"}
	if got := dump(t, s); !maps.Equal(got, want) {
		t.Fatalf("after reopen = %q, want %q", got, want)
	}
	if v, ok, err := s.Get("cfg/b/z"); err != nil || !ok || v != "" {
		t.Fatalf("Get of a stored empty value = %q %v %v", v, ok, err)
	}
	if _, ok, err := s.Get("cfg/a/x"); err != nil || ok {
		t.Fatalf("deleted key still found: %v %v", ok, err)
	}
}

func TestReservedKeysRefused(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "nvs"))
	defer s.Close()
	for _, k := range []string{"", "!intent", "!x"} {
		if err := s.Set(k, "v"); !errors.Is(err, ErrReservedKey) {
			t.Errorf("Set(%q) = %v, want ErrReservedKey", k, err)
		}
		if _, _, err := s.Get(k); !errors.Is(err, ErrReservedKey) {
			t.Errorf("Get(%q) = %v, want ErrReservedKey", k, err)
		}
		if err := s.Delete(k); !errors.Is(err, ErrReservedKey) {
			t.Errorf("Delete(%q) = %v, want ErrReservedKey", k, err)
		}
		if err := s.Apply(map[string]string{"ok": "1", k: "v"}, nil); !errors.Is(err, ErrReservedKey) {
			t.Errorf("Apply with %q = %v, want ErrReservedKey", k, err)
		}
	}
	if err := s.Apply(map[string]string{"a": "1"}, []string{"a"}); err == nil {
		t.Error("Apply with a key both set and deleted was accepted")
	}
	if got := dump(t, s); len(got) != 0 {
		t.Fatalf("refused writes stored %q", got)
	}
}

func TestApplyBatch(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "nvs"))
	defer s.Close()
	if err := s.Apply(map[string]string{"a": "1", "b": "2", "c": "3"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(map[string]string{"a": "10"}, []string{"b", "missing"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(nil, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := dump(t, s), map[string]string{"a": "10", "c": "3"}; !maps.Equal(got, want) {
		t.Fatalf("after batches = %q, want %q", got, want)
	}
}

// TestApplyTornAtEveryOffset cuts the file inside the last batch at every byte offset, as a
// power cut during the write would, and checks that reopening never yields a half batch, and
// that once the intent record is whole the batch is always completed.
func TestApplyTornAtEveryOffset(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nvs")
	before := map[string]string{"a": "1", "b": "2", "c": "3"}
	s := openT(t, path)
	for k, v := range before {
		if err := s.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	start := fileSize(t, path)
	s = openT(t, path)
	if err := s.Apply(map[string]string{"a": "10", "d": "40", "e": "fifty"}, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	after := dump(t, s)
	_ = s.Close()
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(full)) <= start {
		t.Fatal("the batch did not grow the file")
	}
	sawAfter := false
	for off := start; off <= int64(len(full)); off++ {
		p := filepath.Join(dir, "torn")
		if err := os.WriteFile(p, full[:off], 0o600); err != nil {
			t.Fatal(err)
		}
		s := openT(t, p)
		got := dump(t, s)
		erased := s.ErasedAtBoot()
		_ = s.Close()
		switch {
		case erased:
			t.Fatalf("offset %d: a torn tail was treated as corruption", off)
		case maps.Equal(got, after):
			sawAfter = true
		case maps.Equal(got, before):
			if sawAfter {
				t.Fatalf("offset %d: batch lost although a shorter cut kept it", off)
			}
		default:
			t.Fatalf("offset %d: half-applied batch %q", off, got)
		}
	}
	if !sawAfter {
		t.Fatal("the whole file did not hold the batch")
	}
}

// TestApplyInterrupted fails the commits of one batch one by one: the batch is then either
// absent or whole, now and after a reopen.
func TestApplyInterrupted(t *testing.T) {
	before := map[string]string{"a": "1", "b": "2"}
	after := map[string]string{"a": "10", "c": "30"}
	for okCommits := 0; okCommits <= 2; okCommits++ {
		t.Run(strconv.Itoa(okCommits), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "nvs")
			s := openT(t, path)
			_ = s.Apply(before, nil)
			s.FailWritesForTest(errors.New("flash worn out"))
			s.failAfter = okCommits
			err := s.Apply(map[string]string{"a": "10", "c": "30"}, []string{"b"})
			if err == nil {
				t.Fatal("Apply with a failing commit returned nil")
			}
			now := dump(t, s)
			if !maps.Equal(now, before) && !maps.Equal(now, after) {
				t.Fatalf("half-applied batch in memory: %q", now)
			}
			_ = s.Close()
			s = openT(t, path)
			got := dump(t, s)
			if !maps.Equal(got, before) && !maps.Equal(got, after) {
				t.Fatalf("half-applied batch after reopen: %q", got)
			}
			_ = s.Close()

			// A write acknowledged after the failed batch is never overwritten by it later.
			s = openT(t, path)
			_ = s.Apply(before, []string{"c"})
			s.FailWritesForTest(errors.New("flash worn out"))
			s.failAfter = okCommits
			_ = s.Apply(map[string]string{"a": "10", "c": "30"}, []string{"b"})
			s.FailWritesForTest(nil)
			if err := s.Set("a", "99"); err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
			s = openT(t, path)
			defer s.Close()
			if v, _, _ := s.Get("a"); v != "99" {
				t.Fatalf("a later write was overwritten by the failed batch: a=%q", v)
			}
		})
	}
}

func TestFailWritesForTest(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "nvs"))
	defer s.Close()
	_ = s.Set("k", "old")
	boom := errors.New("boom")
	s.FailWritesForTest(boom)
	if err := s.Set("k", "new"); !errors.Is(err, boom) {
		t.Fatalf("Set = %v, want %v", err, boom)
	}
	if err := s.Apply(map[string]string{"k": "new", "j": "1"}, nil); !errors.Is(err, boom) {
		t.Fatalf("Apply = %v, want %v", err, boom)
	}
	if err := s.EraseAll(); !errors.Is(err, boom) {
		t.Fatalf("EraseAll = %v, want %v", err, boom)
	}
	if got := dump(t, s); !maps.Equal(got, map[string]string{"k": "old"}) {
		t.Fatalf("failed writes changed the store: %q", got)
	}
	s.FailWritesForTest(nil)
	if err := s.Set("k", "new"); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptPartitionMovedAside(t *testing.T) {
	for name, content := range map[string]string{
		"garbage":          "this is not a database\n",
		"bad command":      "*3\r\n$3\r\nput\r\n$1\r\na\r\n$1\r\nb\r\n",
		"empty command":    "*1\r\n$0\r\n\r\n",
		"short command":    "*2\r\n$1\r\ns\r\n$1\r\na\r\n",
		"bad expiry":       "*5\r\n$3\r\nset\r\n$1\r\na\r\n$1\r\nb\r\n$2\r\nex\r\n$1\r\nz\r\n",
		"valid then bad":   "*3\r\n$3\r\nset\r\n$1\r\na\r\n$1\r\nb\r\nXXXX\r\n",
		"bad length digit": "*3\r\n$3\r\nset\r\n$x\r\na\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "nvs")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			s := openT(t, path)
			defer s.Close()
			if !s.ErasedAtBoot() {
				t.Fatal("ErasedAtBoot = false for an unreadable partition")
			}
			if got := dump(t, s); len(got) != 0 {
				t.Fatalf("fresh store holds %q", got)
			}
			aside, err := os.ReadFile(path + ".corrupt")
			if err != nil || string(aside) != content {
				t.Fatalf("unreadable file not kept aside: %q %v", aside, err)
			}
			if err := s.Set("k", "v"); err != nil {
				t.Fatalf("fresh store not writable: %v", err)
			}
		})
	}
}

func TestTornTailIsNotCorruption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nvs")
	content := "*3\r\n$3\r\nset\r\n$1\r\na\r\n$1\r\nb\r\n*3\r\n$3\r\nset\r\n$1\r\nc"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openT(t, path)
	defer s.Close()
	if s.ErasedAtBoot() {
		t.Fatal("torn tail treated as corruption")
	}
	if got := dump(t, s); !maps.Equal(got, map[string]string{"a": "b"}) {
		t.Fatalf("got %q", got)
	}
}

func TestEraseAll(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nvs")
	s := openT(t, path)
	_ = s.Apply(map[string]string{"cfg/wifi/psk0": "supersecretpass", "st/token": "tok-123456"}, nil)
	if err := s.EraseAll(); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, s); len(got) != 0 {
		t.Fatalf("after EraseAll: %q", got)
	}
	raw, _ := os.ReadFile(path)
	if bytes.Contains(raw, []byte("supersecretpass")) || bytes.Contains(raw, []byte("tok-123456")) {
		t.Fatal("erased values still readable in the file")
	}
	if err := s.Set("after", "1"); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	s = openT(t, path)
	defer s.Close()
	if got := dump(t, s); !maps.Equal(got, map[string]string{"after": "1"}) {
		t.Fatalf("after reopen: %q", got)
	}
}

func TestCompactAtOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nvs")
	s := openT(t, path)
	for i := range 200 {
		if err := s.Set("k", strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close()
	grown := fileSize(t, path)
	s = openT(t, path)
	defer s.Close()
	if size := fileSize(t, path); size >= grown/10 {
		t.Fatalf("file not compacted at open: %d bytes, was %d", size, grown)
	}
	if v, _, _ := s.Get("k"); v != "199" {
		t.Fatalf("k = %q after compaction", v)
	}
	if err := s.Set("k2", "x"); err != nil {
		t.Fatalf("write after compaction: %v", err)
	}
	if _, err := os.Stat(path + ".compact"); !os.IsNotExist(err) {
		t.Fatalf("compaction snapshot left behind: %v", err)
	}
}

func TestSecondOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nvs")
	s := openT(t, path)
	if _, err := Open(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	_ = s.Close()
	s = openT(t, path)
	_ = s.Close()
}

func TestIntentRoundTrip(t *testing.T) {
	sets := map[string]string{"a": "1", "b\x00": "", "c": strings.Repeat("x", 300)}
	deletes := []string{"d", "e"}
	gs, gd, err := decodeIntent(encodeIntent(sets, deletes))
	if err != nil || !maps.Equal(gs, sets) || !slices.Equal(gd, deletes) {
		t.Fatalf("round trip: %q %q %v", gs, gd, err)
	}
	for _, bad := range []string{"X\x01a", "S\x05ab", "S\x01a", "D\x00", "S\x01!\x00"} {
		if _, _, err := decodeIntent(bad); err == nil {
			t.Errorf("decodeIntent(%q) accepted", bad)
		}
	}
}

func FuzzDecodeIntent(f *testing.F) {
	f.Add(encodeIntent(map[string]string{"a": "1"}, []string{"b"}))
	f.Add("S\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")
	f.Add("")
	f.Fuzz(func(t *testing.T, raw string) {
		sets, deletes, err := decodeIntent(raw)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to something that decodes to the same batch.
		s2, d2, err := decodeIntent(encodeIntent(sets, deletes))
		if err != nil || !maps.Equal(s2, sets) || len(d2) != len(deletes) {
			t.Fatalf("re-encoded intent differs: %v", err)
		}
	})
}

// FuzzOpen feeds arbitrary partition contents to Open: it never panics, and always yields a
// usable store.
func FuzzOpen(f *testing.F) {
	f.Add([]byte("*3\r\n$3\r\nset\r\n$1\r\na\r\n$1\r\nb\r\n"))
	f.Add([]byte("*1\r\n$0\r\n\r\n"))
	f.Add([]byte("*3\r\n$3\r\nset\r\n$7\r\n!intent\r\n$4\r\nS\x01a\x01\r\n"))
	f.Add([]byte("*1\r\n$7\r\nflushdb\r\n"))
	f.Fuzz(func(t *testing.T, content []byte) {
		path := filepath.Join(t.TempDir(), "nvs")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer s.Close()
		if err := s.Set("k", "v"); err != nil {
			t.Fatalf("store unusable: %v", err)
		}
	})
}

// TestKillNine runs a writer in a child process and kills it with SIGKILL at a random moment,
// several rounds on the same partition: every write the child acknowledged must be there, and
// every batch whole or absent.
func TestKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "nvs")
	acked := map[int]bool{}
	next := 0
	for round := range 6 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillNineChild$")
		cmd.Env = append(os.Environ(), "STORE_CHILD_PATH="+path, "STORE_CHILD_START="+strconv.Itoa(next))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAt := 20 + rand.IntN(150)
		sc := bufio.NewScanner(out)
		n, killed := 0, false
		for sc.Scan() {
			i, err := strconv.Atoi(strings.TrimPrefix(sc.Text(), "ack "))
			if err != nil {
				continue
			}
			acked[i] = true
			next = max(next, i+1)
			if n++; n == killAt && !killed {
				_ = cmd.Process.Kill()
				killed = true
			}
		}
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("round %d: child exited by itself after %d writes", round, n)
		}
		next += 2 // the write in flight at the kill may or may not have landed

		s := openT(t, path)
		got := dump(t, s)
		_ = s.Close()
		for i := range acked {
			checkWrite(t, got, i, true)
		}
		for i := 0; i < next; i++ {
			if !acked[i] {
				checkWrite(t, got, i, false)
			}
		}
	}
}

// checkWrite checks write i of the child: a single key, or (every third) a batch of three.
func checkWrite(t *testing.T, got map[string]string, i int, mustExist bool) {
	t.Helper()
	if i%3 != 0 {
		v, ok := got[fmt.Sprintf("k%06d", i)]
		if mustExist && (!ok || v != fmt.Sprintf("v%d", i)) {
			t.Fatalf("acknowledged write %d lost: %q %v", i, v, ok)
		}
		return
	}
	n := 0
	for j := range 3 {
		if got[fmt.Sprintf("b%06d/%d", i, j)] == fmt.Sprintf("v%d", i) {
			n++
		}
	}
	if n != 0 && n != 3 {
		t.Fatalf("batch %d half applied (%d of 3 keys)", i, n)
	}
	if mustExist && n != 3 {
		t.Fatalf("acknowledged batch %d lost", i)
	}
}

// TestKillNineChild is the writer TestKillNine starts; it does nothing when run directly.
func TestKillNineChild(t *testing.T) {
	path := os.Getenv("STORE_CHILD_PATH")
	if path == "" {
		t.Skip("only runs as the child of TestKillNine")
	}
	start, _ := strconv.Atoi(os.Getenv("STORE_CHILD_START"))
	s, err := Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child open:", err)
		os.Exit(2)
	}
	for i := start; ; i++ {
		v := fmt.Sprintf("v%d", i)
		if i%3 == 0 {
			err = s.Apply(map[string]string{
				fmt.Sprintf("b%06d/0", i): v, fmt.Sprintf("b%06d/1", i): v, fmt.Sprintf("b%06d/2", i): v,
			}, nil)
		} else {
			err = s.Set(fmt.Sprintf("k%06d", i), v)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "child write:", err)
			os.Exit(2)
		}
		if _, err := fmt.Fprintf(os.Stdout, "ack %d\n", i); err != nil {
			os.Exit(2)
		}
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
