package decode

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"devhost/plugins/n2k/pgn"
)

// Errors of Decode; each names a kind the plugin counts.
var (
	ErrUnknownPGN = errors.New("unknown PGN")
	ErrNoMatch    = errors.New("proprietary PGN of an unknown manufacturer or variant")
	ErrEmpty      = errors.New("no data")
)

// Decoded is a message with its fields. A decoded message holds them by their index in its
// definition (Def); Field, Lookup and At read them, a mapper that resolved a field's index
// once reads it by At. A field whose value is not available is absent. Values are float64,
// string or []string (bit lookups).
type Decoded struct {
	Header
	Time        string
	ID          string // canboat's id of the definition, e.g. "vesselHeading"
	Description string
	// Def is the definition decoded with and DefN its place among pgn.Definitions(PGN); nil
	// for a message made by hand, whose fields are ByName.
	Def    *pgn.PGN
	DefN   int
	ByName map[string]any
	List   []Group     // repeating field set 1
	List2  []Group     // repeating field set 2
	vals   []value     // by index in Def.Fields, the fields before the repeating sets
	last   []any       // the values of vals as last boxed (At), by the same index
	mem    *decodeMemo // what DecodeInto keeps from message to message
}

// decodeMemo is what DecodeInto keeps between the messages it decodes into one Decoded, per
// definition (by pgn.PGN.Seq): the slice of its field values, unboxed, and the last value
// of each field as boxed. A field is boxed (made an interface value) only when it is read,
// and a value equal to the last one read is answered without boxing it anew: inside the
// sandbox an allocation costs about a microsecond, most fields repeat, and many (sequence
// ids, reserved and unused fields) are never read. A map of fields keyed by name, the
// earlier way, cost a string hash for every field written and read, a fifth of the
// plugin's time, and a box for every value that changed.
type decodeMemo struct {
	vals [][]value
	last [][]any
	reps []*[2]repMemo // per definition, its repeating sets
	ids  [256]idSlot   // Lookup's answers, see index
	nums [256]numBox   // numbers boxed lately, see number
}

type numBox struct {
	bits uint64
	box  any
}

// idSlot is a field id's index in a definition (-1: none), as index found it.
type idSlot struct {
	def *pgn.PGN
	id  string
	i   int
}

// slot answers def's values, cleared, and its last boxes.
func (m *decodeMemo) slot(def *pgn.PGN) (vals []value, last []any) {
	if m.vals == nil {
		m.vals = make([][]value, len(pgn.All()))
		m.last = make([][]any, len(pgn.All()))
	}
	n := len(def.Fields) - repeating(def)
	if n < 0 {
		n = 0
	}
	vals, last = m.vals[def.Seq], m.last[def.Seq]
	if len(vals) != n {
		vals, last = make([]value, n), make([]any, n)
		m.vals[def.Seq], m.last[def.Seq] = vals, last
	}
	clear(vals)
	return vals, last
}

// Lookup answers the field with canboat id id, and whether the message has it.
func (d *Decoded) Lookup(id string) (any, bool) {
	if d.Def == nil {
		v, ok := d.ByName[id]
		return v, ok
	}
	i := d.index(id)
	if i < 0 {
		return nil, false
	}
	v := d.At(i)
	return v, v != nil
}

// index answers the index of the field with id id in Def.Fields, -1 when there is none.
// The mapping's helpers name fields by id message after message, with ids that are
// constants or strings made once, and a scan comparing the definition's ids with it cost
// a twentieth of the plugin's time inside the sandbox (the switch bank's 28 indicators,
// the engine's status bits): the answers are kept by definition and by the address of the
// id's bytes, one comparison to find. The slot holds the id itself, so its bytes are never
// freed and reused for another string while it lives.
func (d *Decoded) index(id string) int {
	var slot *idSlot
	if d.mem != nil && id != "" {
		p := unsafe.StringData(id)
		h := uintptr(unsafe.Pointer(p))>>3 ^ uintptr(len(id)) ^ uintptr(d.Def.Seq)*0x9e37
		slot = &d.mem.ids[h%uintptr(len(d.mem.ids))]
		if slot.def == d.Def && len(slot.id) == len(id) && unsafe.StringData(slot.id) == p {
			return slot.i
		}
	}
	i := -1
	fs := d.Def.Fields[:len(d.vals)]
	for j := range fs {
		if fs[j].ID == id {
			i = j
			break
		}
	}
	if slot != nil {
		*slot = idSlot{def: d.Def, id: id, i: i}
	}
	return i
}

