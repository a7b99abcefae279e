// Package input parses the text formats NMEA 2000 logs and gateways use, one line at a
// time, into CAN frames or whole messages: candump (plain, -l/-L and the Angstrom form),
// canboat's analyzer text (time,prio,pgn,src,dst,len,bytes), Actisense N2K ASCII, Yacht
// Devices RAW and Digital Yacht iKonvert. Detect picks the format from the first lines.
package input

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"devhost/plugins/n2k/decode"
)

// Format names a line format; the names are those of `devctl n2k decode --format`.
type Format string

// The formats.
const (
	Auto      Format = "auto"
	Candump   Format = "candump"
	Analyzer  Format = "analyzer"
	Actisense Format = "actisense"
	YDRaw     Format = "ydraw"
	IKonvert  Format = "ikonvert"
)

// Formats lists the concrete formats in the order Detect tries them.
var Formats = []Format{Candump, Analyzer, Actisense, YDRaw, IKonvert}

// Errors: ErrSkip for lines that carry nothing (blank, comments, gateway status), ErrSyntax
// for garbage.
var (
	ErrSkip   = errors.New("nothing on the line")
	ErrSyntax = errors.New("malformed line")
)

// Record is one parsed line: a CAN frame, or a whole message when the format carries
// messages already reassembled.
type Record struct {
	Frame *decode.Frame
	Msg   *decode.Message
}

// Parser parses lines of one format. The analyzer format is stateful: once a line longer
// than a frame appears, the log holds whole messages, and later short lines of fast-packet
// PGNs are whole messages too.
type Parser struct {
	format    Format
	coalesced bool
}

// NewParser answers a parser of a concrete format.
func NewParser(f Format) (*Parser, error) {
	for _, k := range Formats {
		if k == f {
			return &Parser{format: f}, nil
		}
	}
	return nil, fmt.Errorf("input: unknown format %q", f)
}

// Format answers the parser's format.
func (p *Parser) Format() Format { return p.format }

// Parse parses one line.
func (p *Parser) Parse(line string) (Record, error) {
	line = strings.TrimSpace(line)
	if line == "" || line[0] == '#' {
		return Record{}, ErrSkip
	}
	var r Record
	var err error
	switch p.format {
	case Candump:
		r, err = parseCandump(line)
	case Analyzer:
		r, err = p.parseAnalyzer(line)
	case Actisense:
		r, err = parseActisense(line)
	case YDRaw:
		r, err = parseYD(line)
	case IKonvert:
		r, err = parseIKonvert(line)
	}
	if err != nil {
		return Record{}, err
	}
	if r.Frame != nil && (r.Frame.ID >= 1<<29 || len(r.Frame.Data) > 8) {
		return Record{}, fmt.Errorf("%w: id %#x length %d", ErrSyntax, r.Frame.ID, len(r.Frame.Data))
	}
	return r, nil
}

// Detect answers the format most of the given lines parse in (Candump when none does).
func Detect(lines []string) Format {
	best, bestN := Candump, 0
	for _, f := range Formats {
		p, _ := NewParser(f)
		n := 0
		for _, l := range lines {
			if _, err := p.Parse(l); err == nil {
				n++
			}
		}
		if n > bestN {
			best, bestN = f, n
		}
	}
	return best
}

func syntax(what, line string) error {
	if len(line) > 60 {
		line = line[:60] + "..."
	}
	return fmt.Errorf("%w: %s: %q", ErrSyntax, what, line)
}

// hexID parses a CAN identifier of up to 8 hex digits.
func hexID(s string) (uint32, bool) {
	if s == "" || len(s) > 8 {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 16, 32)
	return uint32(v), err == nil
}

// hexBytes parses bytes written as separate hex pairs ("01 a2") or run together ("01a2").
func hexBytes(fields []string) ([]byte, bool) {
	out := make([]byte, 0, 8)
	for _, f := range fields {
		if len(f)%2 != 0 {
			return nil, false
		}
		b, err := hex.DecodeString(f)
		if err != nil {
			return nil, false
		}
		out = append(out, b...)
	}
	return out, true
}

