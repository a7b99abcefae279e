package decode

import "devhost/plugins/n2k/pgn"

// fastPGNs is every PGN the database sends as fast-packet, built once: the database is fixed.
var fastPGNs = func() map[uint32]bool {
	m := map[uint32]bool{}
	for _, d := range pgn.All() {
		if pgn.IsFast(d.PGN) {
			m[d.PGN] = true
		}
	}
	return m
}()

func isFastPGN(p uint32) bool { return fastPGNs[p] }
