package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"devhost/host/board"
	"devhost/plugins"
	"devhost/plugins/n2k/decode"
	"devhost/plugins/n2k/input"
	"devhost/plugins/n2k/skmap"
)

var (
	n2kWasmOnce sync.Once
	n2kWasmPath string
	n2kWasmErr  error
)

// n2kWasm builds plugins/n2k once for the package's tests and benchmarks.
func n2kWasm(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("compiles plugins/n2k for wasip1 with the Go toolchain")
	}
	n2kWasmOnce.Do(func() {
		dir, err := os.MkdirTemp("", "devctl-n2k-test-")
		if err != nil {
			n2kWasmErr = err
			return
		}
		n2kWasmPath = filepath.Join(dir, "n2k.wasm")
		n2kWasmErr = plugins.Build(context.Background(), "n2k", n2kWasmPath)
	})
	if n2kWasmErr != nil {
		t.Fatal(n2kWasmErr)
	}
	return n2kWasmPath
}

func n2kLogs() string { return filepath.Join(plugins.Dir(), "n2k", "testdata", "logs") }

// n2kBenchInput is what the decode benchmarks feed: the frames of the Dirona log and the n2k
// plugin's module.
func n2kBenchInput(b *testing.B) ([]decode.Frame, []byte) {
	b.Helper()
	frames, _, _, err := readLog("test", filepath.Join(n2kLogs(), "dirona-actisense-serial.head.raw"), input.Analyzer)
	if err != nil {
		b.Fatal(err)
	}
	wasm, err := os.ReadFile(n2kWasm(b))
	if err != nil {
		b.Fatal(err)
	}
	return frames, wasm
}

