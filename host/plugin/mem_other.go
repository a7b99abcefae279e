//go:build !unix

package plugin

// reserveMemory allocates n zeroed bytes on the Go heap; dropping zeroes them, and the
// garbage collector releases them.
func reserveMemory(n uint64) (buf []byte, drop, unmap func([]byte)) {
	return make([]byte, n), func(b []byte) { clear(b) }, func([]byte) {}
}
