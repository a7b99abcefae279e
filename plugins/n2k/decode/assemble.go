package decode

import (
	"errors"
	"fmt"
)

// Frame is one CAN frame with a 29-bit identifier.
type Frame struct {
	ID   uint32
	Data []byte
	Time string // RFC 3339 from the log, "" when none
}

// Errors of Assembler.Add; each names a kind the plugin counts.
var (
	ErrBadFrame   = errors.New("bad frame")        // identifier over 29 bits, length over 8
	ErrFastPacket = errors.New("bad fast-packet")  // restarted, impossible length or frame
	ErrFastLost   = errors.New("fast-packet lost") // a message left incomplete
	ErrTransport  = errors.New("bad transport")    // TP.DT outside a session, bad TP.CM
	ErrTransLost  = errors.New("transport lost")   // a session left incomplete
)

// Transport-protocol PGNs (ISO 11783-3).
const (
	PGNTPCM = 60416 // connection management
	PGNTPDT = 60160 // data transfer
)

// IsFastFunc tells whether a PGN travels as fast-packet; the default asks the database.
type IsFastFunc func(pgn uint32) bool

// Assembler turns frames into whole messages: single frames pass through, fast-packets are
// reassembled per source, PGN and sequence counter (frames may arrive in any order, several
// senders and sequences interleaved), transport-protocol sessions per source and
// destination. It is not safe for concurrent use.
type Assembler struct {
	IsFast IsFastFunc
	fast   map[fastKey]*fastMsg
	tp     map[tpKey]*tpSession
	// Inside the sandbox every allocation costs the plugin about a microsecond (its
	// collector runs in the same calls): the message answered, its data and the partial
	// fast-packets are reused.
	msg  Message
	data []byte
	free []*fastMsg
}

// fastKey is a partial fast-packet's source, PGN and sequence counter in one integer: a
// map keyed by an integer hashes it with a few instructions, a struct's fields one by one.
type fastKey uint64

func newFastKey(src uint8, pgn uint32, seq uint8) fastKey {
	return fastKey(uint64(src)<<40 | uint64(pgn)<<8 | uint64(seq))
}

func (k fastKey) src() uint8  { return uint8(k >> 40) }
func (k fastKey) pgn() uint32 { return uint32(k >> 8) }

type fastMsg struct {
	prio  uint8
	dst   uint8
	size  int
	have  uint32 // bit i: frame i received
	need  uint32
	data  []byte
	first bool // frame 0 seen
	age   int  // messages completed on this source since the start
}

type tpKey struct{ src, dst uint8 }

type tpSession struct {
	pgn     uint32
	prio    uint8
	size    int
	packets int
	got     []bool
	data    []byte
	count   int
}

// NewAssembler answers an Assembler using the PGN database to recognise fast-packets.
func NewAssembler() *Assembler {
	return &Assembler{fast: map[fastKey]*fastMsg{}, tp: map[tpKey]*tpSession{}}
}

// maxFastPending bounds the partial fast-packets kept at once; the oldest are dropped.
const maxFastPending = 256

// Add takes one frame and answers the whole message it completes, if any. An error names a
// bad frame or a message that had to be dropped; Add never panics on any input. The
// message answered, a fast-packet's Data included, is the Assembler's own until the next
// Add (copy it to keep it); a single frame's Data is the frame's own.
func (a *Assembler) Add(f Frame) (*Message, error) {
	if f.ID >= 1<<29 || len(f.Data) > 8 {
		return nil, fmt.Errorf("id %#x length %d: %w", f.ID, len(f.Data), ErrBadFrame)
	}
	h := ParseID(f.ID)
	switch h.PGN {
	case PGNTPCM:
		return a.tpCM(h, f)
	case PGNTPDT:
		return a.tpDT(h, f)
	}
	isFast := a.IsFast
	if isFast == nil {
		isFast = defaultIsFast
	}
	if !isFast(h.PGN) {
		a.msg = Message{Header: h, Time: f.Time, Data: f.Data[:len(f.Data):len(f.Data)]}
		return &a.msg, nil
	}
	return a.fastFrame(h, f)
}

func (a *Assembler) fastFrame(h Header, f Frame) (*Message, error) {
	if len(f.Data) < 2 {
		return nil, fmt.Errorf("pgn %d from %d: %d bytes: %w", h.PGN, h.Src, len(f.Data), ErrFastPacket)
	}
	seq, idx := f.Data[0]>>5, int(f.Data[0]&0x1f)
	k := newFastKey(h.Src, h.PGN, seq)
	m := a.fast[k]
	var err error
	if m == nil {
		if len(a.fast) >= maxFastPending {
			err = a.evictOne()
		}
		if n := len(a.free); n > 0 {
			m, a.free = a.free[n-1], a.free[:n-1]
		} else {
			m = &fastMsg{data: make([]byte, 0, 223)}
		}
		a.fast[k] = m
	}
	if idx == 0 {
		size := int(f.Data[1])
		if m.first {
			// The sequence counter came round while the last message was incomplete.
			err = fmt.Errorf("pgn %d from %d restarted: %w", h.PGN, h.Src, ErrFastLost)
			*m = fastMsg{data: m.data[:0]}
		}
		if size == 0 || size > 223 {
			delete(a.fast, k)
			return nil, fmt.Errorf("pgn %d from %d: length %d: %w", h.PGN, h.Src, size, ErrFastPacket)
		}
		m.first, m.size, m.prio, m.dst = true, size, h.Prio, h.Dst
		frames := 1
		if size > 6 {
			frames += (size - 6 + 6) / 7
		}
		m.need = 1<<frames - 1
		// Frames that came before frame 0 beyond the end are dropped.
		m.have &= m.need
		m.grow(size)
		copy(m.data[0:], f.Data[2:])
	} else {
		m.grow(6 + 7*idx)
		copy(m.data[6+7*(idx-1):], f.Data[1:])
	}
	if m.first && idx > 0 && m.need&(1<<idx) == 0 {
		delete(a.fast, k)
		return nil, fmt.Errorf("pgn %d from %d: frame %d of %d bytes: %w", h.PGN, h.Src, idx, m.size, ErrFastPacket)
	}
	m.have |= 1 << idx
	if !m.first || m.have&m.need != m.need {
		return nil, err
	}
	delete(a.fast, k)
	if len(a.fast) > 0 && a.dropStale(h.Src, h.PGN, seq) && err == nil {
		err = fmt.Errorf("pgn %d from %d: message with missing frames dropped: %w", h.PGN, h.Src, ErrFastLost)
	}
	a.data = append(a.data[:0], m.data[:m.size]...)
	a.msg = Message{Header: Header{Prio: m.prio, PGN: h.PGN, Src: h.Src, Dst: m.dst}, Time: f.Time,
		Data: a.data[:m.size:m.size]}
	if len(a.free) < maxFastFree {
		*m = fastMsg{data: m.data[:0]}
		a.free = append(a.free, m)
	}
	return &a.msg, err
}