// decodeFile runs devctl n2k decode and answers stdout and stderr.
func decodeFile(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &app{stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
	args = append([]string{"n2k", "decode", "--module", n2kWasm(t)}, args...)
	if code := a.run(context.Background(), args); code != exitOK {
		t.Fatalf("devctl %v: exit %d: %s", args, code, errOut.String())
	}
	return out.String(), errOut.String()
}

// Each format's parser, through the plugin: the same heading in every form, stamped with
// the line's time where the line has a date, else with the time it was decoded.
func TestN2KDecodeFormats(t *testing.T) {
	dir := t.TempDir()
	logs := map[string]struct{ text, stamp string }{
		"candump":   {"(1502979132.106111) slcan0 09F11207#FF103BFF7FCEF5FC\n", "2017-08-17T14:12:12.106Z"},
		"analyzer":  {"2016-02-28T19:57:02.364Z,2,127250,7,255,8,ff,10,3b,ff,7f,ce,f5,fc\n", "2016-02-28T19:57:02.364Z"},
		"actisense": {"A000057.055 07FF2 1F112 FF103BFF7FCEF5FC\n", ""},
		"ydraw":     {"00:29:58.617 R 09F11207 FF 10 3B FF 7F CE F5 FC\n", ""},
		"ikonvert":  {"$PDGY,000000,4,,5,482.231,,,\n!PDGY,127250,2,7,255,481.734,/xA7/3/O9fw=\n", ""},
	}
	for format, log := range logs {
		text := log.text
		t.Run(format, func(t *testing.T) {
			path := filepath.Join(dir, format+".log")
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{format, "auto"} {
				before := time.Now().UTC().Truncate(time.Millisecond)
				out, errOut := decodeFile(t, "--format", f, path)
				after := time.Now()
				var d deltaLine
				if err := json.Unmarshal([]byte(out), &d); err != nil {
					t.Fatalf("--format %s: %v: %q (%s)", f, err, out, errOut)
				}
				u := d.Updates[0]
				if u.Source.PGN != 127250 || u.Source.Src != "7" || len(u.Values) != 2 ||
					u.Values[0].Path != "navigation.headingTrue" || u.Values[0].Value != 1.512 {
					t.Errorf("--format %s: %s", f, out)
				}
				if !strings.Contains(errOut, "1 deltas") {
					t.Errorf("--format %s: stderr %q", f, errOut)
				}
				if strings.Contains(out, `"frame"`) {
					t.Errorf("--format %s: the plugin's frame member printed: %s", f, out)
				}
				if log.stamp != "" {
					if u.Timestamp != log.stamp {
						t.Errorf("--format %s: timestamp %q, want the line's %s", f, u.Timestamp, log.stamp)
					}
				} else if ts, err := time.Parse(time.RFC3339Nano, u.Timestamp); err != nil || ts.Before(before) || ts.After(after) {
					t.Errorf("--format %s: timestamp %q, want the time of decoding (%v..%v)", f, u.Timestamp, before, after)
				}
			}
		})
	}
}

// A message of several frames carries the time of its last frame's line, as canboatjs gives
// it the last frame's; messages in between keep their own.
func TestN2KDecodeStampsTheLastFrame(t *testing.T) {
	ais, err := decode.Encode(129038, map[string]any{"messageId": 1.0, "userId": 244660001.0,
		"longitude": 4.5, "latitude": 52.1, "sog": 5.2, "cog": 1.5})
	if err != nil {
		t.Fatal(err)
	}
	frames := decode.Frames(decode.Message{Header: decode.Header{Prio: 4, PGN: 129038, Src: 40, Dst: 255}, Data: ais}, 0, nil)
	if len(frames) < 3 {
		t.Fatalf("%d frames", len(frames))
	}
	var log strings.Builder
	at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	line := func(id uint32, data []byte) {
		fmt.Fprintf(&log, "(%d.%06d) can0 %08X#%X\n", at.Unix(), at.Nanosecond()/1000, id, data)
		at = at.Add(15 * time.Millisecond)
	}
	heading := []byte{0xff, 0x10, 0x3b, 0xff, 0x7f, 0xce, 0xf5, 0xfc}
	headingID := decode.Header{Prio: 2, PGN: 127250, Src: 7, Dst: 255}.ID()
	for i, f := range frames {
		line(f.ID, f.Data)
		if i == 0 {
			line(headingID, heading) // a heading between the AIS report's frames
		}
	}
	path := filepath.Join(t.TempDir(), "fast.log")
	if err := os.WriteFile(path, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := decodeFile(t, path)
	got := map[int]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var d deltaLine
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("%v: %q", err, l)
		}
		got[d.Updates[0].Source.PGN] = d.Updates[0].Timestamp
	}
	last := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC).Add(time.Duration(len(frames)) * 15 * time.Millisecond)
	want := map[int]string{127250: "2024-05-06T07:08:09.015Z", 129038: last.Format("2006-01-02T15:04:05.000Z")}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("timestamps %v, want %v", got, want)
	}
}

// logStamped takes the plugin's frame member off and puts the frame's log time for every
// stamp of the decoding time (a notification's own too), whatever their lengths.
func TestN2KLogStamped(t *testing.T) {
	frames := []decode.Frame{{Time: "2016-02-28T19:57:02.364Z"}, {}}
	const note = `"values":[{"path":"notifications.x","value":{"state":"alarm","timestamp":%q}}]`
	delta := func(ts, frame string) string {
		return `{"updates":[{"source":{"src":"7"},"timestamp":"` + ts + `",` + fmt.Sprintf(note, ts) + `}]` + frame + `}`
	}
	for _, c := range []struct{ in, want string }{
		{delta("2026-11-28T05:46:39.211Z", `,"frame":1`), delta("2016-02-28T19:57:02.364Z", "")},
		{delta("", `,"frame":1`), delta("2016-02-28T19:57:02.364Z", "")},                         // no clock: other length
		{delta("2026-11-28T05:46:39.211Z", `,"frame":2`), delta("2026-11-28T05:46:39.211Z", "")}, // a line without a time
		{delta("2026-11-28T05:46:39.211Z", `,"frame":3`), delta("2026-11-28T05:46:39.211Z", "")}, // past the log: left as is
		{delta("2026-11-28T05:46:39.211Z", ""), delta("2026-11-28T05:46:39.211Z", "")},           // not marked
	} {
		var buf []byte
		for range 2 { // the buffer used again
			var got []byte
			got, buf = logStamped(buf[:0], []byte(c.in), frames)
			if string(got) != c.want {
				t.Errorf("%s:\n got %s\nwant %s", c.in, got, c.want)
			}
		}
	}
}