// Field answers the field with canboat id id, nil when the message does not have it.
func (d *Decoded) Field(id string) any {
	v, _ := d.Lookup(id)
	return v
}

// At answers the field at index i of Def.Fields, nil when absent.
func (d *Decoded) At(i int) any {
	if i < 0 || i >= len(d.vals) || d.vals[i].kind == kindNone {
		return nil
	}
	v, last := &d.vals[i], d.last[i]
	var b any
	if x, ok := last.(float64); v.kind == kindNum && d.mem != nil && !(ok && math.Float64bits(x) == math.Float64bits(v.num)) {
		b = d.mem.number(v.num)
	} else {
		b = v.boxed(last)
	}
	d.last[i] = b
	return b
}

// number answers f boxed: the box made lately for the same number (its bits), by any field,
// or a new one, kept. Values recur across fields and messages (0, 1, an instance, a
// setting), an interface value never changes, and inside the sandbox an allocation also
// takes fresh memory the host maps on first touch.
func (m *decodeMemo) number(f float64) any {
	bits := math.Float64bits(f)
	slot := &m.nums[(bits*0x9e3779b97f4a7c15)>>56]
	if slot.box == nil || slot.bits != bits {
		slot.bits, slot.box = bits, f
	}
	return slot.box
}

// Map answers the fields as a map by canboat id, made anew: for tests and tools, not for
// message after message.
func (d *Decoded) Map() map[string]any {
	if d.Def == nil {
		return d.ByName
	}
	out := make(map[string]any, len(d.vals))
	for i := range d.vals {
		if v := d.At(i); v != nil {
			out[d.Def.Fields[i].ID] = v
		}
	}
	return out
}

// Number answers a numeric field.
func (d *Decoded) Number(id string) (float64, bool) {
	v, ok := d.Field(id).(float64)
	return v, ok
}

// String answers a string field (a lookup's name, a date, a text).
func (d *Decoded) String(id string) (string, bool) {
	v, ok := d.Field(id).(string)
	return v, ok
}

// IsProprietary reports whether a PGN is in a manufacturer-proprietary range.
func IsProprietary(p uint32) bool {
	return p == 61184 || p >= 65280 && p <= 65535 || p == 126720 || p >= 130816 && p <= 131071
}

// Decode decodes the fields of m from its PGN's definition.
func Decode(m Message) (*Decoded, error) {
	d := &Decoded{}
	if err := DecodeInto(m, d); err != nil {
		return nil, err
	}
	return d, nil
}