// parseCandump reads the three candump forms:
//
//	can0  09F8027F   [8]  00 FC FF FF 00 00 FF FF           plain
//	(1502979132.106111) slcan0 09F50374#000A00FFFF00FFFF   -l / -L
//	<0x18eeff01> [8] 05 a0 be 1c 00 a0 a0 c0                Angstrom
func parseCandump(line string) (Record, error) {
	fs := strings.Fields(line)
	switch {
	case strings.HasPrefix(line, "("):
		if len(fs) < 3 || !strings.HasSuffix(fs[0], ")") {
			return Record{}, syntax("candump -l", line)
		}
		ts, err := strconv.ParseFloat(strings.Trim(fs[0], "()"), 64)
		if err != nil {
			return Record{}, syntax("candump -l time", line)
		}
		idS, dataS, ok := strings.Cut(fs[2], "#")
		id, okID := hexID(idS)
		data, okData := hexBytes([]string{dataS})
		if !ok || !okID || !okData || len(idS) != 8 {
			return Record{}, syntax("candump -l frame", line)
		}
		sec := int64(ts)
		t := time.Unix(sec, int64((ts-float64(sec))*1e9+0.5)).UTC()
		return Record{Frame: &decode.Frame{ID: id, Data: data, Time: t.Format("2006-01-02T15:04:05.000Z")}}, nil
	case strings.HasPrefix(line, "<0x"):
		if len(fs) < 2 {
			return Record{}, syntax("candump angstrom", line)
		}
		id, ok := hexID(strings.TrimSuffix(strings.TrimPrefix(fs[0], "<0x"), ">"))
		if !ok || !strings.HasSuffix(fs[0], ">") {
			return Record{}, syntax("candump angstrom id", line)
		}
		return dlcFrame(id, fs[1:], line)
	default:
		if len(fs) < 3 {
			return Record{}, syntax("candump", line)
		}
		id, ok := hexID(fs[1])
		if !ok || len(fs[1]) != 8 {
			return Record{}, syntax("candump id", line)
		}
		return dlcFrame(id, fs[2:], line)
	}
}

// dlcFrame reads "[n] b0 b1 ..." with exactly n bytes.
func dlcFrame(id uint32, fs []string, line string) (Record, error) {
	if len(fs) == 0 || !strings.HasPrefix(fs[0], "[") || !strings.HasSuffix(fs[0], "]") {
		return Record{}, syntax("candump length", line)
	}
	n, err := strconv.Atoi(fs[0][1 : len(fs[0])-1])
	if err != nil || n < 0 || n > 8 || len(fs)-1 != n {
		return Record{}, syntax("candump length", line)
	}
	for _, f := range fs[1:] {
		if len(f) != 2 {
			return Record{}, syntax("candump byte", line)
		}
	}
	data, ok := hexBytes(fs[1:])
	if !ok {
		return Record{}, syntax("candump byte", line)
	}
	return Record{Frame: &decode.Frame{ID: id, Data: data}}, nil
}

// parseAnalyzer reads canboat's text: time,prio,pgn,src,dst,len,b0,b1,...
func (p *Parser) parseAnalyzer(line string) (Record, error) {
	fs := strings.Split(line, ",")
	if len(fs) < 7 {
		return Record{}, syntax("analyzer", line)
	}
	ts, ok := analyzerTime(fs[0])
	if !ok {
		return Record{}, syntax("analyzer time", line)
	}
	prio, e1 := strconv.ParseUint(fs[1], 10, 3)
	pgnN, e2 := strconv.ParseUint(fs[2], 10, 24)
	src, e3 := strconv.ParseUint(fs[3], 10, 8)
	dst, e4 := strconv.ParseUint(fs[4], 10, 8)
	n, e5 := strconv.Atoi(fs[5])
	if e1 != nil || e2 != nil || e3 != nil || e4 != nil || e5 != nil || n < 0 || n > 1785 || len(fs)-6 != n {
		return Record{}, syntax("analyzer fields", line)
	}
	data := make([]byte, n)
	for i, f := range fs[6:] {
		b, err := strconv.ParseUint(f, 16, 8)
		if err != nil || len(f) != 2 {
			return Record{}, syntax("analyzer byte", line)
		}
		data[i] = byte(b)
	}
	h := decode.Header{Prio: uint8(prio), PGN: uint32(pgnN), Src: uint8(src), Dst: uint8(dst)}
	if n > 8 {
		p.coalesced = true
	}
	if p.coalesced || !isFast(h.PGN) {
		return Record{Msg: &decode.Message{Header: h, Time: ts, Data: data}}, nil
	}
	return Record{Frame: &decode.Frame{ID: h.ID(), Data: data, Time: ts}}, nil
}