// -h says which lines' times the deltas carry.
func TestN2KDecodeHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	a := &app{stdout: &out, stderr: &errOut}
	if code := a.run(context.Background(), []string{"n2k", "decode", "-h"}); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"devctl n2k decode [--format", "Timestamps:", "candump -l/-L", "time of day only", "the time they were decoded"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}

func TestN2KDecodeBadInput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.log")
	text := "garbage\n  can0  09F8027F   [9]  00 FC FF FF 00 00 FF FF 00\n  can0  09F8027F   [8]  00 FC FF FF 00 00 FF FF\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut := decodeFile(t, "--format", "candump", path)
	if !strings.Contains(errOut, "2 lines not understood") || strings.Count(out, "\n") != 1 {
		t.Errorf("stdout %q stderr %q", out, errOut)
	}
	var o, e bytes.Buffer
	a := &app{stdout: &o, stderr: &e}
	if code := a.run(context.Background(), []string{"n2k", "decode", "--format", "nmea0183", path}); code != exitUsage {
		t.Errorf("unknown format: exit %d", code)
	}
	if code := a.run(context.Background(), []string{"n2k", "decode", filepath.Join(t.TempDir(), "none")}); code != exitFail {
		t.Errorf("missing file: exit %d", code)
	}
}

// A log of which no line is understood is an error for decode and replay alike (a wrong
// --format, or a file that is no log), naming the format and the first line; an empty log
// is an empty decode.
func TestN2KLogNothingUnderstood(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	garbage := write("garbage.log", "garbage\nmore garbage\n")
	empty := write("empty.log", "")
	candump := filepath.Join(n2kLogs(), "candumpSample2.txt")
	_, sock := serveBoard(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"decode auto", []string{"n2k", "decode", garbage}, exitFail, `none of its first 20 lines is in a format devctl reads`},
		{"decode wrong format", []string{"n2k", "decode", "--format", "ydraw", candump}, exitFail, `none of its 402 lines is in format ydraw`},
		{"replay auto", []string{"board", "--data", sock, "can", "replay", "--file", garbage, "--max"}, exitFail, `board can replay: ` + garbage + `: none of its first 20 lines`},
		{"replay wrong format", []string{"board", "--data", sock, "can", "replay", "--file", candump, "--format", "actisense", "--max"}, exitFail, `in format actisense`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			if code := h.run(tc.args...); code != tc.code || !strings.Contains(h.stderr.String(), tc.want) {
				t.Errorf("exit %d (want %d), stderr %q, want it to say %q", code, tc.code, h.stderr.String(), tc.want)
			}
		})
	}
	if n := received(t, sock); n != 0 {
		t.Errorf("the bus got %d frames from logs nobody reads", n)
	}
	t.Run("decode empty", func(t *testing.T) {
		out, errOut := decodeFile(t, "--format", "candump", empty)
		if out != "" || !strings.Contains(errOut, "0 lines not understood, 0 frames in") {
			t.Errorf("stdout %q stderr %q", out, errOut)
		}
	})
}

// deltaLine is one line of `n2k decode`'s output, as far as the tests read it.
type deltaLine struct {
	Context string `json:"context"`
	Updates []struct {
		Source struct {
			PGN int    `json:"pgn"`
			Src string `json:"src"`
		} `json:"source"`
		Timestamp string `json:"timestamp"`
		Values    []struct {
			Path  string `json:"path"`
			Value any    `json:"value"`
		} `json:"values"`
	} `json:"updates"`
}

// refKey is a value's identity in the comparison: context (empty for the own vessel),
// path, PGN and source address.
type refKey struct {
	Context string
	Path    string
	PGN     int
	Src     string
}

func loadDeltas(t *testing.T, text string) map[refKey][]any {
	t.Helper()
	out := map[refKey][]any{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		var d deltaLine
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		for _, u := range d.Updates {
			for _, v := range u.Values {
				k := refKey{d.Context, v.Path, u.Source.PGN, u.Source.Src}
				// A notification stamped with its message's time: the plugin's messages
				// carry the time it decodes them, the reference's the log's time; both are
				// the update's own time, compared as such.
				if m, ok := v.Value.(map[string]any); ok && m["timestamp"] == u.Timestamp {
					m["timestamp"] = "(the update's time)"
				}
				out[k] = append(out[k], v.Value)
			}
		}
	}
	return out
}

