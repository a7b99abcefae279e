package hostcall

import "unsafe"

// Mem is b as a host function's memory operand: its address in this module's linear memory
// (nil for an empty b) and its length.
func Mem(b []byte) (unsafe.Pointer, uint32) {
	return unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b))
}
