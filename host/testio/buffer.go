// Package testio holds the helpers tests of several packages share: a buffer that collects the
// output of goroutines writing at the same time as the test reads it, and a poll for a condition
// that a goroutine reaches in its own time.
package testio

import (
	"bytes"
	"sync"
)

// Buffer is an io.Writer safe for concurrent writers and readers. The zero value is empty and
// ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String answers everything written since the start or the last Reset.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Reset empties the buffer.
func (s *Buffer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Reset()
}
