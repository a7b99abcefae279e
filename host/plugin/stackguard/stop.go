package stackguard

import (
	"errors"
	"fmt"
)

// Stop is the name the stop flag global (an i32) is exported under. Once a host sets it to
// a non-zero value, the code running traps (unreachable) within Fuel loop iterations and
// function entries. This is how a host ends a call at its time limit without wazero's own
// termination checks, which leave the compiled code for Go at every loop iteration and cost
// most of a Go module's speed.
//
// Every loop iteration and function entry spends one unit of a fuel global; when it runs
// out, the fuel is refilled, the code leaves for the host once (a memory.grow of 0 pages,
// which wazero's compiled code does in Go: the Go scheduler can stop the goroutine there for
// a garbage collection, which it cannot do inside compiled code) and checks the stop flag.
const Stop = "devhost.stop"

// Fuel is how many loop iterations and function entries run between two checks of the stop
// flag: a few microseconds of code, against about a tenth of a microsecond for a check.
const Fuel = 10000

// globals are the indices of the globals the checks use.
type globals struct {
	stop, fuel uint32
	memory     bool // the module has a memory to grow by 0 pages
}

// stopCheck is: fuel--; if fuel == 0 { fuel = Fuel; memory.grow(0); if stop { unreachable } }.
func stopCheck(b []byte, g globals) []byte {
	b = append(b, 0x23)
	b = appendU32(b, g.fuel)
	b = append(b, 0x41, 0x01, 0x6b, 0x24) // i32.const 1, i32.sub, global.set
	b = appendU32(b, g.fuel)
	b = append(b, 0x23)
	b = appendU32(b, g.fuel)
	b = append(b, 0x45, 0x04, 0x40, 0x41) // i32.eqz, if, i32.const
	b = appendS32(b, Fuel)
	b = append(b, 0x24)
	b = appendU32(b, g.fuel)
	if g.memory {
		b = append(b, 0x41, 0x00, 0x40, 0x00, 0x1a) // i32.const 0, memory.grow, drop
	}
	b = append(b, 0x23)
	b = appendU32(b, g.stop)
	return append(b, 0x04, 0x40, 0x00, 0x0b, 0x0b) // if, unreachable, end, end
}

// HasStart reports whether a module has a start function, which runs while the module is
// instantiated, before a host can reach the stop flag of the new instance.
func HasStart(module []byte) bool {
	if len(module) < 8 {
		return false
	}
	for r := (reader{b: module[8:]}); !r.done(); {
		id := r.byte()
		r.bytes(int(r.u32()))
		if r.err == nil && id == 8 {
			return true
		}
	}
	return false
}

var errUnsupported = errors.New("stackguard: instruction outside the supported feature set")

// addLoopChecks copies a function body (its local declarations and code) with the stop check
// inserted at the start of every loop. The check's blocks are closed before the loop's own
// instructions, so no branch depth in the body changes.
func addLoopChecks(body []byte, g globals) ([]byte, error) {
	r := reader{b: body}
	decls := r.u32()
	for j := uint32(0); j < decls && r.err == nil; j++ {
		r.u32()
		r.byte()
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: locals: %w", errMalformed, r.err)
	}
	out := make([]byte, 0, len(body)+len(body)/16)
	start := len(body) - len(r.b) // where the code starts
	out = append(out, body[:start]...)
	code := r.b
	last := 0
	for pos := 0; pos < len(code); {
		op := code[pos]
		n, err := immediates(code[pos+1:], op)
		if err != nil {
			return nil, fmt.Errorf("opcode 0x%x at %d: %w", op, start+pos, err)
		}
		pos += 1 + n
		if op == 0x03 { // loop
			out = append(out, code[last:pos]...)
			out = stopCheck(out, g)
			last = pos
		}
	}
	return append(out, code[last:]...), nil
}

// immediates answers the length of the immediates that follow opcode op in b.
func immediates(b []byte, op byte) (int, error) {
	r := reader{b: b}
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block, loop, if: a block type
		r.blockType()
	case op == 0x0c || op == 0x0d || op == 0x10 || op == 0x12 || op == 0xd2 || op == 0x25 || op == 0x26 ||
		op >= 0x20 && op <= 0x24: // br, br_if, call, return_call, ref.func, table.get/set, locals, globals
		r.u32()
	case op == 0x0e: // br_table
		n := r.u32()
		for i := uint32(0); i <= n && r.err == nil; i++ {
			r.u32()
		}
	case op == 0x11 || op == 0x13: // call_indirect, return_call_indirect
		r.u32()
		r.u32()
	case op == 0x1c: // select with types
		r.bytes(int(r.u32()))
	case op >= 0x28 && op <= 0x3e: // loads and stores
		r.memarg()
	case op == 0x3f || op == 0x40 || op == 0xd0: // memory.size, memory.grow, ref.null
		r.byte()
	case op == 0x41:
		r.sleb(32)
	case op == 0x42:
		r.sleb(64)
	case op == 0x43:
		r.bytes(4)
	case op == 0x44:
		r.bytes(8)
	case op == 0xfc:
		r.prefixedFC()
	case op == 0xfd:
		r.prefixedFD()
	case op <= 0x01 || op == 0x05 || op == 0x0b || op == 0x0f || op == 0x1a || op == 0x1b ||
		op >= 0x45 && op <= 0xc4 || op == 0xd1:
		// no immediates
	default:
		return 0, errUnsupported
	}
	if r.err != nil {
		return 0, r.err
	}
	return len(b) - len(r.b), nil
}

func (r *reader) blockType() {
	if len(r.b) > 0 && (r.b[0] == 0x40 || r.b[0] >= 0x6f && r.b[0] <= 0x7f) {
		r.byte() // empty, or one value type
		return
	}
	r.sleb(33) // a type index
}

func (r *reader) memarg() {
	if align := r.u32(); align&0x40 != 0 {
		r.u32() // memory index (multi-memory)
	}
	r.u32()
}

// prefixedFC skips the immediates of the 0xFC instructions: saturating truncations, bulk
// memory and table operations.
func (r *reader) prefixedFC() {
	switch sub := r.u32(); {
	case sub <= 7:
	case sub == 8: // memory.init
		r.u32()
		r.byte()
	case sub == 9 || sub == 13 || sub == 15 || sub == 16 || sub == 17: // data.drop, elem.drop, table.grow/size/fill
		r.u32()
	case sub == 10: // memory.copy
		r.byte()
		r.byte()
	case sub == 11: // memory.fill
		r.byte()
	case sub == 12 || sub == 14: // table.init, table.copy
		r.u32()
		r.u32()
	default:
		r.fail(errUnsupported)
	}
}

// prefixedFD skips the immediates of the 0xFD (SIMD) instructions.
func (r *reader) prefixedFD() {
	switch sub := r.u32(); {
	case sub <= 11 || sub == 92 || sub == 93: // loads and stores
		r.memarg()
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		r.bytes(16)
	case sub >= 21 && sub <= 34: // extract and replace lane
		r.byte()
	case sub >= 84 && sub <= 91: // load and store lane
		r.memarg()
		r.byte()
	case sub <= 255:
	default:
		r.fail(errUnsupported)
	}
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// sleb skips a signed LEB128 of at most bits bits.
func (r *reader) sleb(bits int) {
	for i := 0; i < (bits+6)/7; i++ {
		if c := r.byte(); r.err != nil || c&0x80 == 0 {
			return
		}
	}
	r.fail(errors.New("integer too long"))
}
