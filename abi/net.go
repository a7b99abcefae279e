package abi

import (
	"fmt"
	"strings"
)

// Limits of the net.client capability (minor 2). The host holds at most MaxNetInflight
// received bytes of a socket that the plugin has not yet been handed: it reads again only
// as the plugin's batches take them, so a slow plugin slows the reads (TCP's flow control
// reaches the peer; the kernel drops UDP datagrams) and never makes the host buffer more.
const (
	MaxSockets     = 4        // sockets open at once per plugin instance
	MaxNetHost     = 253      // host name or address bytes
	MaxNetChunk    = 16 << 10 // bytes of one net_data event from a TCP stream
	MaxNetDatagram = 65507    // bytes of one UDP datagram, either way
	MaxNetInflight = 64 << 10 // received bytes per socket queued for the plugin
	MaxNetSendBuf  = 64 << 10 // bytes per TCP socket waiting to be written
	NetDialMs      = 10000    // a TCP connection not made by then is closed
	MinNetPort     = 1024     // lowest local UDP port a plugin may bind (0 takes any free one)
	MaxNetReason   = 256      // bytes of a closed event's reason
	netMaxPort     = 65535
)

// NetProto is a socket's transport.
type NetProto uint8

// Transports of net_open.
const (
	NetTCP NetProto = 0 // an outbound TCP connection to host:port
	NetUDP NetProto = 1 // a UDP socket bound to LocalPort on every address
)

// NetOpen is the net_open input: u8 proto, str host, u32 port, u32 local_port.
//
// TCP: connects to Host:Port (a name is resolved by the device); the connection's outcome
// arrives as a net_state event. LocalPort must be 0.
//
// UDP: binds LocalPort (0 or MinNetPort..65535) on every address of the device, so
// broadcasts to that port arrive; datagrams from any sender arrive as net_data events.
// Host and Port, when set, are where net_send sends; without them the socket only receives.
type NetOpen struct {
	Proto     NetProto
	Host      string
	Port      uint32
	LocalPort uint32
}

// AppendNetOpen encodes a NetOpen.
func AppendNetOpen(b []byte, o NetOpen) []byte {
	b = append(b, byte(o.Proto))
	b = appendStr(b, o.Host)
	b = appendU32(b, o.Port)
	return appendU32(b, o.LocalPort)
}

// DecodeNetOpen decodes a NetOpen and checks its rules.
func DecodeNetOpen(b []byte) (NetOpen, error) {
	r := reader{b: b}
	o := NetOpen{Proto: NetProto(r.u8()), Host: r.str(MaxNetHost, "host"), Port: r.u32(), LocalPort: r.u32()}
	if err := r.end(); err != nil {
		return NetOpen{}, err
	}
	if err := o.Check(); err != nil {
		return NetOpen{}, err
	}
	return o, nil
}

// Check applies net_open's rules (ErrInvalid).
func (o NetOpen) Check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("abi: net_open: "+format+": %w", append(args, ErrInvalid)...)
	}
	if strings.ContainsAny(o.Host, " \t\r\n/[]@") {
		return bad("host %q", o.Host)
	}
	switch o.Proto {
	case NetTCP:
		if o.Host == "" || o.Port == 0 || o.Port > netMaxPort {
			return bad("tcp needs a host and a port 1..65535")
		}
		if o.LocalPort != 0 {
			return bad("tcp takes no local port")
		}
	case NetUDP:
		if o.LocalPort != 0 && (o.LocalPort < MinNetPort || o.LocalPort > netMaxPort) {
			return bad("local port %d: 0 or %d..65535", o.LocalPort, MinNetPort)
		}
		if (o.Host == "") != (o.Port == 0) || o.Port > netMaxPort {
			return bad("udp destination: a host and a port 1..65535, or neither")
		}
	default:
		return bad("proto %d", o.Proto)
	}
	return nil
}

// NetData is the net_send input and the net_data event's payload: u32 id, str data. A TCP
// stream's bytes come in chunks of at most MaxNetChunk, cut anywhere (a line may span two
// events); a UDP socket's events carry one datagram each.
type NetData struct {
	ID   uint32
	Data []byte
}

// AppendNetData encodes a NetData.
func AppendNetData(b []byte, d NetData) []byte {
	b = appendU32(b, d.ID)
	return appendBytes(b, d.Data)
}

// DecodeNetData decodes a NetData (Data aliases b).
func DecodeNetData(b []byte) (NetData, error) {
	r := reader{b: b}
	d := NetData{ID: r.u32()}
	d.Data = r.bytes(MaxNetDatagram, "net data")
	return done(&r, d)
}

// NetStateKind says what happened to a socket.
type NetStateKind uint8

// Socket states of the net_state event.
const (
	// NetOpened: the TCP connection is made, or the UDP socket is bound.
	NetOpened NetStateKind = 0
	// NetClosed: the socket is gone (the connection failed, the peer closed it, a read or
	// write failed); Reason says why. Its id is unknown afterwards.
	NetClosed NetStateKind = 1
)

func (k NetStateKind) String() string {
	if k == NetOpened {
		return "open"
	}
	return "closed"
}

// NetState is the net_state event's payload: u32 id, u8 state, str reason.
type NetState struct {
	ID     uint32
	State  NetStateKind
	Reason string // why it closed ("" when open), at most MaxNetReason bytes
}

// AppendNetState encodes a NetState.
func AppendNetState(b []byte, s NetState) []byte {
	return appendStr(append(appendU32(b, s.ID), byte(s.State)), s.Reason)
}

// DecodeNetState decodes a NetState.
func DecodeNetState(b []byte) (NetState, error) {
	r := reader{b: b}
	s := NetState{ID: r.u32(), State: NetStateKind(r.u8()), Reason: r.str(MaxNetReason, "reason")}
	if err := r.end(); err != nil {
		return NetState{}, err
	}
	if s.State > NetClosed {
		return NetState{}, fmt.Errorf("abi: net state %d", s.State)
	}
	return s, nil
}
