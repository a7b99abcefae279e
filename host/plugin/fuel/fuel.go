// Package fuel bounds how long a WebAssembly module can run between two visits to the host,
// by rewriting the module.
//
// wazero enforces a time limit (RuntimeConfig.WithCloseOnContextDone) by leaving the
// compiled code for Go at every loop header to ask whether the module was closed, and by
// starting a goroutine for every call. Code built by Go's wasm port has a loop at the top of
// every function, so a plugin pays a trip out of the compiled code at nearly every call and
// loop iteration: the guarded publishing path ran about three times slower than the same
// path without the checks. Instrument instead keeps a counter in a global of the module and
// decrements it at every function entry and every loop header (native instructions, no
// exit). When it reaches zero the module calls the imported function Import, which the host
// implements: it ends the call (by trapping) when its time is up or it was stopped, and
// otherwise answers the next allowance, Fuel. Every unbounded execution goes through a loop
// header or a function entry, so the host is asked at least every Fuel of them; recursion
// is bounded in depth separately (package stackguard), and a recursion fanning out without
// loops is caught here too, since every entry counts. The instructions whose work grows
// with an operand (memory.copy, memory.fill, memory.init, table.copy, table.fill,
// table.init, table.grow) are charged a unit per KiB (or 1,024 entries) of their count
// before they run, so a loop of large copies asks as often as its bytes warrant; the charge
// keeps the count in a local added after the function's own.
//
// The import is appended after the module's own function imports, so every defined function
// moves up by one index: calls, ref.func (in bodies and in constant expressions), exports,
// the start function and element segments are renumbered. Only the "name" and DWARF custom
// sections refer to functions or code offsets; they are dropped, the others are kept.
// Instructions outside wazero's default feature set (core 2.0: multi-value, sign extension,
// saturating conversions, bulk memory, reference types, SIMD) are refused.
package fuel

import (
	"errors"
	"fmt"
	"strings"

	"devhost/host/plugin/wasmbin"
)

// Import is the name of the function the instrumented module imports: () → i32, the fuel
// for the next stretch of execution.
const Import = "devhost.refuel"

// Fuel is the allowance between two calls of Import: loop iterations, function entries and
// KiB of bulk memory work. About ten to a hundred microseconds of plugin code (20 MB of
// copying at most); the call costs a fraction of one.
const Fuel = 20000

var errMalformed = errors.New("fuel: malformed module")

type section = wasmbin.Section

// Instrument returns a copy of module that calls importModule.Import every Fuel loop
// iterations and function entries. A module that defines no function is returned as it is.
func Instrument(module []byte, importModule string) ([]byte, error) {
	secs, err := wasmbin.Sections(module)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformed, err)
	}
	w := &writer{importModule: importModule}
	if err := w.scan(secs); err != nil {
		return nil, err
	}
	if !w.hasCode {
		return module, nil
	}
	return w.write(secs)
}

// writer rewrites one module.
type writer struct {
	importModule string
	types        uint32   // entries in the type section
	params       []uint32 // parameters per type
	funcParams   []uint32 // parameters per defined function
	importFuncs  uint32
	importGlobs  uint32
	definedGlobs uint32
	hasCode      bool
	refuel       uint32 // function index of the import
	global       uint32 // global index of the counter
}

