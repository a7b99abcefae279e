// Package stackguard bounds how deep a WebAssembly module can call, by rewriting the module.
//
// wazero grows a Wasm call stack on the Go heap, doubling it up to a fixed ceiling of about
// 50 MB, and offers no setting to lower that ceiling: a plugin recursing without end makes
// the host allocate hundreds of megabytes before it traps. Instrument gives every defined
// function a thunk that adds the function's estimated frame size to a counter global on
// entry, traps (unreachable) when the counter passes the budget, calls the original body and
// subtracts on return. The thunk takes the function's index, so every way of calling it
// (call, call_indirect through a table, ref.func, an export, the start function) goes through
// the thunk, and the original bodies move unchanged to new indices after the last function:
// no instruction inside a body is decoded or rewritten.
//
// The counter is exported as Export, and read by a function exported as Getter, so the host
// can tell a trap of the guard (the counter above the budget) from any other trap without
// reading error text, through a runtime that exposes globals (wazero) or one that only calls
// exports (extism's Plugin). A trap leaves the counter where it was, which is harmless: the host discards an instance
// after any trap. Exceptions and tail calls (off in wazero's default features) would skip
// the subtraction; modules using them are not rewritten differently, they are refused by the
// runtime's feature set first.
//
// The estimate of a frame is FrameBase bytes plus SlotBytes per parameter and local, for the
// body and its thunk together. It is deliberately generous: the budget bounds the real stack,
// it does not have to match it.
package stackguard

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Frame estimate, in bytes.
const (
	FrameBase = 128 // return address, frame pointer, spill slots of the body and of its thunk
	SlotBytes = 16  // per parameter and local
)

// Export is the name the counter global is exported under.
const Export = "devhost.stack_bytes"

// Getter is the name of the exported function that takes nothing and returns the counter
// (an i32). It is added after the moved bodies and is not guarded itself, so it answers even
// once the counter is past the budget.
const Getter = "devhost.stack_bytes_get"

// Section ids of the binary format.
const (
	secCustom   = 0
	secType     = 1
	secImport   = 2
	secFunction = 3
	secGlobal   = 6
	secExport   = 7
	secCode     = 10
)

// order ranks the known sections as the binary format requires them to appear.
var order = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

var errMalformed = errors.New("stackguard: malformed module")

type section struct {
	id   byte
	body []byte
}

// Instrument returns a copy of module whose calls fail (trap) once the estimated stack of
// the calls in progress exceeds budget bytes.
func Instrument(module []byte, budget uint32) ([]byte, error) {
	if budget == 0 || budget > 1<<30 {
		return nil, fmt.Errorf("stackguard: budget %d out of range", budget)
	}
	if len(module) < 8 || string(module[:4]) != "\x00asm" || binary.LittleEndian.Uint32(module[4:8]) != 1 {
		return nil, fmt.Errorf("%w: not a version 1 WebAssembly binary", errMalformed)
	}
	var secs []section
	for r := (reader{b: module[8:]}); !r.done(); {
		id := r.byte()
		n := r.u32()
		body := r.bytes(int(n))
		if r.err != nil {
			return nil, fmt.Errorf("%w: section %d: %w", errMalformed, id, r.err)
		}
		secs = append(secs, section{id, body})
	}
	m := &module0{}
	if err := m.read(secs); err != nil {
		return nil, err
	}
	if len(m.funcTypes) == 0 {
		return module, nil // nothing defined, nothing can recurse
	}
	return m.write(secs, budget)
}

// module0 is what Instrument needs to know of a module.
type module0 struct {
	types       [][2]int // params, results per type
	importFuncs int
	importGlobs int
	definedGlob int
	funcTypes   []uint32 // type index per defined function
	bodies      [][]byte // per defined function, with its locals
	locals      []int    // declared locals per defined function
	exports     bool     // the module has an export section
}

