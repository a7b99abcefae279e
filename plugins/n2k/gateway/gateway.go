// Package gateway is the NMEA 2000 to Signal K pipeline the plugin runs: frames are
// reassembled (package decode), decoded from canboat's database, mapped to Signal K deltas
// (package skmap) and counted. Whole messages from gateways that reassemble themselves
// enter after the reassembly. Pure Go, no I/O.
package gateway

import (
	"errors"
	"strconv"

	"devhost/plugins/n2k/decode"
	"devhost/plugins/n2k/skmap"
)

// Error kinds counted in Stats.Errors (the keys of the status document's errors object).
const (
	KindBadFrame    = "bad_frame"
	KindFastPacket  = "bad_fast_packet"
	KindFastLost    = "fast_packet_lost"
	KindTransport   = "bad_transport"
	KindTransLost   = "transport_lost"
	KindUnknownPGN  = "unknown_pgn"
	KindProprietary = "unknown_proprietary"
	KindBadLength   = "bad_length"
	KindBadLine     = "bad_line"
)

// Stats counts what went through.
type Stats struct {
	FramesIn uint64            `json:"frames_in"`
	Messages uint64            `json:"messages"`
	Deltas   uint64            `json:"deltas"`
	Errors   map[string]uint64 `json:"errors"`
	PGNs     map[string]uint64 `json:"pgns"`
}

// Device is a sender seen on the bus.
type Device struct {
	Address  uint8
	Name     string // NAME from the address claim, 16 hex digits; "" before one was seen
	Product  string // model id from product information (126996)
	LastSeen int64  // Now() at its last message
}

// Gateway is one pipeline. Not safe for concurrent use (the plugin calls it from its
// handler, one call at a time).
type Gateway struct {
	asm     *decode.Assembler
	decoded decode.Decoded // reused message after message (Map keeps nothing of it)
	mapper  *skmap.Mapper
	stats   Stats
	pgns    map[uint32]uint64
	// devices by address: an array, as a map keyed by a byte cost a hash of it for every
	// message inside the sandbox; seen counts them.
	devices [256]*Device
	seenN   int
	// Allow, when set, decides which PGNs are decoded (allow and deny lists).
	Allow func(pgn uint32) bool
	// Now, when set, stamps the devices seen (milliseconds of any monotonic clock).
	Now func() int64
	// OnMessage, when set, sees every whole message (the plugin's bus node answers them).
	OnMessage func(decode.Message)
}

// New answers an empty pipeline.
func New() *Gateway {
	return &Gateway{asm: decode.NewAssembler(), mapper: skmap.New(),
		pgns: map[uint32]uint64{}, stats: Stats{Errors: map[string]uint64{}}}
}

// Frame takes one CAN frame; now stamps deltas whose frame carries no time.
func (g *Gateway) Frame(f decode.Frame, now string) *skmap.Delta {
	g.stats.FramesIn++
	m, err := g.asm.Add(f)
	if err != nil {
		g.count(err)
	}
	if m == nil {
		return nil
	}
	return g.Message(*m, now)
}

// Message takes one whole message.
func (g *Gateway) Message(m decode.Message, now string) *skmap.Delta {
	g.stats.Messages++
	g.pgns[m.PGN]++
	g.seen(m)
	if g.OnMessage != nil {
		g.OnMessage(m)
	}
	if g.Allow != nil && !g.Allow(m.PGN) {
		return nil
	}
	if !skmap.Maps(m.PGN) && m.PGN != 126996 {
		return nil
	}
	d := &g.decoded
	err := decode.DecodeInto(m, d)
	if err != nil {
		g.count(err)
		return nil
	}
	if m.PGN == 126996 {
		if dev := g.devices[m.Src]; dev != nil {
			if s, ok := d.String("modelId"); ok {
				dev.Product = s
			}
		}
		return nil
	}
	if m.PGN == 60928 && len(m.Data) >= 8 {
		if dev := g.devices[m.Src]; dev != nil {
			dev.Name = nameHex(m.Data)
		}
	}
	delta := g.mapper.Map(d, m.Data, now)
	if delta != nil {
		g.stats.Deltas++
	}
	return delta
}

// CountBadLine counts a log or gateway line that did not parse.
func (g *Gateway) CountBadLine() { g.stats.Errors[KindBadLine]++ }

func (g *Gateway) seen(m decode.Message) {
	dev := g.devices[m.Src]
	if dev == nil {
		if g.seenN >= 254 && m.Src >= 254 {
			return
		}
		dev = &Device{Address: m.Src}
		g.devices[m.Src] = dev
		g.seenN++
	}
	if g.Now != nil {
		dev.LastSeen = g.Now()
	}
}

// errorKinds names the counter each decoder error bumps, the first match winning; an error
// matching none is a bad frame.
var errorKinds = [...]struct {
	err  error
	kind string
}{
	{decode.ErrFastPacket, KindFastPacket},
	{decode.ErrFastLost, KindFastLost},
	{decode.ErrTransport, KindTransport},
	{decode.ErrTransLost, KindTransLost},
	{decode.ErrUnknownPGN, KindUnknownPGN},
	{decode.ErrNoMatch, KindProprietary},
	{decode.ErrEmpty, KindBadLength},
}

func (g *Gateway) count(err error) {
	kind := KindBadFrame
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			kind = k.kind
			break
		}
	}
	g.stats.Errors[kind]++
}

// Stats answers a copy of the counters.
func (g *Gateway) Stats() Stats {
	s := g.stats
	s.Errors = make(map[string]uint64, len(g.stats.Errors))
	for k, v := range g.stats.Errors {
		s.Errors[k] = v
	}
	s.PGNs = make(map[string]uint64, len(g.pgns))
	for k, v := range g.pgns {
		s.PGNs[strconv.FormatUint(uint64(k), 10)] = v
	}
	return s
}

// Devices answers the senders seen, by address.
func (g *Gateway) Devices() []Device {
	out := make([]Device, 0, g.seenN)
	for _, d := range g.devices {
		if d != nil {
			out = append(out, *d)
		}
	}
	return out
}

func nameHex(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 16)
	for i := 0; i < 8; i++ {
		c := b[7-i]
		out[2*i], out[2*i+1] = digits[c>>4], digits[c&15]
	}
	return string(out)
}