// analyzerTime accepts the ISO form canboat writes (2016-02-28T19:57:02.364Z) and its older
// form (2016-02-28-19:57:01[.364]); it answers RFC 3339 with milliseconds.
func analyzerTime(s string) (string, bool) {
	for _, layout := range []string{"2006-01-02T15:04:05.999999999Z07:00", "2006-01-02T15:04:05.999999999Z", "2006-01-02-15:04:05.999999999", "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC().Format("2006-01-02T15:04:05.000Z"), true
		}
	}
	return "", false
}

// parseActisense reads Actisense N2K ASCII: Ahhmmss.ddd SSDDP PPPPP data.
func parseActisense(line string) (Record, error) {
	fs := strings.Fields(line)
	if len(fs) != 4 || len(fs[0]) < 2 || fs[0][0] != 'A' || len(fs[1]) != 5 || len(fs[2]) > 5 || len(fs[2]) == 0 {
		return Record{}, syntax("actisense", line)
	}
	if _, err := strconv.ParseFloat(fs[0][1:], 64); err != nil {
		return Record{}, syntax("actisense time", line)
	}
	hdr, err := strconv.ParseUint(fs[1], 16, 32)
	if err != nil {
		return Record{}, syntax("actisense address", line)
	}
	pgnN, err := strconv.ParseUint(fs[2], 16, 32)
	if err != nil || pgnN >= 1<<18 {
		return Record{}, syntax("actisense pgn", line)
	}
	data, ok := hexBytes([]string{fs[3]})
	if !ok || len(data) > 1785 {
		return Record{}, syntax("actisense data", line)
	}
	h := decode.Header{Src: uint8(hdr >> 12), Dst: uint8(hdr >> 4), Prio: uint8(hdr & 7), PGN: uint32(pgnN)}
	return Record{Msg: &decode.Message{Header: h, Data: data}}, nil
}

// parseYD reads Yacht Devices RAW: hh:mm:ss.ddd R|T IIIIIIII b0 b1 ...
func parseYD(line string) (Record, error) {
	fs := strings.Fields(line)
	if len(fs) < 3 || len(fs) > 11 || (fs[1] != "R" && fs[1] != "T") || len(fs[2]) != 8 {
		return Record{}, syntax("ydraw", line)
	}
	if _, err := time.Parse("15:04:05.000", fs[0]); err != nil {
		return Record{}, syntax("ydraw time", line)
	}
	id, ok := hexID(fs[2])
	if !ok {
		return Record{}, syntax("ydraw id", line)
	}
	for _, f := range fs[3:] {
		if len(f) != 2 {
			return Record{}, syntax("ydraw byte", line)
		}
	}
	data, ok := hexBytes(fs[3:])
	if !ok {
		return Record{}, syntax("ydraw byte", line)
	}
	return Record{Frame: &decode.Frame{ID: id, Data: data}}, nil
}

// parseIKonvert reads Digital Yacht iKonvert: !PDGY,pgn,prio,src,dst,timer,base64. Its
// $PDGY status lines carry no bus data.
func parseIKonvert(line string) (Record, error) {
	if strings.HasPrefix(line, "$PDGY,") {
		return Record{}, ErrSkip
	}
	fs := strings.Split(line, ",")
	if len(fs) != 7 || fs[0] != "!PDGY" {
		return Record{}, syntax("ikonvert", line)
	}
	pgnN, e1 := strconv.ParseUint(fs[1], 10, 18)
	prio, e2 := strconv.ParseUint(fs[2], 10, 3)
	src, e3 := strconv.ParseUint(fs[3], 10, 8)
	dst, e4 := strconv.ParseUint(fs[4], 10, 8)
	_, e5 := strconv.ParseFloat(fs[5], 64)
	data, e6 := base64.StdEncoding.DecodeString(fs[6])
	if e1 != nil || e2 != nil || e3 != nil || e4 != nil || e5 != nil || e6 != nil || len(data) == 0 || len(data) > 1785 {
		return Record{}, syntax("ikonvert fields", line)
	}
	h := decode.Header{Prio: uint8(prio), PGN: uint32(pgnN), Src: uint8(src), Dst: uint8(dst)}
	return Record{Msg: &decode.Message{Header: h, Data: data}}, nil
}
