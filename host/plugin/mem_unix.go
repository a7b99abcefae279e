//go:build unix

package plugin

import "syscall"

// reserveMemory maps n bytes of zeroed anonymous memory. Untouched pages cost no RAM.
func reserveMemory(n uint64) ([]byte, func([]byte)) {
	if n == 0 {
		return []byte{}, func([]byte) {}
	}
	b, err := syscall.Mmap(-1, 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		// Out of address space: fall back to the Go heap, which still honours the cap.
		return make([]byte, n), func([]byte) {}
	}
	return b, func(b []byte) { _ = syscall.Munmap(b) }
}
