// Package pgn holds the NMEA 2000 PGN definitions of canboat's database (canboat.json from
// the npm package @canboat/pgns, Apache-2.0), turned into Go tables by ./gen. The tables are
// generated, never typed by hand: `go generate ./plugins/n2k/pgn` fetches the pinned package
// into the repository's git-ignored .cache/ with npm and rewrites tables_gen.go, which keeps
// the database's license notice at its top.
package pgn

//go:generate go run ./gen -out tables_gen.go

// Field types as canboat names them (FieldTypes in canboat.json).
const (
	Number       = "NUMBER"
	Float        = "FLOAT"
	Decimal      = "DECIMAL"
	Lookup       = "LOOKUP"
	IndirectLook = "INDIRECT_LOOKUP"
	BitLookup    = "BITLOOKUP"
	FieldTypeLk  = "FIELDTYPE_LOOKUP"
	Time         = "TIME"
	Date         = "DATE"
	Duration     = "DURATION"
	StringFix    = "STRING_FIX"
	StringLZ     = "STRING_LZ"
	StringLAU    = "STRING_LAU"
	Binary       = "BINARY"
	Reserved     = "RESERVED"
	Spare        = "SPARE"
	MMSI         = "MMSI"
	Variable     = "VARIABLE"
	ISOName      = "ISO_NAME"
	PGNField     = "PGN"
	FieldIndex   = "FIELD_INDEX"
	DynKey       = "DYNAMIC_FIELD_KEY"
	DynValue     = "DYNAMIC_FIELD_VALUE"
	DynLength    = "DYNAMIC_FIELD_LENGTH"
)

// Transport types: how a PGN travels on the bus.
const (
	Single = "Single" // one frame
	Fast   = "Fast"   // fast-packet, up to 223 bytes
	ISO    = "ISO"    // ISO 11783-3 transport protocol
	Mixed  = "Mixed"  // single or ISO
)

// Field is one field of a PGN as canboat defines it.
type Field struct {
	ID, Name    string
	Description string // for a matching field: the name of the matched value (e.g. "Furuno")
	Type        string
	BitOffset   int // -1 after a variable-length field
	BitLength   int // 0 for a variable length
	VarLength   bool
	Signed      bool
	Resolution  float64 // 0: none
	Offset      float64 // added to the raw value before scaling
	RangeMax    float64
	HasRange    bool
	Unit        string
	Lookup      string // LookupEnumeration
	BitLookup   string // LookupBitEnumeration
	Indirect    string // LookupIndirectEnumeration
	IndirectIx  int    // LookupIndirectEnumerationFieldOrder (1-based)
	Match       int64
	HasMatch    bool
	Condition   string
	PrimaryKey  bool
	// Set from the above when the package starts, for decoders that look at every field of
	// every message: comparing strings costs more than a number inside the sandbox.
	Kind            Kind             // Type as a number
	Decimals        int              // decimal places of Resolution below 1 (0.01: 2)
	CondProprietary bool             // Condition is PGNIsProprietary
	lookup          map[int64]string // the enumeration Lookup names, found once
	bitLookup       map[int]string   // the bit enumeration BitLookup names, found once
}

// LookupName answers the name of value in the field's enumeration (Lookup): the table is
// found when the package starts, so a message costs no lookup by the enumeration's name.
func (f *Field) LookupName(value int64) (string, bool) {
	s, ok := f.lookup[value]
	return s, ok
}

// BitName answers the name of bit in the field's bit enumeration (BitLookup).
func (f *Field) BitName(bit int) (string, bool) {
	s, ok := f.bitLookup[bit]
	return s, ok
}

// Kind is a field type as a number: the types a decoder tells apart, KindOther for the rest.
type Kind uint8

// Kinds of Field.Kind.
const (
	KindOther Kind = iota
	KindLookup
	KindBitLookup
	KindPGN
	KindDate
	KindTime // TIME or DURATION
	KindStringFix
	KindStringLZ
	KindStringLAU
	KindSkip     // RESERVED or SPARE
	KindVariable // VARIABLE and the DYNAMIC_FIELD types: decoding stops there
)

// Decimals counts the decimal places of a resolution below 1 (0.01 → 2): canboat's
// decoders round a scaled value to them.
func Decimals(res float64) int {
	p := 0
	for r := res; r > 0 && r < 1; r *= 10 {
		p++
	}
	return p
}

var kinds = map[string]Kind{
	Lookup: KindLookup, BitLookup: KindBitLookup, PGNField: KindPGN, Date: KindDate, Time: KindTime,
	Duration: KindTime, StringFix: KindStringFix, StringLZ: KindStringLZ, StringLAU: KindStringLAU,
	Reserved: KindSkip, Spare: KindSkip, Variable: KindVariable, DynValue: KindVariable,
	DynKey: KindVariable, DynLength: KindVariable,
}

func init() {
	for i := range definitions {
		definitions[i].Seq = i
		for j := range definitions[i].Fields {
			f := &definitions[i].Fields[j]
			f.Kind = kinds[f.Type]
			f.Decimals = Decimals(f.Resolution)
			f.CondProprietary = f.Condition == "PGNIsProprietary"
			f.lookup = lookups[f.Lookup]
			f.bitLookup = bitLookups[f.BitLookup]
		}
	}
}

// PGN is one definition; a PGN number may have several (proprietary PGNs are told apart
// by their matching fields, the manufacturer code first).
type PGN struct {
	PGN         uint32
	ID          string
	Description string
	Type        string
	Length      int // expected length in bytes, 0 when variable
	Fallback    bool
	Fields      []Field
	// Repeating field sets: the first field (1-based order), the size in fields and the
	// field holding the count (0: repeat until the data ends).
	Rep1Start, Rep1Size, Rep1Count int
	Rep2Start, Rep2Size, Rep2Count int
	// Seq is the definition's place in All(), set when the package starts: a decoder keeps
	// what it holds per definition in a slice by Seq instead of a map.
	Seq int
}

// Lookup answers the name of value in enumeration name.
func LookupName(name string, value int64) (string, bool) {
	s, ok := lookups[name][value]
	return s, ok
}

// BitName answers the name of bit in bit enumeration name.
func BitName(name string, bit int) (string, bool) {
	s, ok := bitLookups[name][bit]
	return s, ok
}

// IndirectName answers the name of (v1, v2) in indirect enumeration name.
func IndirectName(name string, v1, v2 int64) (string, bool) {
	s, ok := indirectLookups[name][[2]int64{v1, v2}]
	return s, ok
}

// Definitions answers every definition of pgn, the non-fallback ones first, in database order.
func Definitions(pgn uint32) []PGN {
	// A binary search written out: sort.Search calls its function for every step, an
	// indirect call inside the sandbox, and this runs for every message.
	i, j := 0, len(pgnIndex)
	for i < j {
		h := int(uint(i+j) >> 1)
		if pgnIndex[h].pgn < pgn {
			i = h + 1
		} else {
			j = h
		}
	}
	if i == len(pgnIndex) || pgnIndex[i].pgn != pgn {
		return nil
	}
	e := pgnIndex[i]
	return definitions[e.from:e.to]
}

// All answers every definition in the database.
func All() []PGN { return definitions }

// Version is the database version the tables were generated from.
func Version() string { return dbVersion }

// IsFast reports whether pgn travels as fast-packet: its first definition says so.
func IsFast(pgn uint32) bool {
	d := Definitions(pgn)
	return len(d) > 0 && d[0].Type == Fast
}

type indexEntry struct {
	pgn      uint32
	from, to int
}
