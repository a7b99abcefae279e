// Package node is the plugin's presence on the NMEA 2000 bus as ISO 11783-5 asks of a
// sender: it claims an address (PGN 60928) with its NAME, defends it against a claim with a
// higher NAME, moves to another address when a lower NAME takes it (or sends "cannot claim"
// from 254 when none is left), answers ISO requests (59904) for the address claim, product
// information (126996) and the PGN list (126464), refuses others with a NAK (59392) when
// asked directly, and sends the heartbeat (126993). Pure logic: the caller sends the
// messages it returns and tells it the time.
package node

import (
	"time"

	"devhost/plugins/n2k/decode"
)

// States of the claim.
const (
	StateIdle     = "idle"     // not started
	StateClaiming = "claiming" // claim sent, waiting out the 250 ms for objections
	StateClaimed  = "claimed"  // the address is ours
	StateLost     = "lost"     // no address left: "cannot claim" sent from 254
)

// ClaimWait is how long a claim must stand unopposed before the address is used.
const ClaimWait = 250 * time.Millisecond

// HeartbeatEvery is the heartbeat period (126993).
const HeartbeatEvery = 60 * time.Second

// Name is an ISO 11783 NAME (the 64 bits of PGN 60928's data, little-endian).
type Name uint64

// NewName packs the NAME fields: a 21-bit unique number, an 11-bit manufacturer code, the
// device instance, function and class, the system instance, the industry group and the
// arbitrary-address-capable bit.
func NewName(unique uint32, manufacturer uint16, devInstance, function, class, sysInstance, industry uint8) Name {
	return Name(uint64(unique&0x1fffff) | uint64(manufacturer&0x7ff)<<21 | uint64(devInstance)<<32 |
		uint64(function)<<40 | uint64(class&0x7f)<<49 | uint64(sysInstance&0xf)<<56 | uint64(industry&7)<<60 | 1<<63)
}

// Bytes answers the NAME as PGN 60928's data.
func (n Name) Bytes() []byte {
	b := make([]byte, 8)
	for i := range b {
		b[i] = byte(n >> (8 * i))
	}
	return b
}

func nameOf(data []byte) Name {
	var n Name
	for i := 7; i >= 0; i-- {
		n = n<<8 | Name(data[i])
	}
	return n
}

// Product is what 126996 reports.
type Product struct {
	Code            float64
	Model           string
	SoftwareVersion string
	ModelVersion    string
	Serial          string
}

// Node is one claimed (or claiming) address. Not safe for concurrent use.
type Node struct {
	Name      Name
	Product   Product
	Transmit  []uint32 // PGNs sent, for 126464
	Receive   []uint32 // PGNs taken, for 126464
	state     string
	addr      uint8
	since     time.Duration // when the current claim was sent
	taken     map[uint8]Name
	heartbeat uint8
}

// State answers the claim's state and the address (valid when claimed).
func (n *Node) State() (string, uint8) {
	if n.state == "" {
		return StateIdle, 0
	}
	return n.state, n.addr
}

func (n *Node) claimMsg(src uint8) decode.Message {
	return decode.Message{Header: decode.Header{Prio: 6, PGN: 60928, Src: src, Dst: 255}, Data: n.Name.Bytes()}
}

// Start claims preferred (0..251) at time now.
func (n *Node) Start(preferred uint8, now time.Duration) []decode.Message {
	if n.taken == nil {
		n.taken = map[uint8]Name{}
	}
	if preferred > 251 {
		preferred = 0
	}
	n.addr = preferred
	return n.claim(now)
}

func (n *Node) claim(now time.Duration) []decode.Message {
	// Skip addresses a lower NAME holds.
	for i := 0; i < 252; i++ {
		if other, ok := n.taken[n.addr]; !ok || other > n.Name {
			n.state, n.since = StateClaiming, now
			return []decode.Message{n.claimMsg(n.addr)}
		}
		n.addr = uint8((int(n.addr) + 1) % 252)
	}
	n.state = StateLost
	return []decode.Message{n.claimMsg(254)}
}