// DecodeInto is Decode into d, reusing what an earlier DecodeInto into d made (the field
// slice of each definition, the values boxed): a caller decoding message after message
// allocates little. What d held before is gone, and so are the fields of an earlier message
// of the same definition.
func DecodeInto(m Message, d *Decoded) error {
	mem := d.mem
	if mem == nil {
		mem = &decodeMemo{}
	}
	*d = Decoded{mem: mem}
	defs := pgn.Definitions(m.PGN)
	if len(defs) == 0 {
		return fmt.Errorf("pgn %d: %w", m.PGN, ErrUnknownPGN)
	}
	if len(m.Data) == 0 {
		return fmt.Errorf("pgn %d: %w", m.PGN, ErrEmpty)
	}
	// Candidates: the specific definitions; the first with a matching field leads.
	var few [4]*pgn.PGN
	cands := few[:0]
	for i := range defs {
		if !defs[i].Fallback {
			cands = append(cands, &defs[i])
		}
	}
	if len(cands) == 0 {
		return fmt.Errorf("pgn %d: %w", m.PGN, ErrNoMatch)
	}
	def := cands[0]
	if len(cands) > 1 {
		for _, c := range cands {
			if hasMatchField(c) {
				def = c
				break
			}
		}
	}
	vals, last := mem.slot(def)
	*d = Decoded{Header: m.Header, Time: m.Time, mem: mem}
	r := &bitReader{data: m.Data}
	target := int64(-1) // the PGN a PGN-type field named, for conditional fields
	for i := 0; i < len(vals); i++ {
		f := &def.Fields[i]
		if f.CondProprietary && target >= 0 && !IsProprietary(uint32(target)) {
			continue
		}
		if f.HasMatch {
			raw, ok := readRaw(f, r)
			var v float64
			if ok {
				v = scale(f, raw)
			} else if f.BitLength == 8 && f.Match == 255 {
				v = 255
			} else {
				return fmt.Errorf("pgn %d: %w", m.PGN, ErrNoMatch)
			}
			next := cands[:0:0]
			for _, c := range cands {
				if i < len(c.Fields) && (!c.Fields[i].HasMatch || float64(c.Fields[i].Match) == v) {
					next = append(next, c)
				}
			}
			if len(next) == 0 {
				return fmt.Errorf("pgn %d field %s=%v: %w", m.PGN, f.ID, v, ErrNoMatch)
			}
			cands = next
			if next[0] != def {
				// Another definition leads: what was read so far moves to its slice.
				def = next[0]
				nv, nl := mem.slot(def)
				copy(nv, vals[:min(i, len(vals), len(nv))])
				vals, last = nv, nl
				if i >= len(vals) {
					break
				}
			}
			f = &def.Fields[i]
			if f.Description != "" {
				vals[i] = strValue(f.Description)
			} else {
				vals[i] = numValue(float64(f.Match))
			}
			continue
		}
		v, ok, stop := readValue(f, r)
		if stop {
			break
		}
		if ok {
			vals[i] = v
			if f.Kind == pgn.KindPGN && v.kind == kindNum {
				target = int64(v.num)
			}
		}
	}
	d.Def, d.vals, d.last = def, vals, last
	d.DefN = 0
	for i := range defs {
		if &defs[i] == def {
			d.DefN = i
			break
		}
	}
	d.ID, d.Description = def.ID, def.Description
	if def.Rep1Size > 0 {
		d.List = readRepeating(def, d, r, mem.rep(def, 0), def.Rep1Start, def.Rep1Size, def.Rep1Count)
	}
	if def.Rep2Size > 0 {
		d.List2 = readRepeating(def, d, r, mem.rep(def, 1), def.Rep2Start, def.Rep2Size, def.Rep2Count)
	}
	return nil
}

func hasMatchField(p *pgn.PGN) bool {
	for i := range p.Fields {
		if p.Fields[i].HasMatch {
			return true
		}
	}
	return false
}

func repeating(p *pgn.PGN) int { return p.Rep1Size + p.Rep2Size }

// Group is one repetition of a repeating field set, its fields read like a message's. A
// group made by hand (tests) has its fields in ByName.
type Group struct {
	ByName map[string]any
	fields []pgn.Field // the set's definitions
	vals   []value
	last   []any
}

// Lookup answers the group's field with canboat id id, and whether the group has it.
func (g Group) Lookup(id string) (any, bool) {
	if g.fields == nil {
		v, ok := g.ByName[id]
		return v, ok
	}
	for i := range g.fields {
		if g.fields[i].ID == id {
			v := g.at(i)
			return v, v != nil
		}
	}
	return nil, false
}

// Field answers the group's field with canboat id id, nil when the group does not have it.
func (g Group) Field(id string) any {
	v, _ := g.Lookup(id)
	return v
}

// Len counts the fields the group has.
func (g Group) Len() int {
	if g.fields == nil {
		return len(g.ByName)
	}
	n := 0
	for i := range g.vals {
		if g.vals[i].kind != kindNone {
			n++
		}
	}
	return n
}

// Map answers the group's fields as a map by canboat id, made anew (tests, tools).
func (g Group) Map() map[string]any {
	if g.fields == nil {
		return g.ByName
	}
	out := make(map[string]any, len(g.vals))
	for i := range g.vals {
		if v := g.at(i); v != nil {
			out[g.fields[i].ID] = v
		}
	}
	return out
}

func (g Group) at(i int) any {
	if g.vals[i].kind == kindNone {
		return nil
	}
	b := g.vals[i].boxed(g.last[i])
	g.last[i] = b
	return b
}