// maxFastFree bounds the completed fast-packet buffers kept for reuse.
const maxFastFree = 16

// grow makes data at least n bytes (frames may arrive before those in front of them).
func (m *fastMsg) grow(n int) {
	for len(m.data) < n {
		m.data = append(m.data, 0xff)
	}
}

// dropStale forgets partial messages of the same source and PGN whose sequence is more
// than one behind the one just completed: their missing frames will not come.
func (a *Assembler) dropStale(src uint8, p uint32, seq uint8) bool {
	dropped := false
	for s := uint8(0); s < 8; s++ {
		if s == seq || s == (seq+1)&7 {
			continue
		}
		k := newFastKey(src, p, s)
		if m, ok := a.fast[k]; ok {
			m.age++
			if m.age > 2 {
				delete(a.fast, k)
				dropped = true
			}
		}
	}
	return dropped
}

func (a *Assembler) evictOne() error {
	for k := range a.fast {
		delete(a.fast, k)
		return fmt.Errorf("pgn %d from %d: too many partial messages: %w", k.pgn(), k.src(), ErrFastLost)
	}
	return nil
}

// Transport protocol: TP.CM control bytes.
const (
	tpRTS   = 16
	tpCTS   = 17
	tpEOM   = 19
	tpBAM   = 32
	tpAbort = 255
)

func (a *Assembler) tpCM(h Header, f Frame) (*Message, error) {
	if len(f.Data) < 8 {
		return nil, fmt.Errorf("TP.CM from %d: %d bytes: %w", h.Src, len(f.Data), ErrTransport)
	}
	k := tpKey{h.Src, h.Dst}
	switch f.Data[0] {
	case tpRTS, tpBAM:
		size := int(f.Data[1]) | int(f.Data[2])<<8
		packets := int(f.Data[3])
		p := uint32(f.Data[5]) | uint32(f.Data[6])<<8 | uint32(f.Data[7])<<16
		if size < 9 || size > 1785 || packets == 0 || packets != (size+6)/7 {
			return nil, fmt.Errorf("TP.CM from %d: %d bytes in %d packets: %w", h.Src, size, packets, ErrTransport)
		}
		var err error
		if _, ok := a.tp[k]; ok {
			err = fmt.Errorf("TP from %d to %d restarted: %w", h.Src, h.Dst, ErrTransLost)
		}
		a.tp[k] = &tpSession{pgn: p, prio: h.Prio, size: size, packets: packets,
			got: make([]bool, packets), data: make([]byte, packets*7)}
		return nil, err
	case tpAbort:
		// An abort travels from either end of the session.
		delete(a.tp, k)
		delete(a.tp, tpKey{h.Dst, h.Src})
		return nil, nil
	case tpCTS, tpEOM:
		return nil, nil
	}
	return nil, fmt.Errorf("TP.CM from %d: control %d: %w", h.Src, f.Data[0], ErrTransport)
}

func (a *Assembler) tpDT(h Header, f Frame) (*Message, error) {
	s := a.tp[tpKey{h.Src, h.Dst}]
	if s == nil {
		return nil, fmt.Errorf("TP.DT from %d without a session: %w", h.Src, ErrTransport)
	}
	if len(f.Data) < 2 {
		return nil, fmt.Errorf("TP.DT from %d: %d bytes: %w", h.Src, len(f.Data), ErrTransport)
	}
	n := int(f.Data[0])
	if n < 1 || n > s.packets {
		return nil, fmt.Errorf("TP.DT from %d: packet %d of %d: %w", h.Src, n, s.packets, ErrTransport)
	}
	copy(s.data[(n-1)*7:], f.Data[1:])
	if !s.got[n-1] {
		s.got[n-1] = true
		s.count++
	}
	if s.count < s.packets {
		return nil, nil
	}
	delete(a.tp, tpKey{h.Src, h.Dst})
	a.msg = Message{Header: Header{Prio: s.prio, PGN: s.pgn, Src: h.Src, Dst: h.Dst}, Time: f.Time,
		Data: s.data[:s.size]}
	return &a.msg, nil
}

// Pending answers the partial messages held (fast-packets and transport sessions).
func (a *Assembler) Pending() int { return len(a.fast) + len(a.tp) }

func defaultIsFast(p uint32) bool { return isFastPGN(p) }
