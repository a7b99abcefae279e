package input

import "devhost/plugins/n2k/pgn"

func isFast(p uint32) bool { return pgn.IsFast(p) }
