package testio

import (
	"strings"
	"sync"
	"testing"
)

// Writers in several goroutines lose nothing, and Reset empties the buffer.
func TestBufferConcurrentWriters(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if _, err := b.Write([]byte("x")); err != nil {
					t.Error(err)
				}
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 400) {
		t.Fatalf("%d bytes, want 400", len(got))
	}
	b.Reset()
	if got := b.String(); got != "" {
		t.Fatalf("after Reset: %q", got)
	}
}
