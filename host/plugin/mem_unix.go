//go:build unix

package plugin

import "syscall"

// reserveMemory maps n bytes of zeroed anonymous memory. Untouched pages cost no RAM. drop
// gives the pages back (they read as zeros again) and keeps the mapping; unmap releases it.
func reserveMemory(n uint64) (buf []byte, drop, unmap func([]byte)) {
	if n == 0 {
		return []byte{}, func([]byte) {}, func([]byte) {}
	}
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		// Out of address space: fall back to the Go heap, which still honours the cap.
		return make([]byte, n), func(b []byte) { clear(b) }, func([]byte) {}
	}
	drop = func(b []byte) {
		if len(b) > 0 {
			_ = syscall.Madvise(b, syscall.MADV_DONTNEED)
		}
	}
	return b, drop, func(b []byte) { _ = syscall.Munmap(b) }
}