// repMemo is what DecodeInto keeps of one repeating set of one definition: the values of
// every group in one slice, the last boxes by the same index and the groups, reused
// message after message (a map per group, the earlier way, was 2 of every 5 allocations
// of the decoder and mapper).
type repMemo struct {
	vals   []value
	last   []any
	groups []Group
}

// rep answers the memo of def's repeating set n (0 or 1).
func (m *decodeMemo) rep(def *pgn.PGN, n int) *repMemo {
	if m.reps == nil {
		m.reps = make([]*[2]repMemo, len(pgn.All()))
	}
	r := m.reps[def.Seq]
	if r == nil {
		r = &[2]repMemo{{groups: make([]Group, 0, 4)}, {groups: make([]Group, 0, 4)}}
		m.reps[def.Seq] = r
	}
	return &r[n]
}

// readRepeating reads one repeating set: count from its count field, or until the data ends.
// A group without any value is left out.
func readRepeating(def *pgn.PGN, d *Decoded, r *bitReader, m *repMemo, start, size, countField int) []Group {
	if start < 1 || start-1+size > len(def.Fields) {
		return nil
	}
	count := 2048
	if countField > 0 && countField <= len(def.Fields) {
		n, ok := d.At(countField - 1).(float64)
		if !ok {
			return m.groups[:0]
		}
		count = int(n)
	}
	set := def.Fields[start-1 : start-1+size]
	vals := m.vals[:0]
	kept := 0
read:
	for ; count > 0 && r.left() > 0; count-- {
		base := kept * size
		vals = vals[:base]
		for range size {
			vals = append(vals, value{})
		}
		present := false
		for i := range set {
			if r.left() <= 0 {
				break
			}
			v, ok, stop := readValue(&set[i], r)
			if stop {
				break read
			}
			if ok {
				vals[base+i] = v
				present = true
			}
		}
		if present {
			kept++
		}
	}
	m.vals = vals
	for len(m.last) < kept*size {
		m.last = append(m.last, nil)
	}
	groups := m.groups[:0]
	for k := 0; k < kept; k++ {
		lo, hi := k*size, (k+1)*size
		groups = append(groups, Group{fields: set, vals: vals[lo:hi:hi], last: m.last[lo:hi:hi]})
	}
	m.groups = groups
	return groups
}

// readRaw reads a numeric field as an integer; ok is false for "data not available", a
// value past the field's range or data that ended.
func readRaw(f *pgn.Field, r *bitReader) (int64, bool) {
	n := f.BitLength
	if n <= 0 || n > 64 || r.left() < n {
		r.skip(r.left())
		return 0, false
	}
	u := r.bits(n)
	var v int64
	if f.Signed && n < 64 && u&(1<<(n-1)) != 0 {
		v = int64(u) - int64(1)<<n
	} else {
		v = int64(u)
	}
	switch n {
	case 8, 16, 24, 32:
		if f.Signed && v == 1<<(n-1)-1 || !f.Signed && u == 1<<n-1 {
			return 0, false
		}
	case 48:
		if f.Signed && u == 1<<47-1 || !f.Signed && u == 1<<48-1 {
			return 0, false
		}
	case 64:
		lo, hi := uint32(u), uint32(u>>32)
		if (lo == 0xffffffff || lo == 0xfffffffe) && (f.Signed && hi == 0x7fffffff || !f.Signed && hi == 0xffffffff) {
			return 0, false
		}
	default:
		if f.Kind != pgn.KindLookup && n > 1 && isMax(n, v, f.Signed) {
			full := f.HasRange && f.Resolution != 0 && f.RangeMax/f.Resolution >= float64(int64(1)<<n-1)
			if !full {
				return 0, false
			}
		}
	}
	return v, true
}

// isMax reports whether v is the largest value of its width: "data not available".
func isMax(n int, v int64, signed bool) bool {
	if signed {
		return v == 1<<(n-1)-1
	}
	return uint64(v) == 1<<n-1
}

// scale applies the offset, the range check and the resolution with its rounding.
func scale(f *pgn.Field, raw int64) float64 {
	v := float64(raw) + f.Offset
	if f.Resolution == 0 {
		return v
	}
	v *= f.Resolution
	return roundTo(v, f.Decimals)
}

