package logs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"

	"devhost/host/testio"
)

var t0 = time.Date(2026, 11, 21, 23, 50, 0, 0, time.UTC)

func newRing(opts Options) (*Ring, *clockwork.FakeClock, *testio.Buffer) {
	fc := clockwork.NewFakeClockAt(t0)
	con := &testio.Buffer{}
	opts.Clock = fc
	opts.Console = con
	return New(opts), fc, con
}

func lastLine(t *testing.T, r *Ring) string {
	t.Helper()
	p := r.Read(-1, MaxLimit)
	if len(p.Lines) == 0 {
		t.Fatal("ring is empty")
	}
	return p.Lines[len(p.Lines)-1]
}

func TestLineFormat(t *testing.T) {
	tests := []struct {
		name string
		log  func(l *slog.Logger)
		want string
	}{
		{"info with attrs", func(l *slog.Logger) { l.Info("connected", "ssid", "boat net", "rssi", -61) },
			`I (12345) wifi: connected ssid="boat net" rssi=-61`},
		{"error letter", func(l *slog.Logger) { l.Error("failed", "err", errors.New("no ack")) },
			`E (12345) wifi: failed err="no ack"`},
		{"warn letter", func(l *slog.Logger) { l.Warn("weak") }, `W (12345) wifi: weak`},
		{"debug letter", func(l *slog.Logger) { l.Debug("scan") }, `D (12345) wifi: scan`},
		{"verbose letter", func(l *slog.Logger) { l.Log(context.Background(), LevelVerbose, "frame") },
			`V (12345) wifi: frame`},
		{"group attr", func(l *slog.Logger) { l.Info("m", slog.Group("ap", "ch", 6, "bssid", "aa:bb")) },
			`I (12345) wifi: m ap.ch=6 ap.bssid=aa:bb`},
		{"with attrs and group", func(l *slog.Logger) { l.With("id", 7).WithGroup("req").Info("x", "path", "/a") },
			`I (12345) wifi: x id=7 req.path=/a`},
		{"empty group omitted", func(l *slog.Logger) { l.WithGroup("g").Info("x") }, `I (12345) wifi: x`},
		{"empty and quoted values", func(l *slog.Logger) { l.Info("x", "e", "", "q", `a"b`, "eq", "a=b") },
			`I (12345) wifi: x e="" q="a\"b" eq="a=b"`},
		{"trailing newline trimmed", func(l *slog.Logger) { l.Info("done\n") }, `I (12345) wifi: done`},
		{"duration and bool", func(l *slog.Logger) { l.Info("x", "d", 1500*time.Millisecond, "ok", true) },
			`I (12345) wifi: x d=1.5s ok=true`},
		{"time attr", func(l *slog.Logger) { l.Info("x", "at", t0) }, `I (12345) wifi: x at=2026-11-21T23:50:00Z`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, fc, con := newRing(Options{})
			if err := r.SetLevel("*", "verbose"); err != nil {
				t.Fatal(err)
			}
			fc.Advance(12345 * time.Millisecond)
			tc.log(r.Logger("wifi"))
			if got := lastLine(t, r); got != tc.want {
				t.Errorf("stored\n got %q\nwant %q", got, tc.want)
			}
			if got := con.String(); got != tc.want+"\n" {
				t.Errorf("console\n got %q\nwant %q", got, tc.want+"\n")
			}
		})
	}
}

func TestLetter(t *testing.T) {
	tests := []struct {
		l    slog.Level
		want byte
	}{
		{slog.LevelError + 4, 'E'}, {slog.LevelError, 'E'}, {slog.LevelWarn, 'W'}, {slog.LevelInfo + 2, 'I'},
		{slog.LevelInfo, 'I'}, {slog.LevelDebug, 'D'}, {slog.LevelDebug - 1, 'V'}, {LevelVerbose, 'V'},
	}
	for _, tc := range tests {
		if got := Letter(tc.l); got != tc.want {
			t.Errorf("Letter(%v) = %c, want %c", tc.l, got, tc.want)
		}
	}
}

