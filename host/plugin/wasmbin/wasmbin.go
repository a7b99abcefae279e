// Package wasmbin owns the encoding primitives of the WebAssembly binary format that the
// module rewriters (packages fuel and stackguard) share: LEB128 integers, names, sections
// and their order, and a reader whose first error sticks. It knows nothing of what a
// rewriter does with a module and imports the standard library only, so a fix to the
// format's plumbing lands once for every rewriter.
//
// The reader is deliberately lenient where the rewriters can afford it: it checks lengths
// and the number of LEB128 bytes (no out-of-range slice, no endless loop on any input) but
// not the unused bits of a fifth byte. Validation proper is the runtime's job when it
// compiles the rewritten module.
package wasmbin

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Header is the magic number and version 1 that start every module.
const Header = "\x00asm\x01\x00\x00\x00"

// Section ids of the binary format.
const (
	SecCustom    = 0
	SecType      = 1
	SecImport    = 2
	SecFunction  = 3
	SecTable     = 4
	SecMemory    = 5
	SecGlobal    = 6
	SecExport    = 7
	SecStart     = 8
	SecElement   = 9
	SecCode      = 10
	SecData      = 11
	SecDataCount = 12
	SecTag       = 13
)

// order ranks the known sections as the binary format requires them to appear.
var order = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

// Order ranks a section id by where the format requires the section to appear: a section
// of a higher rank comes after one of a lower rank. Custom sections (which may stand
// anywhere) and unknown ids rank 0.
func Order(id byte) int { return order[id] }

// The reader's errors, wrapped with where they happened by the rewriters.
var (
	ErrUnexpectedEnd = errors.New("unexpected end")
	ErrTooLong       = errors.New("integer too long")
	ErrNotModule     = errors.New("not a version 1 WebAssembly binary")
)

// Section is one section of a module: its id and its body without the size.
type Section struct {
	ID   byte
	Body []byte
}

// Sections checks the header of module and splits the rest into its sections, in order.
// The bodies alias module.
func Sections(module []byte) ([]Section, error) {
	if len(module) < 8 || string(module[:4]) != Header[:4] || binary.LittleEndian.Uint32(module[4:8]) != 1 {
		return nil, ErrNotModule
	}
	var secs []Section
	for r := NewReader(module[8:]); !r.Done(); {
		id := r.Byte()
		n := r.U32()
		body := r.Bytes(int(n))
		if r.Err() != nil {
			return nil, fmt.Errorf("section %d: %w", id, r.Err())
		}
		secs = append(secs, Section{id, body})
	}
	return secs, nil
}

// Encode assembles a module from its sections: the inverse of Sections.
func Encode(secs ...Section) []byte {
	size := len(Header)
	for _, s := range secs {
		size += 6 + len(s.Body)
	}
	out := append(make([]byte, 0, size), Header...)
	for _, s := range secs {
		out = AppendSection(out, s.ID, s.Body)
	}
	return out
}

// AppendSection appends a section: its id, the size of body, body.
func AppendSection(out []byte, id byte, body []byte) []byte {
	return AppendSized(append(out, id), body)
}

// AppendSized appends data after its size in bytes, as a section's body and each function
// body of the code section are written.
func AppendSized(b, data []byte) []byte {
	return append(AppendU32(b, uint32(len(data))), data...)
}

// AppendOpU32 appends an instruction with one unsigned immediate: local.get, global.set,
// call and the like.
func AppendOpU32(b []byte, op byte, imm uint32) []byte { return AppendU32(append(b, op), imm) }

// AppendOpS32 appends an instruction with one signed immediate: i32.const.
func AppendOpS32(b []byte, op byte, imm int32) []byte { return AppendS32(append(b, op), imm) }

// Grow answers the body of a vector section (a count, then the items) with n more items,
// given encoded in items, appended after the section's own.
func Grow(body []byte, n uint32, items []byte) ([]byte, error) {
	r := NewReader(body)
	count := r.U32()
	if r.Err() != nil {
		return nil, r.Err()
	}
	out := AppendU32(make([]byte, 0, len(body)+len(items)+5), count+n)
	out = append(out, r.Rest()...)
	return append(out, items...), nil
}

// AppendName appends a name: its length in bytes, then its bytes.
func AppendName(b []byte, s string) []byte {
	return append(AppendU32(b, uint32(len(s))), s...)
}

// AppendU32 appends v as an unsigned LEB128 number, in the fewest bytes.
func AppendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// AppendS32 appends v as a signed LEB128 number, in the fewest bytes.
func AppendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// Reader decodes the binary format from a byte slice. The first error sticks: once a read
// fails, every later read answers a zero value and Err keeps that first error, so a
// decoder can read a whole structure and check once at the end.
type Reader struct {
	b   []byte
	err error
}

// NewReader reads b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Err answers the first error, nil while every read succeeded.
func (r *Reader) Err() error { return r.err }

// Rest answers the bytes not read yet.
func (r *Reader) Rest() []byte { return r.b }

// Done reports whether there is nothing more to read: every byte read, or an error.
func (r *Reader) Done() bool { return len(r.b) == 0 || r.err != nil }

// Fail records err unless an earlier error is already recorded.
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.Fail(ErrUnexpectedEnd)
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// U32 reads an unsigned LEB128 number of at most five bytes.
func (r *Reader) U32() uint32 {
	v, _ := r.leb32()
	return v
}

// S32 reads a signed LEB128 number of at most five bytes.
func (r *Reader) S32() int32 {
	v, bits := r.leb32()
	if bits > 0 && bits < 32 && v&(1<<(bits-1)) != 0 {
		v |= ^uint32(0) << bits // sign extension
	}
	return int32(v)
}

// leb32 reads the bits of a LEB128 number of at most five bytes and answers them with how
// many bits it read (7 per byte); 0, 0 after an error.
func (r *Reader) leb32() (uint32, int) {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.Byte()
		if r.err != nil {
			return 0, 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v, shift + 7
		}
	}
	r.Fail(ErrTooLong)
	return 0, 0
}

// LEB skips a LEB128 number of at most max bytes and answers its bytes, for copying an
// immediate as it is.
func (r *Reader) LEB(max int) []byte {
	b := r.b
	for i := 0; i < max; i++ {
		c := r.Byte()
		if r.err != nil {
			return nil
		}
		if c&0x80 == 0 {
			return b[:i+1]
		}
	}
	r.Fail(ErrTooLong)
	return nil
}

// Bytes reads n bytes; the answer aliases the input.
func (r *Reader) Bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.Fail(ErrUnexpectedEnd)
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

// Name reads a name: a length, then that many bytes. It does not check that they are UTF-8.
func (r *Reader) Name() string { return string(r.Bytes(int(r.U32()))) }

// FuncTypes reads the body of a function section, the type index of every defined function,
// for a module of types types. An index past them is answered as an error; a read that
// fails sticks in the reader as usual, and the indices read until then are answered.
func (r *Reader) FuncTypes(types int) ([]uint32, error) {
	n := r.U32()
	var idx []uint32
	for i := uint32(0); i < n && r.err == nil; i++ {
		t := r.U32()
		if int(t) >= types {
			return nil, fmt.Errorf("function %d has type %d of %d", i, t, types)
		}
		if r.err == nil {
			idx = append(idx, t)
		}
	}
	return idx, nil
}

// Limits skips the limits of a table or memory: flags, the minimum and, when flag bit 0 is
// set, the maximum.
func (r *Reader) Limits() {
	flags := r.Byte()
	r.U32()
	if flags&1 != 0 {
		r.U32()
	}
}
