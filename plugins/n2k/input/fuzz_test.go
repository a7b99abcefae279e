package input

import "testing"

// FuzzParse feeds any line to every parser: a record, ErrSkip or ErrSyntax, never a panic
// and never a frame longer than 8 bytes. Seeds are in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"  can0  09F8027F   [8]  00 FC FF FF 00 00 FF FF",
		"(1502979132.106111) slcan0 09F50374#000A00FFFF00FFFF",
		"<0x18eeff01> [8] 05 a0 be 1c 00 a0 a0 c0",
		"2016-02-28T19:57:02.364Z,2,127250,7,255,8,ff,10,3b,ff,7f,ce,f5,fc",
		"A000057.055 09FF7 0FF00 3F9FDCFFFFFFFFFF",
		"00:29:58.617 R 0DFF180D A2 8C 50 C0 FF FF FF FF",
		"!PDGY,127250,2,3,255,481.734,/xA7/3/O9fw=",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		for _, format := range Formats {
			p, _ := NewParser(format)
			r, err := p.Parse(line)
			if err != nil {
				continue
			}
			if r.Frame == nil && r.Msg == nil {
				t.Fatalf("%s %q: empty record", format, line)
			}
			if r.Frame != nil && (len(r.Frame.Data) > 8 || r.Frame.ID >= 1<<29) {
				t.Fatalf("%s %q: frame %+v", format, line, r.Frame)
			}
		}
		_ = Detect([]string{line})
	})
}