// scan counts what the rewrite needs: types, imported functions and globals, defined globals.
func (w *writer) scan(secs []section) error {
	for _, s := range secs {
		r := wasmbin.NewReader(s.Body)
		switch s.ID {
		case wasmbin.SecType:
			w.types = r.U32()
			for i := uint32(0); i < w.types && r.Err() == nil; i++ {
				if form := r.Byte(); form != 0x60 {
					return fmt.Errorf("%w: type form 0x%x", errMalformed, form)
				}
				p := r.U32()
				r.Bytes(int(p))
				r.Bytes(int(r.U32()))
				w.params = append(w.params, p)
			}
		case wasmbin.SecFunction:
			types, err := r.FuncTypes(len(w.params))
			if err != nil {
				return fmt.Errorf("%w: %w", errMalformed, err)
			}
			for _, t := range types {
				w.funcParams = append(w.funcParams, w.params[t])
			}
		case wasmbin.SecImport:
			n := r.U32()
			for i := uint32(0); i < n && r.Err() == nil; i++ {
				mod := r.Name()
				name := r.Name()
				if mod == w.importModule && name == Import {
					return fmt.Errorf("%w: the module imports %s itself", errMalformed, Import)
				}
				switch kind := r.Byte(); kind {
				case 0x00:
					r.U32()
					w.importFuncs++
				case 0x01:
					r.Byte()
					r.Limits()
				case 0x02:
					r.Limits()
				case 0x03:
					r.Byte()
					r.Byte()
					w.importGlobs++
				default:
					return fmt.Errorf("%w: import kind 0x%x", errMalformed, kind)
				}
			}
		case wasmbin.SecGlobal:
			w.definedGlobs = r.U32()
		case wasmbin.SecCode:
			w.hasCode = r.U32() > 0
		}
		if r.Err() != nil {
			return fmt.Errorf("%w: section %d: %w", errMalformed, s.ID, r.Err())
		}
	}
	w.refuel = w.importFuncs
	w.global = w.importGlobs + w.definedGlobs
	return nil
}

// fn maps a function index of the original module to the rewritten one.
func (w *writer) fn(i uint32) uint32 {
	if i >= w.importFuncs {
		return i + 1
	}
	return i
}

func (w *writer) write(secs []section) ([]byte, error) {
	refuelType := w.types // () → i32, appended to the type section
	imp := wasmbin.AppendName(nil, w.importModule)
	imp = wasmbin.AppendName(imp, Import)
	imp = append(imp, 0x00)
	imp = wasmbin.AppendU32(imp, refuelType)
	// A mutable i32 holding the allowance, full at the start.
	global := append([]byte{0x7f, 0x01, 0x41}, wasmbin.AppendS32(nil, Fuel)...)
	global = append(global, 0x0b)

	// The checks add about a tenth to the code: one buffer for the whole module.
	size := 8 + len(imp) + len(global) + 64
	for _, s := range secs {
		size += len(s.Body) + len(s.Body)/4 + 6
	}
	out := make([]byte, 0, size)
	out = append(out, wasmbin.Header...)
	wroteImport, wroteGlobal := false, false
	for _, s := range secs {
		if s.ID != wasmbin.SecCustom {
			if !wroteImport && wasmbin.Order(s.ID) > wasmbin.Order(wasmbin.SecImport) {
				out = wasmbin.AppendSection(out, wasmbin.SecImport, append(wasmbin.AppendU32(nil, 1), imp...))
				wroteImport = true
			}
			if !wroteGlobal && wasmbin.Order(s.ID) > wasmbin.Order(wasmbin.SecGlobal) {
				out = wasmbin.AppendSection(out, wasmbin.SecGlobal, append(wasmbin.AppendU32(nil, 1), global...))
				wroteGlobal = true
			}
		}
		var body []byte
		var err error
		switch s.ID {
		case wasmbin.SecCustom:
			r := wasmbin.NewReader(s.Body)
			name := r.Name()
			if r.Err() != nil {
				return nil, fmt.Errorf("%w: custom section: %w", errMalformed, r.Err())
			}
			if name == "name" || strings.HasPrefix(name, ".debug_") {
				continue // refers to function indices or code offsets that moved
			}
			body = s.Body
		case wasmbin.SecType:
			body, err = wasmbin.Grow(s.Body, 1, []byte{0x60, 0x00, 0x01, 0x7f})
		case wasmbin.SecImport:
			body, err = wasmbin.Grow(s.Body, 1, imp)
			wroteImport = true
		case wasmbin.SecGlobal:
			body, err = w.globals(s.Body)
			body = append(body, global...)
			wroteGlobal = true
		case wasmbin.SecExport:
			body, err = w.exports(s.Body)
		case wasmbin.SecStart:
			r := wasmbin.NewReader(s.Body)
			body = wasmbin.AppendU32(nil, w.fn(r.U32()))
			err = r.Err()
		case wasmbin.SecElement:
			body, err = w.elements(s.Body)
		case wasmbin.SecCode:
			body, err = w.code(s.Body)
		default:
			body = s.Body
		}
		if err != nil {
			return nil, fmt.Errorf("%w: section %d: %w", errMalformed, s.ID, err)
		}
		out = wasmbin.AppendSection(out, s.ID, body)
	}
	return out, nil
}

