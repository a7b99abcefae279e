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

// Beyond maxSpare, buffers are kept while the spares and the ring fit sk.buffer_kb.
func TestSpareBuffersWithinRingBudget(t *testing.T) {
	set := DefaultSettings()
	set.BufferKB = 64
	s := New(Options{Settings: set})
	s.mu.Lock()
	defer s.mu.Unlock()
	for range 10 {
		s.recycleLocked(make([]byte, 0, MaxMessageBytes))
	}
	if len(s.spare) != 4 {
		t.Fatalf("%d spares of 16 KiB within 64 KiB, want 4", len(s.spare))
	}
	s.spare = s.spare[:0]
	for range 10 {
		s.recycleLocked(make([]byte, 0, 4096))
	}
	if len(s.spare) != 10 {
		t.Fatalf("%d spares of 4 KiB within 64 KiB, want 10", len(s.spare))
	}
	// Ring bytes count against the budget too.
	s.spare = s.spare[:0]
	s.ring.add(false, make([]byte, 60*1024))
	for range 10 {
		s.recycleLocked(make([]byte, 0, 4096))
	}
	if len(s.spare) != maxSpare {
		t.Fatalf("%d spares beside a 60 KiB ring, want %d", len(s.spare), maxSpare)
	}
}