// sourcesOf answers the distinct $source objects of the updates in text (one delta a line),
// each as canonical JSON. An update with no value that has a path is left out: the plugin
// sends no value without a path (such values are listed differences).
func sourcesOf(t *testing.T, text string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		var d struct {
			Updates []struct {
				Source map[string]any `json:"source"`
				Values []struct {
					Path *string `json:"path"`
				} `json:"values"`
			} `json:"updates"`
		}
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		for _, u := range d.Updates {
			withPath := false
			for _, v := range u.Values {
				withPath = withPath || v.Path != nil
			}
			if !withPath {
				continue
			}
			b, err := json.Marshal(u.Source) // map keys sorted
			if err != nil {
				t.Fatal(err)
			}
			out[string(b)] = true
		}
	}
	return out
}

// refStamped reports whether the log at path is canboat's analyzer text, whose times the
// reference passes on.
func refStamped(t *testing.T, p *input.Parser, path string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	_, err = p.Parse(first)
	return err == nil
}

// stampsOf answers the timestamps of the updates with values in text (one delta a line), in
// order, by context, PGN and sender.
func stampsOf(t *testing.T, text string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		var d deltaLine
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		for _, u := range d.Updates {
			if len(u.Values) > 0 {
				k := fmt.Sprintf("%s %d %s", d.Context, u.Source.PGN, u.Source.Src)
				out[k] = append(out[k], u.Timestamp)
			}
		}
	}
	return out
}

// sameValue compares JSON values, numbers within 1e-6 relative.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || math.Abs(x-y) <= 1e-6*math.Max(math.Abs(x), math.Abs(y)))
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// matchReference counts the reference values that have an equal value (each used once)
// under the same path, PGN and source, and answers the unmatched ones by key.
func matchReference(ref, got map[refKey][]any) (matched, total int, missing map[refKey]int) {
	missing = map[refKey]int{}
	for k, vals := range ref {
		pool := append([]any(nil), got[k]...)
		for _, v := range vals {
			total++
			found := false
			for i, g := range pool {
				if sameValue(v, g) {
					pool = append(pool[:i], pool[i+1:]...)
					found = true
					break
				}
			}
			if found {
				matched++
			} else {
				missing[k]++
			}
		}
	}
	return matched, total, missing
}

type refDifference struct {
	Log     string `json:"log"`
	Context string `json:"context,omitempty"`
	Path    string `json:"path"`
	PGN     int    `json:"pgn"`
	Src     string `json:"src"`
	Count   int    `json:"count"`
	Reason  string `json:"reason"`
}

// refUncovered is a PGN n2k-signalk maps that no log gives a reference value for, with the
// reason (and, where the plugin maps it, the test that covers it instead).
type refUncovered struct {
	PGN    int    `json:"pgn"`
	Mapped bool   `json:"mapped"`
	Reason string `json:"reason"`
}

