package skstream

import "testing"

// The spare buffers keep the largest ones: small buffers (batches the timer closed early) must
// not take every slot and leave full batches allocating anew.
func TestSpareBuffersKeepTheLargest(t *testing.T) {
	s := New(Options{})
	s.mu.Lock()
	defer s.mu.Unlock()
	for range maxSpare {
		s.recycleLocked(make([]byte, 0, 1024))
	}
	big := make([]byte, 0, MaxMessageBytes)
	s.recycleLocked(big)
	if len(s.spare) != maxSpare {
		t.Fatalf("%d spares, want %d", len(s.spare), maxSpare)
	}
	// A full batch gets the large buffer back; a small one gets a small spare, not the large.
	if b := s.bufferLocked(100); cap(b) != 1024 {
		t.Fatalf("small batch got a buffer of %d", cap(b))
	}
	if b := s.bufferLocked(MaxMessageBytes - 10); cap(b) != MaxMessageBytes || &b[:1][0] != &big[:1][0] {
		t.Fatalf("full batch got a buffer of %d, not the spare", cap(b))
	}
	// Nothing fits: a new buffer, rounded up to whole KiB.
	if b := s.bufferLocked(MaxMessageBytes - 10); cap(b) != MaxMessageBytes {
		t.Fatalf("new buffer of %d, want %d", cap(b), MaxMessageBytes)
	}
	// Oversized buffers are not kept.
	s.spare = s.spare[:0]
	s.recycleLocked(make([]byte, 0, 3*MaxMessageBytes))
	if len(s.spare) != 0 {
		t.Fatalf("oversized buffer kept")
	}
}
