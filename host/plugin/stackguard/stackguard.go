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
	"errors"
	"fmt"

	"devhost/host/plugin/wasmbin"
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

var errMalformed = errors.New("stackguard: malformed module")

type section = wasmbin.Section

// Instrument returns a copy of module whose calls fail (trap) once the estimated stack of
// the calls in progress exceeds budget bytes.
func Instrument(module []byte, budget uint32) ([]byte, error) {
	if budget == 0 || budget > 1<<30 {
		return nil, fmt.Errorf("stackguard: budget %d out of range", budget)
	}
	secs, err := wasmbin.Sections(module)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformed, err)
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
		r := wasmbin.NewReader(s.Body)
		switch s.ID {
		case wasmbin.SecType:
			n := r.U32()
			for i := uint32(0); i < n && r.Err() == nil; i++ {
				if form := r.Byte(); form != 0x60 {
					return fmt.Errorf("%w: type form 0x%x", errMalformed, form)
				}
				p := r.U32()
				r.Bytes(int(p))
				res := r.U32()
				r.Bytes(int(res))
				m.types = append(m.types, [2]int{int(p), int(res)})
			}
		case wasmbin.SecImport:
			n := r.U32()
			for i := uint32(0); i < n && r.Err() == nil; i++ {
				r.Name() // module
				r.Name() // name
				switch kind := r.Byte(); kind {
				case 0x00: // function
					r.U32()
					m.importFuncs++
				case 0x01: // table: reftype, limits
					r.Byte()
					r.Limits()
				case 0x02: // memory
					r.Limits()
				case 0x03: // global: valtype, mutability
					r.Byte()
					r.Byte()
					m.importGlobs++
				case 0x04: // tag
					r.Byte()
					r.U32()
				default:
					return fmt.Errorf("%w: import kind 0x%x", errMalformed, kind)
				}
			}
		case wasmbin.SecFunction:
			types, err := r.FuncTypes(len(m.types))
			if err != nil {
				return fmt.Errorf("%w: %w", errMalformed, err)
			}
			m.funcTypes = append(m.funcTypes, types...)
		case wasmbin.SecGlobal:
			m.definedGlob = int(r.U32())
		case wasmbin.SecExport:
			n := r.U32()
			for i := uint32(0); i < n && r.Err() == nil; i++ {
				if name := r.Name(); name == Export || name == Getter {
					return fmt.Errorf("%w: the module exports %s itself", errMalformed, name)
				}
				r.Byte()
				r.U32()
			}
			m.exports = true
		case wasmbin.SecCode:
			n := r.U32()
			for i := uint32(0); i < n && r.Err() == nil; i++ {
				body := r.Bytes(int(r.U32()))
				br := wasmbin.NewReader(body)
				decls := br.U32()
				locals := 0
				for j := uint32(0); j < decls && br.Err() == nil; j++ {
					locals += int(br.U32())
					br.Byte()
				}
				if br.Err() != nil {
					return fmt.Errorf("%w: locals of function %d: %w", errMalformed, i, br.Err())
				}
				m.bodies = append(m.bodies, body)
				m.locals = append(m.locals, locals)
			}
		}
		if r.Err() != nil {
			return fmt.Errorf("%w: section %d: %w", errMalformed, s.ID, r.Err())
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
	fn := wasmbin.AppendU32(nil, uint32(2*defined+1))
	for range 2 {
		for _, t := range m.funcTypes {
			fn = wasmbin.AppendU32(fn, t)
		}
	}
	fn = wasmbin.AppendU32(fn, getterType)
	codeSize := 16
	for _, b := range m.bodies {
		codeSize += len(b) + 5 + 64 // the body, its size, its thunk
	}
	code := wasmbin.AppendU32(make([]byte, 0, codeSize), uint32(2*defined+1))
	for i, t := range m.funcTypes {
		params := m.types[t][0]
		cost := FrameBase + SlotBytes*(uint64(params)+uint64(m.locals[i]))
		cost = min(cost, uint64(budget)) // a huge frame still gets one call
		thunk := thunkBody(counter, uint32(cost), budget, params, uint32(m.importFuncs+defined+i))
		code = wasmbin.AppendSized(code, thunk)
	}
	for _, b := range m.bodies {
		code = wasmbin.AppendSized(code, b)
	}
	getter := []byte{0x00, 0x23} // no locals, global.get counter, end
	getter = append(wasmbin.AppendU32(getter, counter), 0x0b)
	code = wasmbin.AppendSized(code, getter)
	// A mutable i32 initialised to 0, appended after the module's own globals.
	newGlobal := []byte{0x7f, 0x01, 0x41, 0x00, 0x0b}

	// The counter global and its getter.
	ourExports := append(wasmbin.AppendName(nil, Export), 0x03) // global
	ourExports = wasmbin.AppendU32(ourExports, counter)
	ourExports = append(wasmbin.AppendName(ourExports, Getter), 0x00) // function
	ourExports = wasmbin.AppendU32(ourExports, getterIndex)

	size := 8 + len(fn) + len(code) + len(ourExports) + len(newGlobal) + 64
	for _, s := range secs {
		if s.ID != wasmbin.SecCode { // replaced by code
			size += len(s.Body) + 6
		}
	}
	out := make([]byte, 0, size)
	out = append(out, wasmbin.Header...)
	wroteGlobal, wroteExport := false, false
	emitExport := func() {
		out = wasmbin.AppendSection(out, wasmbin.SecExport, append(wasmbin.AppendU32(nil, 2), ourExports...))
		wroteExport = true
	}
	emitGlobal := func() {
		g := wasmbin.AppendU32(nil, 1)
		out = wasmbin.AppendSection(out, wasmbin.SecGlobal, append(g, newGlobal...))
		wroteGlobal = true
	}
	// What the module's own type, global and export sections gain: the getter's type
	// () -> i32, the counter, the counter's and the getter's exports.
	grows := map[byte]struct {
		n     uint32
		items []byte
		name  string
	}{
		wasmbin.SecType:   {1, []byte{0x60, 0x00, 0x01, 0x7f}, "type"},
		wasmbin.SecGlobal: {1, newGlobal, "global"},
		wasmbin.SecExport: {2, ourExports, "export"},
	}
	for _, s := range secs {
		if !wroteGlobal && s.ID != wasmbin.SecCustom && wasmbin.Order(s.ID) > wasmbin.Order(wasmbin.SecGlobal) {
			emitGlobal()
		}
		if !m.exports && !wroteExport && s.ID != wasmbin.SecCustom && wasmbin.Order(s.ID) > wasmbin.Order(wasmbin.SecExport) {
			emitExport()
		}
		switch s.ID {
		case wasmbin.SecFunction:
			out = wasmbin.AppendSection(out, wasmbin.SecFunction, fn)
		case wasmbin.SecCode:
			out = wasmbin.AppendSection(out, wasmbin.SecCode, code)
		case wasmbin.SecType, wasmbin.SecGlobal, wasmbin.SecExport:
			g := grows[s.ID]
			body, err := wasmbin.Grow(s.Body, g.n, g.items)
			if err != nil {
				return nil, fmt.Errorf("%w: %s section", errMalformed, g.name)
			}
			out = wasmbin.AppendSection(out, s.ID, body)
			wroteGlobal = wroteGlobal || s.ID == wasmbin.SecGlobal
			wroteExport = wroteExport || s.ID == wasmbin.SecExport
		default:
			out = wasmbin.AppendSection(out, s.ID, s.Body)
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
	b := []byte{0x00}                                       // no locals
	b = wasmbin.AppendOpU32(b, 0x23, counter)               // global.get
	b = wasmbin.AppendOpS32(b, 0x41, int32(cost))           // i32.const
	b = wasmbin.AppendOpU32(append(b, 0x6a), 0x24, counter) // i32.add, global.set
	b = wasmbin.AppendOpU32(b, 0x23, counter)
	b = wasmbin.AppendOpS32(b, 0x41, int32(budget))
	b = append(b, 0x4b, 0x04, 0x40, 0x00, 0x0b) // i32.gt_u, if, unreachable, end
	for i := 0; i < params; i++ {
		b = wasmbin.AppendOpU32(b, 0x20, uint32(i)) // local.get
	}
	b = wasmbin.AppendOpU32(b, 0x10, body) // call
	b = wasmbin.AppendOpU32(b, 0x23, counter)
	b = wasmbin.AppendOpS32(b, 0x41, int32(cost))
	b = wasmbin.AppendOpU32(append(b, 0x6b), 0x24, counter) // i32.sub, global.set
	return append(b, 0x0b)
}