func (m *module0) read(secs []section) error {
	for _, s := range secs {
		r := reader{b: s.body}
		switch s.id {
		case secType:
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				if form := r.byte(); form != 0x60 {
					return fmt.Errorf("%w: type form 0x%x", errMalformed, form)
				}
				p := r.u32()
				r.bytes(int(p))
				res := r.u32()
				r.bytes(int(res))
				m.types = append(m.types, [2]int{int(p), int(res)})
			}
		case secImport:
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				r.bytes(int(r.u32())) // module
				r.bytes(int(r.u32())) // name
				switch kind := r.byte(); kind {
				case 0x00: // function
					r.u32()
					m.importFuncs++
				case 0x01: // table: reftype, limits
					r.byte()
					r.limits()
				case 0x02: // memory
					r.limits()
				case 0x03: // global: valtype, mutability
					r.byte()
					r.byte()
					m.importGlobs++
				case 0x04: // tag
					r.byte()
					r.u32()
				default:
					return fmt.Errorf("%w: import kind 0x%x", errMalformed, kind)
				}
			}
		case secFunction:
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				t := r.u32()
				if int(t) >= len(m.types) {
					return fmt.Errorf("%w: function %d has type %d of %d", errMalformed, i, t, len(m.types))
				}
				m.funcTypes = append(m.funcTypes, t)
			}
		case secGlobal:
			m.definedGlob = int(r.u32())
		case secExport:
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				if name := string(r.bytes(int(r.u32()))); name == Export || name == Getter {
					return fmt.Errorf("%w: the module exports %s itself", errMalformed, name)
				}
				r.byte()
				r.u32()
			}
			m.exports = true
		case secCode:
			n := r.u32()
			for i := uint32(0); i < n && r.err == nil; i++ {
				body := r.bytes(int(r.u32()))
				br := reader{b: body}
				decls := br.u32()
				locals := 0
				for j := uint32(0); j < decls && br.err == nil; j++ {
					locals += int(br.u32())
					br.byte()
				}
				if br.err != nil {
					return fmt.Errorf("%w: locals of function %d: %w", errMalformed, i, br.err)
				}
				m.bodies = append(m.bodies, body)
				m.locals = append(m.locals, locals)
			}
		}
		if r.err != nil {
			return fmt.Errorf("%w: section %d: %w", errMalformed, s.id, r.err)
		}
	}
	if len(m.bodies) != len(m.funcTypes) {
		return fmt.Errorf("%w: %d function types, %d bodies", errMalformed, len(m.funcTypes), len(m.bodies))
	}
	return nil
}

