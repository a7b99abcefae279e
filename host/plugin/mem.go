package plugin

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// linearMem backs one Wasm linear memory of a plugin instance. The whole maximum is reserved
// up front (address space only), so growing never copies and the host's view of the memory
// stays valid; only pages the plugin touches cost RAM. Reallocate beyond the cap fails, which
// the plugin sees as a failed memory.grow.
//
// Free gives the pages back at once but keeps the reservation mapped: a call still running
// on another goroutine when its instance is closed (a stop or a time limit wins while the
// plugin executes) may touch the memory until it unwinds, and must read zeros, not fault.
// The mapping itself is released by a cleanup once nothing references the memory any more,
// which is after the last such call has returned.
type linearMem struct {
	buf  []byte // len = current size, cap = reservation
	size atomic.Uint64
	drop func([]byte) // gives the pages back, keeping the mapping
}

func (m *linearMem) Reallocate(size uint64) []byte {
	if size > uint64(cap(m.buf)) {
		return nil
	}
	m.buf = m.buf[:size]
	m.size.Store(size)
	return m.buf
}

func (m *linearMem) Free() {
	if m.size.Swap(0) != 0 || len(m.buf) != 0 {
		m.drop(m.buf[:cap(m.buf)])
		m.buf = m.buf[:0]
	}
}

// allocator hands out the linear memories of one instance (the plugin's and extism's
// kernel's) and remembers them, so the host can find the plugin's own memory, which extism
// does not expose (section 5 of the ABI passes data through it), and report its use.
type allocator struct {
	limit uint64 // bytes per memory

	mu   sync.Mutex
	mems []*linearMem
}

func (a *allocator) Allocate(capBytes, maxBytes uint64) experimental.LinearMemory {
	reserve := maxBytes
	if a.limit > 0 && reserve > a.limit {
		reserve = a.limit
	}
	if reserve < capBytes {
		reserve = capBytes
	}
	buf, drop, unmap := reserveMemory(reserve)
	m := &linearMem{buf: buf[:0], drop: drop}
	runtime.AddCleanup(m, unmap, buf)
	a.mu.Lock()
	a.mems = append(a.mems, m)
	a.mu.Unlock()
	return m
}

// other returns the one memory whose backing array does not start where b does (b is a
// view of extism's kernel memory, the instance's other memory), or nil unless there is
// exactly one.
func (a *allocator) other(b []byte) *linearMem {
	if len(b) == 0 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var found *linearMem
	for _, m := range a.mems {
		if cap(m.buf) > 0 && &m.buf[:1][0] == &b[0] {
			continue
		}
		if found != nil {
			return nil
		}
		found = m
	}
	return found
}