// TestN2KDecodeMatchesReference runs canboatjs 3.20.0 + n2k-signalk 4.6.0 (installed by
// `make n2k-reference`) and devctl n2k decode on each shipped log: at least 99 % of the
// reference values must be matched, and every value not matched must be listed, with its
// reason, in plugins/n2k/testdata/reference-differences.json. The logs are the real ones
// (two recordings and canboat's sample lines of AIS, Lowrance and route PGNs) and
// mapped-pgns.log, made by canboatjs (mapped-pgns.js) for the PGNs the real ones lack. Every PGN n2k-signalk maps must have reference values in some log, or be listed
// in the same file as uncovered, with the reason.
func TestN2KDecodeMatchesReference(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the canboatjs reference under node: skipped in -short")
	}
	root := filepath.Dir(plugins.Dir())
	modules := filepath.Join(root, ".cache", "n2k", "ref", "node_modules")
	node, err := exec.LookPath("node")
	if _, statErr := os.Stat(filepath.Join(modules, "@signalk", "n2k-signalk")); err != nil || statErr != nil {
		if os.Getenv("N2KREF_REQUIRED") != "" {
			t.Fatalf("reference not installed (make n2k-reference): node %v, %v", err, statErr)
		}
		t.Skip("the reference is not installed: make n2k-reference")
	}
	b, err := os.ReadFile(filepath.Join(plugins.Dir(), "n2k", "testdata", "reference-differences.json"))
	if err != nil {
		t.Fatal(err)
	}
	var listed struct {
		Differences []refDifference `json:"differences"`
		Uncovered   []refUncovered  `json:"uncovered"`
	}
	if err := json.Unmarshal(b, &listed); err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{} // PGNs with reference values
	for _, name := range []string{"candumpSample2.txt", "dirona-actisense-serial.head.raw", "canboat-samples.raw", "mapped-pgns.log"} {
		t.Run(name, func(t *testing.T) {
			logPath := filepath.Join(n2kLogs(), name)
			in, err := os.Open(logPath)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			cmd := exec.Command(node, filepath.Join(plugins.Dir(), "n2k", "testdata", "reference.js"))
			cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
			cmd.Stdin = in
			var refOut, refErr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &refOut, &refErr
			if err := cmd.Run(); err != nil {
				t.Fatalf("reference: %v: %s", err, refErr.String())
			}
			got, _ := decodeFile(t, logPath)
			ref := loadDeltas(t, refOut.String())
			for k := range ref {
				seen[k.PGN] = true
			}
			matched, total, missing := matchReference(ref, loadDeltas(t, got))
			// canboatjs gives n2k-signalk the analyzer line's time (of the message's last
			// frame), and so does devctl: the times of every sender's updates agree. The
			// other formats' deltas carry the time of decoding on both sides.
			if in, err := input.NewParser(input.Analyzer); err == nil && refStamped(t, in, logPath) {
				ourStamps, n := stampsOf(t, got), 0
				for k, refs := range stampsOf(t, refOut.String()) {
					ours, ok := ourStamps[k]
					if !ok {
						continue // a sender's PGN the plugin gives no value of: a listed difference
					}
					for _, ts := range refs {
						n++
						if !slices.Contains(ours, ts) {
							t.Errorf("%s: %s: the reference's timestamp %s not among the plugin's (%d, first %s)", name, k, ts, len(ours), ours[0])
							break
						}
					}
				}
				if n == 0 {
					t.Errorf("%s: the reference is stamped, but no sender's timestamps were compared", name)
				}
				t.Logf("%s: %d reference timestamps found among the plugin's", name, n)
			}
			// The $source of every reference update (label, type, pgn, src, canName,
			// deviceInstance, instance) is one the plugin sends too.
			ours := sourcesOf(t, got)
			for s := range sourcesOf(t, refOut.String()) {
				if !ours[s] {
					t.Errorf("%s: reference $source %s not among the plugin's", name, s)
				}
			}
			frac := float64(matched) / float64(total)
			t.Logf("%s: %d of %d reference values matched (%.4f)", name, matched, total, frac)
			if total == 0 || frac < 0.99 {
				t.Errorf("%s: %.4f of the reference values matched, want at least 0.99", name, frac)
			}
			want := map[refKey]int{}
			for _, d := range listed.Differences {
				if d.Log == name {
					want[refKey{d.Context, d.Path, d.PGN, d.Src}] = d.Count
				}
			}
			var problems []string
			for k, n := range missing {
				if want[k] != n {
					problems = append(problems, fmt.Sprintf("%+v: %d unmatched, %d listed", k, n, want[k]))
				}
			}
			for k, n := range want {
				if missing[k] == 0 {
					problems = append(problems, fmt.Sprintf("%+v: listed (%d) but matched", k, n))
				}
			}
			sort.Strings(problems)
			for _, p := range problems {
				t.Error(p)
			}
		})
	}

	// Every PGN of the reference's mapping has reference values in a log, or is listed.
	cmd := exec.Command(node, filepath.Join(plugins.Dir(), "n2k", "testdata", "reference.js"), "--pgns")
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference --pgns: %v", err)
	}
	var refPGNs []int
	if err := json.Unmarshal(out, &refPGNs); err != nil {
		t.Fatal(err)
	}
	uncovered := map[int]refUncovered{}
	for _, u := range listed.Uncovered {
		uncovered[u.PGN] = u
	}
	for _, p := range refPGNs {
		u, isListed := uncovered[p]
		switch {
		case seen[p] && isListed:
			t.Errorf("PGN %d: listed as uncovered but the logs give reference values for it", p)
		case !seen[p] && !isListed:
			t.Errorf("PGN %d: n2k-signalk maps it, no log gives a reference value and it is not listed", p)
		case skmap.Maps(uint32(p)) != (!isListed || u.Mapped):
			t.Errorf("PGN %d: mapped %v, listed as mapped %v", p, skmap.Maps(uint32(p)), u.Mapped)
		}
	}
	t.Logf("%d PGNs mapped by the reference, %d with reference values in the logs", len(refPGNs), len(seen))
}