func (m *module0) write(secs []section, budget uint32) ([]byte, error) {
	defined := len(m.funcTypes)
	if m.importFuncs+2*defined+1 > 1<<27 || len(m.types) >= 1<<20 {
		return nil, fmt.Errorf("stackguard: %d functions, too many to instrument", defined)
	}
	counter := uint32(m.importGlobs + m.definedGlob)
	getterType := uint32(len(m.types)) // () -> i32, appended to the type section
	getterIndex := uint32(m.importFuncs + 2*defined)

	// The function section lists the thunks (the old entries), the moved bodies, then the
	// getter.
	fn := appendU32(nil, uint32(2*defined+1))
	for range 2 {
		for _, t := range m.funcTypes {
			fn = appendU32(fn, t)
		}
	}
	fn = appendU32(fn, getterType)
	code := appendU32(nil, uint32(2*defined+1))
	for i, t := range m.funcTypes {
		params := m.types[t][0]
		cost := FrameBase + SlotBytes*(uint64(params)+uint64(m.locals[i]))
		cost = min(cost, uint64(budget)) // a huge frame still gets one call
		thunk := thunkBody(counter, uint32(cost), budget, params, uint32(m.importFuncs+defined+i))
		code = appendU32(code, uint32(len(thunk)))
		code = append(code, thunk...)
	}
	for _, b := range m.bodies {
		code = appendU32(code, uint32(len(b)))
		code = append(code, b...)
	}
	getter := []byte{0x00, 0x23} // no locals, global.get counter, end
	getter = append(appendU32(getter, counter), 0x0b)
	code = appendU32(code, uint32(len(getter)))
	code = append(code, getter...)
	// A mutable i32 initialised to 0, appended after the module's own globals.
	newGlobal := []byte{0x7f, 0x01, 0x41, 0x00, 0x0b}

	// The counter global and its getter.
	ourExports := appendU32(nil, uint32(len(Export)))
	ourExports = append(ourExports, Export...)
	ourExports = append(ourExports, 0x03) // global
	ourExports = appendU32(ourExports, counter)
	ourExports = appendU32(ourExports, uint32(len(Getter)))
	ourExports = append(ourExports, Getter...)
	ourExports = append(ourExports, 0x00) // function
	ourExports = appendU32(ourExports, getterIndex)

	out := []byte("\x00asm\x01\x00\x00\x00")
	wroteGlobal, wroteExport := false, false
	emitExport := func() {
		out = appendSection(out, secExport, append(appendU32(nil, 2), ourExports...))
		wroteExport = true
	}
	emitGlobal := func() {
		g := appendU32(nil, 1)
		out = appendSection(out, secGlobal, append(g, newGlobal...))
		wroteGlobal = true
	}
	for _, s := range secs {
		if !wroteGlobal && s.id != secCustom && order[s.id] > order[secGlobal] {
			emitGlobal()
		}
		if !m.exports && !wroteExport && s.id != secCustom && order[s.id] > order[secExport] {
			emitExport()
		}
		switch s.id {
		case secType:
			r := reader{b: s.body}
			n := r.u32()
			if r.err != nil {
				return nil, fmt.Errorf("%w: type section", errMalformed)
			}
			t := appendU32(nil, n+1)
			t = append(t, r.b...)
			out = appendSection(out, secType, append(t, 0x60, 0x00, 0x01, 0x7f))
		case secFunction:
			out = appendSection(out, secFunction, fn)
		case secCode:
			out = appendSection(out, secCode, code)
		case secGlobal:
			r := reader{b: s.body}
			n := r.u32()
			if r.err != nil {
				return nil, fmt.Errorf("%w: global section", errMalformed)
			}
			g := appendU32(nil, n+1)
			g = append(g, r.b...)
			out = appendSection(out, secGlobal, append(g, newGlobal...))
			wroteGlobal = true
		case secExport:
			r := reader{b: s.body}
			n := r.u32()
			if r.err != nil {
				return nil, fmt.Errorf("%w: export section", errMalformed)
			}
			e := appendU32(nil, n+2)
			e = append(e, r.b...)
			out = appendSection(out, secExport, append(e, ourExports...))
			wroteExport = true
		default:
			out = appendSection(out, s.id, s.body)
		}
	}
	if !wroteGlobal {
		emitGlobal()
	}
	if !wroteExport {
		emitExport()
	}
	return out, nil
}

// thunkBody is: counter += cost; if counter > budget { unreachable }; call body; counter -= cost.
func thunkBody(counter, cost, budget uint32, params int, body uint32) []byte {
	b := []byte{0x00} // no locals
	b = append(b, 0x23)
	b = appendU32(b, counter)
	b = append(b, 0x41)
	b = appendS32(b, int32(cost))
	b = append(b, 0x6a, 0x24) // i32.add, global.set
	b = appendU32(b, counter)
	b = append(b, 0x23)
	b = appendU32(b, counter)
	b = append(b, 0x41)
	b = appendS32(b, int32(budget))
	b = append(b, 0x4b, 0x04, 0x40, 0x00, 0x0b) // i32.gt_u, if, unreachable, end
	for i := 0; i < params; i++ {
		b = append(b, 0x20)
		b = appendU32(b, uint32(i))
	}
	b = append(b, 0x10)
	b = appendU32(b, body)
	b = append(b, 0x23)
	b = appendU32(b, counter)
	b = append(b, 0x41)
	b = appendS32(b, int32(cost))
	b = append(b, 0x6b, 0x24) // i32.sub, global.set
	b = appendU32(b, counter)
	return append(b, 0x0b)
}

func appendSection(out []byte, id byte, body []byte) []byte {
	out = append(out, id)
	out = appendU32(out, uint32(len(body)))
	return append(out, body...)
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// reader decodes the binary format; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) done() bool { return len(r.b) == 0 || r.err != nil }

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = errors.New("unexpected end")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) u32() uint32 {
	var v uint32
	for shift := 0; shift < 35; shift += 7 {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7f) << shift
		if c&0x80 == 0 {
			return v
		}
	}
	r.err = errors.New("integer too long")
	return 0
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = errors.New("unexpected end")
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

func (r *reader) limits() {
	flags := r.byte()
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}
