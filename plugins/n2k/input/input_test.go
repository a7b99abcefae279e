package input

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"devhost/plugins/n2k/decode"
)

func TestParse(t *testing.T) {
	tests := []struct {
		format Format
		line   string
		frame  *decode.Frame
		msg    *decode.Message
	}{
		{Candump, "  can0  09F8027F   [8]  00 FC FF FF 00 00 FF FF",
			&decode.Frame{ID: 0x09F8027F, Data: []byte{0, 0xfc, 0xff, 0xff, 0, 0, 0xff, 0xff}}, nil},
		{Candump, "(1502979132.106111) slcan0 09F50374#000A00FFFF00FFFF",
			&decode.Frame{ID: 0x09F50374, Data: []byte{0, 0x0a, 0, 0xff, 0xff, 0, 0xff, 0xff}, Time: "2017-08-17T14:12:12.106Z"}, nil},
		{Candump, "<0x18eeff01> [8] 05 a0 be 1c 00 a0 a0 c0",
			&decode.Frame{ID: 0x18eeff01, Data: []byte{5, 0xa0, 0xbe, 0x1c, 0, 0xa0, 0xa0, 0xc0}}, nil},
		{Analyzer, "2016-02-28T19:57:02.364Z,2,127250,7,255,8,ff,10,3b,ff,7f,ce,f5,fc", nil,
			&decode.Message{Header: decode.Header{Prio: 2, PGN: 127250, Src: 7, Dst: 255}, Time: "2016-02-28T19:57:02.364Z",
				Data: []byte{0xff, 0x10, 0x3b, 0xff, 0x7f, 0xce, 0xf5, 0xfc}}},
		{Analyzer, "2016-02-28-19:57:01,6,127506,40,255,9,00,0a,00,64,00,7f,05,ff,ff", nil,
			&decode.Message{Header: decode.Header{Prio: 6, PGN: 127506, Src: 40, Dst: 255}, Time: "2016-02-28T19:57:01.000Z",
				Data: []byte{0, 0x0a, 0, 0x64, 0, 0x7f, 5, 0xff, 0xff}}},
		{Actisense, "A000057.055 09FF7 0FF00 3F9FDCFFFFFFFFFF", nil,
			&decode.Message{Header: decode.Header{Prio: 7, PGN: 0x0ff00, Src: 0x09, Dst: 0xff},
				Data: []byte{0x3f, 0x9f, 0xdc, 0xff, 0xff, 0xff, 0xff, 0xff}}},
		{YDRaw, "00:29:58.617 R 0DFF180D A2 8C 50 C0 FF FF FF FF",
			&decode.Frame{ID: 0x0DFF180D, Data: []byte{0xa2, 0x8c, 0x50, 0xc0, 0xff, 0xff, 0xff, 0xff}}, nil},
		{IKonvert, "!PDGY,127250,2,3,255,481.734,/xA7/3/O9fw=", nil,
			&decode.Message{Header: decode.Header{Prio: 2, PGN: 127250, Src: 3, Dst: 255},
				Data: []byte{0xff, 0x10, 0x3b, 0xff, 0x7f, 0xce, 0xf5, 0xfc}}},
	}
	for _, tc := range tests {
		t.Run(string(tc.format), func(t *testing.T) {
			p, err := NewParser(tc.format)
			if err != nil {
				t.Fatal(err)
			}
			r, err := p.Parse(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			if tc.frame != nil && (r.Frame == nil || r.Frame.ID != tc.frame.ID || string(r.Frame.Data) != string(tc.frame.Data) || r.Frame.Time != tc.frame.Time) {
				t.Errorf("frame %+v want %+v", r.Frame, tc.frame)
			}
			if tc.msg != nil && (r.Msg == nil || r.Msg.Header != tc.msg.Header || string(r.Msg.Data) != string(tc.msg.Data) || r.Msg.Time != tc.msg.Time) {
				t.Errorf("msg %+v want %+v", r.Msg, tc.msg)
			}
			if got := Detect([]string{tc.line}); got != tc.format {
				t.Errorf("Detect: %s", got)
			}
		})
	}
}

func TestGarbage(t *testing.T) {
	bad := map[Format][]string{
		Candump:   {"can0 09F8027F [9] 00 00 00 00 00 00 00 00 00", "can0 3FFFFFFFF [1] 00", "can0 09F8027F [2] 00", "(x) can0 1#00", "<0x1> [1] zz"},
		Analyzer:  {"2016-02-28T19:57:02.364Z,2,127250,7,255,3,ff,10", "x,2,127250,7,255,1,ff", "2016-02-28T19:57:02.364Z,9,127250,7,255,1,ff"},
		Actisense: {"A000057.055 09FF7 0FF00 3F9", "B000057.055 09FF7 0FF00 3F9F"},
		YDRaw:     {"00:29:58.617 X 0DFF180D A2", "00:29:58.617 R 0DFF180D A2 8C 50 C0 FF FF FF FF 00", "00:29:58.617 R 3FFFFFFF 00"},
		IKonvert:  {"!PDGY,127250,2,3,255,481.734,%%%", "!PDGY,127250,2,3,255"},
	}
	for f, lines := range bad {
		p, _ := NewParser(f)
		for _, l := range lines {
			if _, err := p.Parse(l); !errors.Is(err, ErrSyntax) {
				t.Errorf("%s %q: %v", f, l, err)
			}
		}
		for _, l := range []string{"", "   ", "# comment"} {
			if _, err := p.Parse(l); !errors.Is(err, ErrSkip) {
				t.Errorf("%s %q: %v", f, l, err)
			}
		}
	}
	if _, err := NewParser("nmea0183"); err == nil {
		t.Error("unknown format accepted")
	}
}

// The shipped logs are detected and parse without a syntax error.
func TestShippedLogs(t *testing.T) {
	dir := filepath.Join("..", "testdata", "logs")
	for name, want := range map[string]Format{"candumpSample2.txt": Candump, "dirona-actisense-serial.head.raw": Analyzer} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Skipf("shipped logs not here: %v", err)
		}
		var lines []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		f.Close()
		got := Detect(lines[:20])
		if got != want {
			t.Fatalf("%s: detected %s", name, got)
		}
		p, _ := NewParser(got)
		n := 0
		for _, l := range lines {
			if _, err := p.Parse(l); err == nil {
				n++
			} else if !errors.Is(err, ErrSkip) {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if n < len(lines)-10 {
			t.Errorf("%s: %d of %d lines", name, n, len(lines))
		}
	}
}