func received(t *testing.T, data string) int {
	t.Helper()
	st, err := board.Dial(filepath.Join(data, "board.sock")).State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Radios.CANReceived
}

func TestBoardCANReplayMax(t *testing.T) {
	_, sock := serveBoard(t)
	h := newHarness()
	log := filepath.Join(n2kLogs(), "candumpSample2.txt")
	if code := h.run("board", "--data", sock, "can", "replay", "--file", log, "--max"); code != exitOK {
		t.Fatalf("exit %d: %s", code, h.stderr.String())
	}
	if !strings.Contains(h.stdout.String(), "replayed 402 frames (format candump") {
		t.Errorf("stdout %q", h.stdout.String())
	}
	if n := received(t, sock); n != 402 {
		t.Errorf("the bus got %d frames", n)
	}
	for _, args := range [][]string{
		{"board", "--data", sock, "can", "capture", "--count", "-1"},
		{"board", "--data", sock, "can", "listen"},
		{"board", "--data", sock, "can", "replay"},
		{"board", "--data", sock, "can", "replay", "--file", log, "--speed", "0"},
		{"board", "--data", sock, "can", "replay", "--file", log, "--speed", "2", "--max"},
	} {
		if code := newHarness().run(args...); code != exitUsage {
			t.Errorf("%v: exit %d", args, code)
		}
	}
}