// globals rewrites the global section without its trailing count fix: the caller appends
// the counter, so the count is one more than the module's.
func (w *writer) globals(b []byte) ([]byte, error) {
	r := wasmbin.NewReader(b)
	n := r.U32()
	out := wasmbin.AppendU32(nil, n+1)
	for i := uint32(0); i < n && r.Err() == nil; i++ {
		out = append(out, r.Byte(), r.Byte()) // valtype, mutability
		out = w.constExpr(r, out)
	}
	return out, r.Err()
}

func (w *writer) exports(b []byte) ([]byte, error) {
	r := wasmbin.NewReader(b)
	n := r.U32()
	out := wasmbin.AppendU32(nil, n)
	for i := uint32(0); i < n && r.Err() == nil; i++ {
		out = wasmbin.AppendName(out, r.Name())
		kind := r.Byte()
		idx := r.U32()
		if kind == 0x00 {
			idx = w.fn(idx)
		}
		out = wasmbin.AppendU32(append(out, kind), idx)
	}
	return out, r.Err()
}

// elements rewrites the element section's function indices, in each of its eight forms.
func (w *writer) elements(b []byte) ([]byte, error) {
	r := wasmbin.NewReader(b)
	n := r.U32()
	out := wasmbin.AppendU32(nil, n)
	for i := uint32(0); i < n && r.Err() == nil; i++ {
		flags := r.U32()
		out = wasmbin.AppendU32(out, flags)
		if flags > 7 {
			return nil, fmt.Errorf("element segment form %d", flags)
		}
		if flags&2 != 0 && flags&1 == 0 { // an explicit table index
			out = wasmbin.AppendU32(out, r.U32())
		}
		if flags&1 == 0 { // active: the offset
			out = w.constExpr(r, out)
		}
		if flags&3 != 0 { // elemkind or reftype
			out = append(out, r.Byte())
		}
		count := r.U32()
		out = wasmbin.AppendU32(out, count)
		for j := uint32(0); j < count && r.Err() == nil; j++ {
			if flags&4 != 0 {
				out = w.constExpr(r, out)
			} else {
				out = wasmbin.AppendU32(out, w.fn(r.U32()))
			}
		}
	}
	return out, r.Err()
}

// constExpr copies a constant expression up to and including its end, renumbering ref.func.
func (w *writer) constExpr(r *wasmbin.Reader, out []byte) []byte {
	for r.Err() == nil {
		op := r.Byte()
		out = append(out, op)
		switch op {
		case 0x0b:
			return out
		case 0x41:
			out = append(out, r.LEB(5)...)
		case 0x42:
			out = append(out, r.LEB(10)...)
		case 0x43:
			out = append(out, r.Bytes(4)...)
		case 0x44:
			out = append(out, r.Bytes(8)...)
		case 0x23: // global.get
			out = wasmbin.AppendU32(out, r.U32())
		case 0xd0: // ref.null t
			out = append(out, r.Byte())
		case 0xd2: // ref.func
			out = wasmbin.AppendU32(out, w.fn(r.U32()))
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constant arithmetic
		case 0xfd: // v128.const
			sub := r.U32()
			if sub != 12 {
				r.Fail(fmt.Errorf("instruction 0xfd %d in a constant expression", sub))
				return out
			}
			out = wasmbin.AppendU32(out, sub)
			out = append(out, r.Bytes(16)...)
		default:
			r.Fail(fmt.Errorf("instruction 0x%x in a constant expression", op))
		}
	}
	return out
}