func TestClean(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"\x1b[0;32mI (1) t: ok\x1b[0m", "I (1) t: ok"},
		{"a\x1b[1;31;40mb", "ab"},
		{"a\x1b[2 qb", "ab"}, // CSI with an intermediate byte (cursor shape)
		{"a\x1b]0;title\x07b", "ab"},
		{"a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b", "alinkb"},
		{"a\x1b(Bb", "ab"},
		{"a\x1b7b\x1b8c", "abc"},
		{"a\x1bcb", "ab"},
		{"a\u009b31mb", "ab"},
		{"a\u009d0;t\u009cb", "ab"},
		{"a\u0085b", "ab"},
		{"line1\nline2\r\n", "line1 line2  "},
		{"tab\tkept", "tab\tkept"},
		{"bell\x07 del\x7f nul\x00", "bell del nul"},
		{"bad \xff utf8", "bad \uFFFD utf8"},
		{"unterminated \x1b[12", "unterminated "},
		{"esc at end \x1b", "esc at end "},
		{"größe °C ⚓", "größe °C ⚓"},
	}
	for _, tc := range tests {
		if got := Clean(tc.in); got != tc.want {
			t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestStoredLineIsCleanConsoleIsRaw(t *testing.T) {
	r, _, con := newRing(Options{})
	r.Logger("app").Info("\x1b[0;33mwarm\x1b[0m\nsecond")
	if got, want := lastLine(t, r), "I (0) app: warm second"; got != want {
		t.Errorf("stored %q, want %q", got, want)
	}
	if got, want := con.String(), "I (0) app: \x1b[0;33mwarm\x1b[0m\nsecond\n"; got != want {
		t.Errorf("console %q, want %q", got, want)
	}
}

func TestTruncation(t *testing.T) {
	tests := []struct {
		name string
		msg  string
	}{
		{"ascii", strings.Repeat("a", 400)},
		{"two-byte runes", strings.Repeat("é", 300)},
		{"three-byte runes", strings.Repeat("⚓", 200)},
		{"four-byte runes", strings.Repeat("🚤", 100)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, _, con := newRing(Options{})
			r.Logger("t").Info(tc.msg)
			got := lastLine(t, r)
			if len(got) > DefaultLineMax || len(got) < DefaultLineMax-3 {
				t.Errorf("stored length %d, want %d minus at most a partial rune", len(got), DefaultLineMax)
			}
			if !utf8.ValidString(got) {
				t.Errorf("stored line split a UTF-8 sequence: %q", got[len(got)-8:])
			}
			if !strings.HasPrefix(got, "I (0) t: ") {
				t.Errorf("prefix lost: %q", got[:12])
			}
			if want := "I (0) t: " + tc.msg + "\n"; con.String() != want {
				t.Error("console line was truncated")
			}
		})
	}
}

func TestWallClock(t *testing.T) {
	r, fc, con := newRing(Options{})
	fc.Advance(1500 * time.Millisecond)
	r.Logger("t").Info("before")
	set := false
	r.SetWallClock(func() (time.Time, bool) { return fc.Now().Add(time.Hour + 123*time.Millisecond), set })
	r.Logger("t").Info("unset")
	set = true
	r.Logger("t").Info("after")
	p := r.Read(-1, 10)
	want := []string{
		"I (1500) t: before",
		"I (1500) t: unset",
		"I (1500 2026-11-22T00:50:01.623Z) t: after",
	}
	if strings.Join(p.Lines, "|") != strings.Join(want, "|") {
		t.Errorf("lines\n got %q\nwant %q", p.Lines, want)
	}
	if got, want := con.String(), "I (1500) t: before\nI (1500) t: unset\nI (1500) t: after\n"; got != want {
		t.Errorf("console %q, want %q", got, want)
	}
}

func TestWallClockUsesUTC(t *testing.T) {
	r, _, _ := newRing(Options{})
	zone := time.FixedZone("X", 3*3600)
	r.SetWallClock(func() (time.Time, bool) { return time.Date(2026, 1, 2, 3, 4, 5, 6e6, zone), true })
	r.Printf('W', "t", "x")
	if got, want := lastLine(t, r), "W (0 2026-01-02T00:04:05.006Z) t: x"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// fill stores n lines "I (0) t: mNN" of 12 bytes (13 with the newline).
func fill(r *Ring, from, n int) {
	for i := from; i < from+n; i++ {
		r.Printf('I', "t", "m%02d", i)
	}
}

func TestRingDropsOldest(t *testing.T) {
	r, _, _ := newRing(Options{Size: 130, LineMax: 40})
	fill(r, 0, 10)
	p := r.Read(-1, MaxLimit)
	if p.First != 1 || p.Next != 11 || p.Dropped != 0 || p.Used != 130 || p.Size != 130 {
		t.Fatalf("full ring: %+v", p)
	}
	fill(r, 10, 5)
	p = r.Read(-1, MaxLimit)
	if p.First != 6 || p.Next != 16 || p.Dropped != 5 || p.Used != 130 || len(p.Lines) != 10 {
		t.Fatalf("after wrap: %+v", p)
	}
	if p.Lines[0] != "I (0) t: m05" || p.Lines[9] != "I (0) t: m14" {
		t.Errorf("kept lines %q", p.Lines)
	}
	// A longer line drops as many old lines as it needs.
	r.Printf('I', "t", "%s", strings.Repeat("x", 30))
	p = r.Read(-1, MaxLimit)
	if p.Used != 118 || p.First != 10 || p.Dropped != 9 {
		t.Errorf("after long line: first %d dropped %d used %d", p.First, p.Dropped, p.Used)
	}
}

func TestSizeAtLeastOneLine(t *testing.T) {
	r, _, _ := newRing(Options{Size: 10, LineMax: 40})
	r.Printf('I', "t", "%s", strings.Repeat("y", 100))
	p := r.Read(-1, MaxLimit)
	if p.Size != 41 || len(p.Lines) != 1 || len(p.Lines[0]) != 40 {
		t.Errorf("size %d lines %q", p.Size, p.Lines)
	}
}

func TestEmptyRing(t *testing.T) {
	r, _, _ := newRing(Options{})
	p := r.Read(-1, DefaultLimit)
	if p.First != FirstSeq || p.Next != FirstSeq || p.From != FirstSeq || len(p.Lines) != 0 || p.Gap || p.Size != DefaultSize {
		t.Errorf("empty page %+v", p)
	}
	if p := r.Read(0, DefaultLimit); p.Gap || p.Next != FirstSeq {
		t.Errorf("after=0 on empty ring %+v", p)
	}
}

func TestRead(t *testing.T) {
	r, _, _ := newRing(Options{Size: 130, LineMax: 40})
	fill(r, 0, 15) // keeps sequences 6..15; 1..5 dropped
	tests := []struct {
		name      string
		after     int64
		limit     int
		gap       bool
		from, nxt int64
		n         int
	}{
		{"default from oldest", -1, 200, false, 6, 16, 10},
		{"after 0 lost lines", 0, 200, true, 6, 16, 10},
		{"after just before a lost line", 4, 200, true, 6, 16, 10},
		{"after the last lost line", 5, 200, false, 6, 16, 10},
		{"after in the middle", 10, 200, false, 11, 16, 5},
		{"poll with nothing new", 15, 200, false, 16, 16, 0},
		{"after beyond the end", 100, 200, false, 16, 16, 0},
		{"limit from oldest", -1, 3, false, 6, 9, 3},
		{"limit in the middle", 12, 2, false, 13, 15, 2},
		{"limit with gap", 1, 4, true, 6, 10, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := r.Read(tc.after, tc.limit)
			if p.Gap != tc.gap || p.From != tc.from || p.Next != tc.nxt || len(p.Lines) != tc.n {
				t.Fatalf("got gap %v from %d next %d n %d; want %v %d %d %d", p.Gap, p.From, p.Next, len(p.Lines), tc.gap, tc.from, tc.nxt, tc.n)
			}
			if p.First != 6 || p.Dropped != 5 {
				t.Errorf("first %d dropped %d", p.First, p.Dropped)
			}
			for i, line := range p.Lines {
				if want := fmt.Sprintf("I (0) t: m%02d", p.From+int64(i)-1); line != want {
					t.Errorf("lines[%d] = %q, want %q (sequence from+i)", i, line, want)
				}
			}
		})
	}
}

func TestPollOnWithNextMinusOne(t *testing.T) {
	r, _, _ := newRing(Options{})
	fill(r, 0, 7)
	var got []string
	after := int64(-1)
	for range 10 {
		p := r.Read(after, 3)
		got = append(got, p.Lines...)
		after = p.Next - 1
		if len(p.Lines) == 0 {
			break
		}
	}
	fill(r, 7, 2)
	got = append(got, r.Read(after, 3).Lines...)
	if len(got) != 9 {
		t.Fatalf("read %d lines, want 9: %q", len(got), got)
	}
	for i, line := range got {
		if want := fmt.Sprintf("I (0) t: m%02d", i); line != want {
			t.Errorf("line %d = %q, want %q", i, line, want)
		}
	}
}

func TestLevels(t *testing.T) {
	type set struct{ tag, level string }
	tests := []struct {
		name  string
		sets  []set
		tag   string
		level slog.Level
		pass  bool
	}{
		{"default info passes info", nil, "a", slog.LevelInfo, true},
		{"default info filters debug", nil, "a", slog.LevelDebug, false},
		{"star debug passes debug", []set{{"*", "debug"}}, "a", slog.LevelDebug, true},
		{"star debug filters verbose", []set{{"*", "debug"}}, "a", LevelVerbose, false},
		{"star verbose passes verbose", []set{{"*", "verbose"}}, "a", LevelVerbose, true},
		{"tag overrides star up", []set{{"*", "error"}, {"a", "debug"}}, "a", slog.LevelDebug, true},
		{"tag overrides star down", []set{{"*", "verbose"}, {"a", "warn"}}, "a", slog.LevelInfo, false},
		{"other tag follows star", []set{{"*", "error"}, {"a", "debug"}}, "b", slog.LevelWarn, false},
		{"star set after tag keeps tag", []set{{"a", "debug"}, {"*", "none"}}, "a", slog.LevelDebug, true},
		{"none filters errors", []set{{"a", "none"}}, "a", slog.LevelError + 8, false},
		{"error passes error", []set{{"a", "error"}}, "a", slog.LevelError, true},
		{"error filters warn", []set{{"a", "error"}}, "a", slog.LevelWarn, false},
		{"warn passes warn", []set{{"a", "warn"}}, "a", slog.LevelWarn, true},
		{"info filters debug", []set{{"*", "verbose"}, {"a", "info"}}, "a", slog.LevelDebug, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, _, con := newRing(Options{})
			for _, s := range tc.sets {
				if err := r.SetLevel(s.tag, s.level); err != nil {
					t.Fatal(err)
				}
			}
			r.Logger(tc.tag).Log(context.Background(), tc.level, "probe")
			stored := len(r.Read(-1, 10).Lines) == 1
			printed := con.String() != ""
			if stored != tc.pass || printed != tc.pass {
				t.Errorf("stored %v printed %v, want %v", stored, printed, tc.pass)
			}
		})
	}
}

