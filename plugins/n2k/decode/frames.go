package decode

// Frames splits a whole message into the frames that carry it on the bus: one frame for a
// single-frame PGN of at most 8 bytes, fast-packet frames (sequence counter seq) for a
// fast-packet PGN of at most 223 bytes, otherwise an ISO transport-protocol broadcast (BAM)
// of at most 1785 bytes. Longer messages answer nil.
func Frames(m Message, seq uint8, isFast IsFastFunc) []Frame {
	if isFast == nil {
		isFast = defaultIsFast
	}
	n := len(m.Data)
	switch {
	case isFast(m.PGN) && n <= 223:
		frames := make([]Frame, 0, 1+(n+0)/7)
		first := make([]byte, 8)
		for i := range first {
			first[i] = 0xff
		}
		first[0], first[1] = (seq&7)<<5, byte(n)
		copy(first[2:], m.Data)
		frames = append(frames, Frame{ID: m.ID(), Data: first, Time: m.Time})
		for i, off := 1, 6; off < n; i, off = i+1, off+7 {
			d := []byte{(seq&7)<<5 | byte(i), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
			copy(d[1:], m.Data[off:])
			frames = append(frames, Frame{ID: m.ID(), Data: d, Time: m.Time})
		}
		return frames
	case n <= 8:
		return []Frame{{ID: m.ID(), Data: append([]byte(nil), m.Data...), Time: m.Time}}
	case n <= 1785:
		packets := (n + 6) / 7
		cm := Header{Prio: 7, PGN: PGNTPCM, Src: m.Src, Dst: 255}
		dt := Header{Prio: 7, PGN: PGNTPDT, Src: m.Src, Dst: 255}
		frames := []Frame{{ID: cm.ID(), Time: m.Time, Data: []byte{tpBAM, byte(n), byte(n >> 8), byte(packets), 0xff,
			byte(m.PGN), byte(m.PGN >> 8), byte(m.PGN >> 16)}}}
		for i := 0; i < packets; i++ {
			d := []byte{byte(i + 1), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
			copy(d[1:], m.Data[i*7:])
			frames = append(frames, Frame{ID: dt.ID(), Data: d, Time: m.Time})
		}
		return frames
	}
	return nil
}