// check is the instrumentation of function entries and loop headers: ask the host for more
// when the allowance is spent, then take one unit. It leaves the operand stack as it found
// it.
func (w *writer) check(out []byte) []byte {
	out = w.refill(out)
	out = wasmbin.AppendOpU32(out, 0x23, w.global)                            // global.get
	return wasmbin.AppendOpU32(append(out, 0x41, 0x01, 0x6b), 0x24, w.global) // i32.const 1, i32.sub, global.set
}

func (w *writer) code(b []byte) ([]byte, error) {
	r := wasmbin.NewReader(b)
	n := r.U32()
	out := wasmbin.AppendU32(make([]byte, 0, len(b)+len(b)/4), n)
	var scratch, instrs []byte // one body at a time, reused
	for i := uint32(0); i < n && r.Err() == nil; i++ {
		body := r.Bytes(int(r.U32()))
		if r.Err() != nil {
			break
		}
		if int(i) >= len(w.funcParams) {
			return nil, fmt.Errorf("%d bodies for %d functions", i+1, len(w.funcParams))
		}
		var err error
		scratch, instrs, err = w.body(scratch[:0], instrs[:0], body, w.funcParams[i])
		if err != nil {
			return nil, fmt.Errorf("function %d: %w", i, err)
		}
		out = wasmbin.AppendSized(out, scratch)
	}
	return out, r.Err()
}

// body appends the rewritten function body to out: a check on entry and at every loop
// header, a charge before every instruction whose work grows with an operand, calls and
// ref.func renumbered, every other instruction copied as it is. The charge needs a local of
// its own, appended after the function's parameters and locals (no index moves). instrs is
// a scratch buffer for the instructions; both buffers are returned for reuse.
func (w *writer) body(out, instrs, b []byte, params uint32) ([]byte, []byte, error) {
	r := wasmbin.NewReader(b)
	decls := r.U32()
	locals := uint64(params)
	for j := uint32(0); j < decls && r.Err() == nil; j++ {
		locals += uint64(r.U32())
		r.Byte()
	}
	if r.Err() != nil {
		return out, instrs, fmt.Errorf("locals: %w", r.Err())
	}
	if locals >= 50000 {
		return out, instrs, fmt.Errorf("%d locals", locals)
	}
	declBytes := b[:len(b)-len(r.Rest())]
	tmp := uint32(locals) // the charge's local, if one is needed
	charged := false
	instrs = w.check(instrs)
	for !r.Done() {
		start := len(b) - len(r.Rest())
		op := r.Byte()
		switch op {
		case 0x10, 0xd2: // call, ref.func
			instrs = append(instrs, op)
			instrs = wasmbin.AppendU32(instrs, w.fn(r.U32()))
			continue
		case 0x03: // loop
			blockType(r)
			instrs = append(instrs, b[start:len(b)-len(r.Rest())]...)
			instrs = w.check(instrs)
			continue
		case 0xfc:
			if sub, ok := peekU32(r.Rest()); ok && bulk(sub) {
				instrs = w.charge(instrs, tmp)
				charged = true
			}
		}
		immediates(r, op)
		instrs = append(instrs, b[start:len(b)-len(r.Rest())]...)
	}
	if r.Err() != nil {
		return out, instrs, r.Err()
	}
	if charged {
		// The declarations again, with one more: an i32.
		dr := wasmbin.NewReader(declBytes)
		dr.U32()
		out = wasmbin.AppendU32(out, decls+1)
		out = append(out, dr.Rest()...)
		out = append(out, 0x01, 0x7f)
	} else {
		out = append(out, declBytes...)
	}
	return append(out, instrs...), instrs, nil
}

// bulk tells the 0xfc instructions whose work grows with their last operand, a count: the
// memory's and the tables' init, copy and fill, and table.grow.
func bulk(sub uint32) bool {
	switch sub {
	case 8, 10, 11, 12, 14, 15, 17:
		return true
	}
	return false
}