// pow10 holds the powers of ten a float64 represents exactly.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13,
	1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// roundTo rounds to p decimal places, halves away from zero (as JavaScript's toFixed does).
func roundTo(v float64, p int) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	a := math.Abs(v)
	if out, ok := roundFast(a, p); ok {
		if v < 0 {
			return -out
		}
		return out
	}
	s := strconv.FormatFloat(a, 'f', p, 64)
	exact := strconv.FormatFloat(a, 'f', p+30, 64)
	if rest := exact[len(exact)-30:]; rest[0] == '5' && strings.Trim(rest[1:], "0") == "" {
		// An exact half: FormatFloat rounded it to even; take the larger neighbour.
		up := math.Pow10(-p)
		lo, _ := strconv.ParseFloat(exact[:len(exact)-30], 64)
		s = strconv.FormatFloat(lo+up, 'f', p, 64)
	}
	out, _ := strconv.ParseFloat(s, 64)
	if v < 0 {
		return -out
	}
	return out
}

// roundFast is roundTo of a non-negative a without formatting, when the answer is certain:
// a·10^p is computed with a relative error of at most 2^-53, so unless its fraction lies
// within that error of one half, the nearest integer n is the one the exact decimal expansion
// rounds to; n and 10^p are exact float64s, so n/10^p is rounded once, to the float64
// nearest the decimal, which is what parsing the formatted digits gives. Near a half (and
// for values too large for the fraction to be exact) it answers false.
func roundFast(a float64, p int) (float64, bool) {
	if p < 0 || p >= len(pow10) {
		return 0, false
	}
	y := a * pow10[p]
	if y >= 1<<52 {
		return 0, false
	}
	n := math.Floor(y)
	frac := y - n // exact: y < 2^52
	if math.Abs(frac-0.5) <= y*0x1p-50+0x1p-60 {
		return 0, false
	}
	if frac > 0.5 {
		n++
	}
	return n / pow10[p], true
}

// readValue reads one field: its value, whether it has one, and whether decoding must stop
// (a variable-length field this decoder does not follow).
func readValue(f *pgn.Field, r *bitReader) (value, bool, bool) {
	switch f.Kind {
	case pgn.KindStringLAU:
		return readLAU(r)
	case pgn.KindStringLZ:
		if r.left() < 8 {
			return value{}, false, false
		}
		n := int(r.bits(8))
		return strValue(text(r.bytes(n))), true, false
	case pgn.KindStringFix:
		return readFix(f, r)
	case pgn.KindBitLookup:
		var names []string
		for i := 0; i < f.BitLength && r.left() > 0; i++ {
			if r.bits(1) == 1 {
				if n, ok := f.BitName(i); ok {
					names = append(names, n)
				} else {
					names = append(names, "Unknown bit "+strconv.Itoa(i))
				}
			}
		}
		if names == nil {
			names = []string{}
		}
		return value{kind: kindList, list: names}, true, false
	case pgn.KindVariable:
		return value{}, false, true
	case pgn.KindSkip:
		if f.BitLength <= 0 {
			return value{}, false, true
		}
		r.skip(f.BitLength)
		return value{}, false, false
	}
	if f.BitLength <= 0 {
		return value{}, false, true
	}
	if f.BitLength > 64 {
		b := r.bytes(f.BitLength / 8)
		if len(b) == 0 {
			return value{}, false, false
		}
		return strValue(hexBytes(b)), true, false
	}
	if r.left() < f.BitLength {
		r.skip(r.left())
		return value{}, false, false
	}
	raw, ok := readRaw(f, r)
	if !ok {
		return value{}, false, false
	}
	switch f.Kind {
	case pgn.KindDate:
		if raw >= 0xfffd {
			return value{}, false, false
		}
		return strValue(time.Unix(raw*86400, 0).UTC().Format("2006.01.02")), true, false
	case pgn.KindTime:
		if raw >= 0xfffffffd {
			return value{}, false, false
		}
		return strValue(clock(float64(raw) * resolution(f))), true, false
	}
	v := float64(raw) + f.Offset
	if f.HasRange && f.Resolution != 0 && f.Kind != pgn.KindLookup && f.Kind != pgn.KindPGN && f.BitLength > 1 &&
		f.RangeMax/f.Resolution-v < 0 {
		return value{}, false, false
	}
	if f.Resolution != 0 {
		v = roundTo(v*f.Resolution, f.Decimals)
	}
	if f.Kind == pgn.KindLookup {
		if f.ID == "timeStamp" && v < 60 {
			return strValue(strconv.FormatFloat(v, 'f', -1, 64)), true, false
		}
		if name, ok := f.LookupName(int64(v)); ok {
			return strValue(name), true, false
		}
		if f.BitLength > 1 && isMax(f.BitLength, raw, f.Signed) {
			return value{}, false, false
		}
		return numValue(v), true, false
	}
	switch f.Unit {
	case "kWh":
		v *= 3.6e6
	case "Ah":
		v *= 3600
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return value{}, false, false
	}
	return numValue(v), true, false
}