// The recorded pace, scaled by --speed, on the fake clock.
func TestBoardCANReplayPace(t *testing.T) {
	_, sock := serveBoard(t)
	log := filepath.Join(t.TempDir(), "paced.log")
	text := "2016-02-28T19:57:02.000Z,2,127250,7,255,8,ff,10,3b,ff,7f,ce,f5,fc\n" +
		"2016-02-28T19:57:04.000Z,2,127250,7,255,8,ff,10,3b,ff,7f,ce,f5,fc\n" +
		"2016-02-28T19:57:06.000Z,2,127250,7,255,8,ff,10,3b,ff,7f,ce,f5,fc\n"
	if err := os.WriteFile(log, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness()
	done := make(chan int, 1)
	go func() { done <- h.run("board", "--data", sock, "can", "replay", "--file", log, "--speed", "2") }()
	// Twice the recorded pace: a frame at once, then one a second.
	for want := 1; want <= 2; want++ {
		if err := h.clock.BlockUntilContext(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		if n := received(t, sock); n != want {
			t.Fatalf("before %d s: %d frames", want, n)
		}
		h.clock.Advance(time.Second)
	}
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d: %s", code, h.stderr.String())
	}
	if n := received(t, sock); n != 3 {
		t.Errorf("%d frames", n)
	}
}

func TestNewFrames(t *testing.T) {
	f := func(ids ...uint32) []board.CANFrame {
		out := []board.CANFrame{}
		for _, id := range ids {
			out = append(out, board.CANFrame{ID: id, Extended: true, Data: []byte{byte(id)}})
		}
		return out
	}
	tests := []struct {
		prev, cur, want []board.CANFrame
		whole           bool
	}{
		{f(), f(1, 2), f(1, 2), true},
		{f(1, 2), f(1, 2), f(), true},
		{f(1, 2), f(1, 2, 3), f(3), true},
		{f(1, 2, 3), f(2, 3, 4, 5), f(4, 5), true}, // the window slid
		{f(7, 7), f(7, 7, 7), f(7), true},          // repeats
		{f(1, 2), f(8, 9), f(8, 9), false},         // more than the window between reads
	}
	for i, tc := range tests {
		got, whole := newFrames(tc.prev, tc.cur)
		if len(got) != len(tc.want) || whole != tc.whole {
			t.Errorf("%d: got %v %v want %v %v", i, got, whole, tc.want, tc.whole)
			continue
		}
		for j := range got {
			if got[j].ID != tc.want[j].ID {
				t.Errorf("%d: got %v want %v", i, got, tc.want)
			}
		}
	}
}

func TestBoardCANCapture(t *testing.T) {
	sim, data := serveBoard(t)
	if err := sim.CANSend(board.CANFrame{ID: 0x18EEFF01, Extended: true, Data: []byte{1}}); err != nil {
		t.Fatal(err) // sent before the capture starts: not printed
	}
	h := newHarness()
	done := make(chan int, 1)
	go func() { done <- h.run("board", "--data", data, "can", "capture", "--count", "3") }()
	send := func(id uint32, b ...byte) {
		if err := sim.CANSend(board.CANFrame{ID: id, Extended: true, Data: b}); err != nil {
			t.Fatal(err)
		}
	}
	poll := func() {
		if err := h.clock.BlockUntilContext(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(capturePoll)
	}
	if err := h.clock.BlockUntilContext(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	send(0x09F10D0A, 0xff, 0x10)
	send(0x09F10D0A, 0xff, 0x10)
	h.clock.Advance(capturePoll)
	for strings.Count(h.stdout.String(), "\n") < 2 { // the first read printed both
		time.Sleep(time.Millisecond)
	}
	send(0x0DF50B23, 0xaa)
	poll()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d: %s", code, h.stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(h.stdout.String()), "\n")
	if len(lines) != 3 || !strings.HasSuffix(lines[0], " can0 09F10D0A#FF10") || !strings.HasSuffix(lines[2], " can0 0DF50B23#AA") {
		t.Fatalf("capture:\n%s", h.stdout.String())
	}
	// The lines are candump -L: the candump parser reads them back.
	p, _ := input.NewParser(input.Candump)
	for _, l := range lines {
		if r, err := p.Parse(l); err != nil || r.Frame == nil {
			t.Errorf("%q: %v", l, err)
		}
	}
	// --timeout ends a capture that sees nothing.
	h2 := newHarness()
	go func() { done <- h2.run("board", "--data", data, "can", "capture", "--timeout", "1") }()
	for i := 0; i < 20; i++ { // 20 polls make the second
		if err := h2.clock.BlockUntilContext(context.Background(), 2); err != nil {
			t.Fatal(err)
		}
		h2.clock.Advance(capturePoll)
	}
	if code := <-done; code != exitOK || h2.stdout.String() != "" {
		t.Errorf("timeout: exit %d, %q", code, h2.stdout.String())
	}
}

// splitArray answers the elements json.Unmarshal finds in the plugin's n2k_delta arrays.
func TestSplitArray(t *testing.T) {
	for _, in := range []string{
		`[]`,
		`[{"a":1}]`,
		` [{"a":"x,}]{"}, {"b":[1,{"c":"\"]"}]}]`,
		`[{"updates":[{"source":{"label":"","src":"7"},"values":[{"path":"a.b","value":{"x":null}}]}]},{}]`,
	} {
		got, ok := splitArray([]byte(in))
		var want []json.RawMessage
		if err := json.Unmarshal([]byte(in), &want); err != nil || !ok || len(got) != len(want) {
			t.Fatalf("%s: %d elements (%v), json %d (%v)", in, len(got), ok, len(want), err)
		}
		for i := range got {
			if string(got[i]) != string(want[i]) {
				t.Errorf("%s: element %d %s, want %s", in, i, got[i], want[i])
			}
		}
	}
	for _, in := range []string{``, `{}`, `[{"a":1}`, `[{"a":"1}]`} {
		if _, ok := splitArray([]byte(in)); ok {
			t.Errorf("%q: taken as an array", in)
		}
	}
}