func TestSetLevelErrors(t *testing.T) {
	r, _, _ := newRing(Options{})
	tests := []struct {
		tag, level string
		want       error
	}{
		{"*", "trace", ErrLevel},
		{"*", "INFO", ErrLevel},
		{"*", "", ErrLevel},
		{"", "info", ErrTag},
		{"a b", "info", ErrTag},
		{strings.Repeat("t", 33), "info", ErrTag},
		{"tab\t", "info", ErrTag},
	}
	for _, tc := range tests {
		if err := r.SetLevel(tc.tag, tc.level); !errors.Is(err, tc.want) {
			t.Errorf("SetLevel(%q, %q) = %v, want %v", tc.tag, tc.level, err, tc.want)
		}
	}
	if got := r.Level("*"); got != "info" {
		t.Errorf("failed calls changed the default to %q", got)
	}
	for i := range maxTagOverrides {
		if err := r.SetLevel(fmt.Sprintf("t%d", i), "debug"); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.SetLevel("one-more", "debug"); !errors.Is(err, ErrTooManyTags) {
		t.Errorf("33rd tag: %v", err)
	}
	if err := r.SetLevel("t0", "warn"); err != nil || r.Level("t0") != "warn" {
		t.Errorf("changing an existing tag at the cap: %v %s", err, r.Level("t0"))
	}
}

func TestPrintf(t *testing.T) {
	r, fc, _ := newRing(Options{})
	fc.Advance(42 * time.Millisecond)
	r.Printf('W', "ota", "got %d bytes\n", 1024)
	r.Printf('D', "ota", "filtered")
	r.Printf('?', "ota", "unknown letter")
	p := r.Read(-1, 10)
	want := []string{"W (42) ota: got 1024 bytes", "I (42) ota: unknown letter"}
	if strings.Join(p.Lines, "|") != strings.Join(want, "|") {
		t.Errorf("got %q, want %q", p.Lines, want)
	}
}

func TestConcurrentLoggingAndReading(t *testing.T) {
	r := New(Options{Size: 2048})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := r.Logger(fmt.Sprintf("g%d", g))
			for i := range 500 {
				l.Info("line", "i", i)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		after := int64(-1)
		for range 200 {
			p := r.Read(after, 50)
			if p.Used > p.Size {
				t.Errorf("used %d over size %d", p.Used, p.Size)
				return
			}
			after = p.Next - 1
		}
	}()
	wg.Wait()
	p := r.Read(-1, MaxLimit)
	if p.Next != 2001 || p.First+int64(len(p.Lines)) != p.Next || p.Dropped != p.First-1 {
		t.Errorf("after 2000 lines: %+v", p)
	}
}

func BenchmarkLogLine(b *testing.B) {
	r := New(Options{})
	l := r.Logger("wifi")
	b.ReportAllocs()
	for b.Loop() {
		l.Info("connected", "ssid", "boat", "rssi", -61)
	}
}

func FuzzClean(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[0;32mI\x1b[0m", "\x1b]0;t\x07", "a\u009b1m", "\xff\xfe", "a\nb\r", "\x1b", "\x1b[", "\u009d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Clean(s)
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 from %q", s)
		}
		for _, rn := range out {
			if (rn < ' ' && rn != '\t') || (rn >= 0x7f && rn < 0xa0) {
				t.Fatalf("control %U left in %q (from %q)", rn, out, s)
			}
		}
		if Clean(out) != out {
			t.Fatalf("not idempotent: %q", out)
		}
		if len(truncate([]byte(out), 10)) > 10 || !utf8.Valid(truncate([]byte(out), 10)) {
			t.Fatalf("truncate broke %q", out)
		}
	})
}