// Tick moves a claim that stood for ClaimWait to claimed, and answers whether it did.
func (n *Node) Tick(now time.Duration) bool {
	if n.state == StateClaiming && now-n.since >= ClaimWait {
		n.state = StateClaimed
		return true
	}
	return false
}

// Usable reports whether the node may send other messages from its address.
func (n *Node) Usable() bool { return n.state == StateClaimed }

// Address answers the claimed address.
func (n *Node) Address() (uint8, bool) { return n.addr, n.state == StateClaimed }

// Heartbeat answers the next heartbeat (126993), or nothing without an address.
func (n *Node) Heartbeat() []decode.Message {
	if !n.Usable() {
		return nil
	}
	data, err := decode.Encode(126993, map[string]any{"dataTransmitOffset": HeartbeatEvery.Seconds(),
		"sequenceCounter": float64(n.heartbeat), "controller1State": 0.0, "controller2State": 0.0, "equipmentStatus": 0.0})
	if err != nil {
		return nil
	}
	n.heartbeat = (n.heartbeat + 1) % 253
	return []decode.Message{{Header: decode.Header{Prio: 7, PGN: 126993, Src: n.addr, Dst: 255}, Data: data}}
}

// Message takes a message from the bus at time now and answers what the node sends back.
func (n *Node) Message(m decode.Message, now time.Duration) []decode.Message {
	if n.state == "" || n.state == StateIdle {
		return nil
	}
	switch m.PGN {
	case 60928:
		if len(m.Data) < 8 || m.Src > 253 {
			return nil
		}
		other := nameOf(m.Data)
		if other == n.Name {
			return nil // our own claim, echoed
		}
		n.taken[m.Src] = other
		if m.Src != n.addr || n.state == StateLost {
			return nil
		}
		if n.Name < other {
			return []decode.Message{n.claimMsg(n.addr)} // ours wins: defend
		}
		n.addr = uint8((int(n.addr) + 1) % 252)
		return n.claim(now)
	case 59904:
		if len(m.Data) < 3 || m.Dst != 255 && (m.Dst != n.addr || n.state == StateLost) {
			return nil
		}
		return n.request(uint32(m.Data[0])|uint32(m.Data[1])<<8|uint32(m.Data[2])<<16, m)
	}
	return nil
}

// request answers an ISO request.
func (n *Node) request(p uint32, m decode.Message) []decode.Message {
	if p == 60928 {
		if n.state == StateLost {
			return []decode.Message{n.claimMsg(254)}
		}
		return []decode.Message{n.claimMsg(n.addr)}
	}
	if !n.Usable() {
		return nil
	}
	var data []byte
	var err error
	switch p {
	case 126996:
		data, err = decode.Encode(126996, map[string]any{"nmea2000Version": 2.1, "productCode": n.Product.Code,
			"modelId": n.Product.Model, "softwareVersionCode": n.Product.SoftwareVersion,
			"modelVersion": n.Product.ModelVersion, "modelSerialCode": n.Product.Serial,
			"certificationLevel": 0.0, "loadEquivalency": 1.0})
		if err == nil {
			return []decode.Message{{Header: decode.Header{Prio: 6, PGN: 126996, Src: n.addr, Dst: 255}, Data: data}}
		}
	case 126464:
		var out []decode.Message
		for code, list := range [][]uint32{n.Transmit, n.Receive} {
			group := make([]map[string]any, 0, len(list))
			for _, q := range list {
				group = append(group, map[string]any{"pgn": float64(q)})
			}
			data, err = decode.Encode(126464, map[string]any{"functionCode": float64(code), "list": group})
			if err != nil {
				return nil
			}
			out = append(out, decode.Message{Header: decode.Header{Prio: 6, PGN: 126464, Src: n.addr, Dst: 255}, Data: data})
		}
		return out
	}
	if m.Dst != n.addr {
		return nil // a broadcast request for something else: no answer
	}
	// NAK: control 1, group function 255, the PGN asked for.
	nak := []byte{1, 0xff, 0xff, 0xff, 0xff, byte(p), byte(p >> 8), byte(p >> 16)}
	return []decode.Message{{Header: decode.Header{Prio: 6, PGN: 59392, Src: n.addr, Dst: m.Src}, Data: nak}}
}
