package plugin

import (
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero/experimental"
)

// linearMem backs one Wasm linear memory of a plugin instance. The whole maximum is reserved
// up front (address space only), so growing never copies and the host's view of the memory
// stays valid; only pages the plugin touches cost RAM. Reallocate beyond the cap fails, which
// the plugin sees as a failed memory.grow.
type linearMem struct {
	buf  []byte // len = current size, cap = reservation
	size atomic.Uint64
	free func([]byte)
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
	if m.buf != nil {
		m.free(m.buf[:cap(m.buf)])
		m.buf = nil
		m.size.Store(0)
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
	buf, free := reserveMemory(reserve)
	m := &linearMem{buf: buf[:0], free: free}
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
