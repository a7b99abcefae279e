// Package decode turns NMEA 2000 traffic into decoded messages: the ISO 11783 CAN
// identifier, fast-packet reassembly, the ISO transport protocol (TP.CM/TP.DT, BAM and
// RTS/CTS sessions overheard) and the fields of each PGN from canboat's database (package
// pgn). It is pure Go without I/O, so the plugin runs it inside the Wasm sandbox.
//
// Field values follow canboat's conventions as the canboatjs decoder renders them, so that
// the Signal K mapping downstream sees the same values: numbers scaled by their resolution
// and rounded to its decimal places, lookups as their names, "data not available" and
// out-of-range values left out, dates as YYYY.MM.DD and times as HH:MM:SS[.fffff], energy
// in J and charge in C.
package decode

// Header is what the 29-bit identifier carries.
type Header struct {
	Prio uint8
	PGN  uint32
	Src  uint8
	Dst  uint8 // 255: broadcast
}

// ParseID splits an extended CAN identifier (ISO 11783-3): PDU1 formats (PF < 240) carry a
// destination and their PGN's low byte is zero; PDU2 formats are broadcast.
func ParseID(id uint32) Header {
	h := Header{Prio: uint8(id >> 26 & 7), Src: uint8(id)}
	pf := id >> 16 & 0xff
	ps := id >> 8 & 0xff
	dp := id >> 24 & 3 // data page and extended data page
	if pf < 240 {
		h.PGN = dp<<16 | pf<<8
		h.Dst = uint8(ps)
	} else {
		h.PGN = dp<<16 | pf<<8 | ps
		h.Dst = 255
	}
	return h
}

// ID builds the 29-bit identifier of h (the inverse of ParseID).
func (h Header) ID() uint32 {
	id := uint32(h.Prio&7)<<26 | uint32(h.Src)
	pf := h.PGN >> 8 & 0xff
	dp := h.PGN >> 16 & 3
	if pf < 240 {
		return id | dp<<24 | pf<<16 | uint32(h.Dst)<<8
	}
	return id | dp<<24 | pf<<16 | (h.PGN&0xff)<<8
}

// Message is one whole NMEA 2000 message: a single frame, a reassembled fast-packet or a
// transport-protocol transfer.
type Message struct {
	Header
	Time string // RFC 3339 time from the log, "" when the source carries none
	Data []byte
}