// value is a field's value before it is boxed.
type value struct {
	kind uint8
	num  float64
	str  string
	list []string
}

const (
	kindNone = iota
	kindNum
	kindStr
	kindList
)

func numValue(v float64) value { return value{kind: kindNum, num: v} }
func strValue(s string) value  { return value{kind: kindStr, str: s} }

func (v value) any() any {
	switch v.kind {
	case kindNum:
		return v.num
	case kindStr:
		return v.str
	case kindList:
		return v.list
	}
	return nil
}

// boxed answers v as an interface value: last when that holds the same number, string or
// list (a field read by several rules is boxed once; the values are never changed).
func (v value) boxed(last any) any {
	switch v.kind {
	case kindNum:
		if x, ok := last.(float64); ok && math.Float64bits(x) == math.Float64bits(v.num) {
			return last
		}
	case kindStr:
		if x, ok := last.(string); ok && x == v.str {
			return last
		}
	case kindList:
		if x, ok := last.([]string); ok && slices.Equal(x, v.list) {
			return last
		}
	}
	return v.any()
}

func resolution(f *pgn.Field) float64 {
	if f.Resolution == 0 {
		return 1
	}
	return f.Resolution
}

// clock renders seconds as H:MM:SS with a fraction of five digits when there is one.
func clock(sec float64) string {
	minutes := sec / 60
	s := math.Mod(sec, 60)
	h := math.Floor(minutes / 60)
	m := math.Floor(math.Mod(minutes, 60))
	out := pad2(int64(h)) + ":" + pad2(int64(m)) + ":" + pad2(int64(math.Floor(s)))
	if frac := math.Mod(s, 1); frac > 0 {
		out += strconv.FormatFloat(frac, 'f', 5, 64)[1:]
	}
	return out
}

func pad2(v int64) string {
	if v >= 0 && v < 10 {
		return "0" + strconv.FormatInt(v, 10)
	}
	return strconv.FormatInt(v, 10)
}

// readLAU reads a string with a length and an encoding byte (0 UTF-16, 1 ASCII).
func readLAU(r *bitReader) (value, bool, bool) {
	if r.left() < 16 {
		return value{}, false, false
	}
	n := int(r.bits(8)) - 2
	r.bits(8)
	if n <= 0 {
		return value{}, false, false
	}
	b := r.bytes(n)
	if len(b) > 0 && len(b) == n && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return strValue(strings.TrimSpace(text(b))), true, false
}

// readFix reads a fixed-length string padded with 0xff, spaces, '@' or NULs.
func readFix(f *pgn.Field, r *bitReader) (value, bool, bool) {
	b := r.bytes(f.BitLength / 8)
	end := len(b)
	for end > 0 && (b[end-1] == 0xff || b[end-1] == ' ' || b[end-1] == 0 || b[end-1] == '@') {
		end--
	}
	for i := 0; i < end; i++ {
		if b[i] == 0 {
			end = i
			break
		}
	}
	if end == 0 {
		return value{}, false, false
	}
	return strValue(text(b[:end])), true, false
}

// text makes bytes a valid UTF-8 string.
func text(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

func hexBytes(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, len(b)*3)
	for i, c := range b {
		if i > 0 {
			out = append(out, ' ')
		}
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
