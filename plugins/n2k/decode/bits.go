package decode

// bitReader reads little-endian bit fields in order, the way NMEA 2000 packs them.
type bitReader struct {
	data []byte
	pos  int // bit index
}

func (r *bitReader) left() int { return len(r.data)*8 - r.pos }

// bits reads n (≤ 64) bits as an unsigned number; the caller checks left() first.
func (r *bitReader) bits(n int) uint64 {
	var v uint64
	for i := 0; i < n; {
		byteIx, bit := r.pos>>3, r.pos&7
		take := min(8-bit, n-i)
		chunk := uint64(r.data[byteIx]>>bit) & (1<<take - 1)
		v |= chunk << i
		i += take
		r.pos += take
	}
	return v
}

// skip moves past n bits, at most to the end.
func (r *bitReader) skip(n int) { r.pos = min(r.pos+n, len(r.data)*8) }

// bytes reads n whole bytes (or what is left).
func (r *bitReader) bytes(n int) []byte {
	out := make([]byte, 0, n)
	for i := 0; i < n && r.left() >= 8; i++ {
		out = append(out, byte(r.bits(8)))
	}
	return out
}
