package auth

import "crypto/subtle"

// ctEqual reports whether a and b are equal, in a time that depends only on max: both are
// copied into max-byte buffers and compared whole, and the length checks are folded in
// without branching, so neither where the strings differ nor whether their lengths differ
// shows in the timing. Strings longer than max are never equal to anything.
func ctEqual(a, b string, max int) bool {
	// Every key check runs this; for the maxima the device uses the buffers live on the
	// stack instead of costing two allocations per request.
	var stackA, stackB [ctStack]byte
	bufA, bufB := stackA[:], stackB[:]
	if max > ctStack {
		bufA, bufB = make([]byte, max), make([]byte, max)
	}
	bufA, bufB = bufA[:max], bufB[:max]
	copy(bufA, a)
	copy(bufB, b)
	same := subtle.ConstantTimeCompare(bufA, bufB)
	la, lb := clampLen(len(a), max), clampLen(len(b), max)
	same &= subtle.ConstantTimeEq(int32(la), int32(lb))
	same &= subtle.ConstantTimeLessOrEq(la, max)
	return same == 1
}

// ctStack is the largest max ctEqual compares without a heap buffer: it covers MaxKeyLen and
// session ids.
const ctStack = 128

// clampLen keeps a length within the range the subtle helpers are defined for; every length
// beyond max becomes max+1, which the LessOrEq term refuses.
func clampLen(n, max int) int {
	if n > max {
		return max + 1
	}
	return n
}