// charge takes one unit of fuel per KiB (or 1,024 table entries) of the count on top of the
// stack, leaving the stack as it was, and asks the host for more when the allowance is spent
// before the instruction runs.
func (w *writer) charge(out []byte, tmp uint32) []byte {
	out = wasmbin.AppendOpU32(out, 0x22, tmp)      // local.tee
	out = wasmbin.AppendOpU32(out, 0x23, w.global) // global.get
	out = wasmbin.AppendOpU32(out, 0x20, tmp)      // local.get
	// i32.const 10, i32.shr_u, i32.sub, global.set
	out = wasmbin.AppendOpU32(append(out, 0x41, 0x0a, 0x76, 0x6b), 0x24, w.global)
	return w.refill(out)
}

// refill asks the host for fuel when the allowance is spent (below 1).
func (w *writer) refill(out []byte) []byte {
	out = wasmbin.AppendOpU32(out, 0x23, w.global) // global.get
	// i32.const 1, i32.lt_s, if (no result), call refuel, global.set, end
	out = wasmbin.AppendOpU32(append(out, 0x41, 0x01, 0x48, 0x04, 0x40), 0x10, w.refuel)
	return append(wasmbin.AppendOpU32(out, 0x24, w.global), 0x0b)
}

func peekU32(b []byte) (uint32, bool) {
	r := wasmbin.NewReader(b)
	v := r.U32()
	return v, r.Err() == nil
}

// immediates skips the immediates of op (already read).
func immediates(r *wasmbin.Reader, op byte) {
	switch {
	case op == 0x00, op == 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b,
		op >= 0x45 && op <= 0xc4, op == 0xd1:
	case op == 0x02, op == 0x04: // block, if
		blockType(r)
	case op == 0x0c, op == 0x0d, op >= 0x20 && op <= 0x26: // br, br_if, locals, globals, tables
		r.U32()
	case op == 0x0e: // br_table
		n := r.U32()
		for i := uint32(0); i <= n && r.Err() == nil; i++ {
			r.U32()
		}
	case op == 0x11: // call_indirect
		r.U32()
		r.U32()
	case op == 0x1c: // select t*
		r.Bytes(int(r.U32()))
	case op >= 0x28 && op <= 0x3e: // memarg
		r.U32()
		r.U32()
	case op == 0x3f, op == 0x40: // memory.size, memory.grow
		r.U32()
	case op == 0x41:
		r.LEB(5)
	case op == 0x42:
		r.LEB(10)
	case op == 0x43:
		r.Bytes(4)
	case op == 0x44:
		r.Bytes(8)
	case op == 0xd0:
		r.Byte()
	case op == 0xfc:
		misc(r)
	case op == 0xfd:
		simd(r)
	default:
		r.Fail(fmt.Errorf("instruction 0x%x outside the supported features", op))
	}
}

// misc skips a 0xfc instruction: saturating conversions, bulk memory, tables.
func misc(r *wasmbin.Reader) {
	switch sub := r.U32(); {
	case sub <= 7:
	case sub == 8, sub == 10, sub == 12, sub == 14: // two indices
		r.U32()
		r.U32()
	case sub == 9, sub == 11, sub == 13, sub <= 17:
		r.U32()
	default:
		r.Fail(fmt.Errorf("instruction 0xfc %d outside the supported features", sub))
	}
}

// simd skips a 0xfd instruction.
func simd(r *wasmbin.Reader) {
	switch sub := r.U32(); {
	case sub <= 11, sub == 92, sub == 93: // loads and stores
		r.U32()
		r.U32()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		r.Bytes(16)
	case sub >= 21 && sub <= 34: // lane
		r.Byte()
	case sub >= 84 && sub <= 91: // lane loads and stores
		r.U32()
		r.U32()
		r.Byte()
	case sub <= 255:
	default:
		r.Fail(fmt.Errorf("instruction 0xfd %d outside the supported features", sub))
	}
}

// blockType skips a block type: empty, a value type or a type index (s33).
func blockType(r *wasmbin.Reader) {
	if r.Err() != nil || len(r.Rest()) == 0 {
		r.Fail(wasmbin.ErrUnexpectedEnd)
		return
	}
	switch r.Rest()[0] {
	case 0x40, 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		r.Byte()
	default:
		r.LEB(5)
	}
}
