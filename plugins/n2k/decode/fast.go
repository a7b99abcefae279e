package decode

import "devhost/plugins/n2k/pgn"

// fastPGNs has a bit for every PGN the database sends as fast-packet, set once: the
// database is fixed. A bit set (PGNs have 18 bits: 32 KiB) is asked for every frame, where a
// map cost a hash of the PGN inside the sandbox.
var fastPGNs = func() *[1 << 18 / 64]uint64 {
	var set [1 << 18 / 64]uint64
	for _, d := range pgn.All() {
		if d.PGN < 1<<18 && pgn.IsFast(d.PGN) {
			set[d.PGN/64] |= 1 << (d.PGN % 64)
		}
	}
	return &set
}()

func isFastPGN(p uint32) bool { return p < 1<<18 && fastPGNs[p/64]&(1<<(p%64)) != 0 }
