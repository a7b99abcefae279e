package sdk

import (
	"fmt"

	"devhost/abi"
)

// NetState is what happened to a socket: State is abi.NetOpened (the TCP connection is made,
// the UDP socket bound) or abi.NetClosed with the Reason (the connection failed or ended; the
// socket's id is unknown afterwards, the plugin opens a new one to try again).
type NetState = abi.NetState

// Socket states.
const (
	NetOpened = abi.NetOpened
	NetClosed = abi.NetClosed
)

// NetDial opens a TCP connection to host:port and returns its id at once; the outcome comes
// to OnNetState, the received bytes to OnNetData in chunks cut anywhere (a line may span two
// chunks). ErrLimit when the plugin has 4 sockets open. Needs net.client (ABI minor 2).
func NetDial(host string, port int) (uint32, error) {
	if port < 1 || port > 65535 {
		return 0, fmt.Errorf("sdk: net dial: port %d: %w", port, ErrInvalid)
	}
	return netOpen(abi.NetOpen{Proto: abi.NetTCP, Host: host, Port: uint32(port)})
}

// NetListenUDP binds UDP localPort (0: any free port, else 1024..65535) on every address of
// the device, so broadcasts to it arrive too; each datagram comes to OnNetData. With a host
// and a port NetSend sends datagrams there; with "" and 0 the socket only receives.
// ErrConflict when the port is taken. Needs net.client (ABI minor 2).
func NetListenUDP(localPort int, host string, port int) (uint32, error) {
	if localPort < 0 || localPort > 65535 || port < 0 || port > 65535 {
		return 0, fmt.Errorf("sdk: net udp: port: %w", ErrInvalid)
	}
	return netOpen(abi.NetOpen{Proto: abi.NetUDP, Host: host, Port: uint32(port), LocalPort: uint32(localPort)})
}

func netOpen(o abi.NetOpen) (uint32, error) {
	rc := callIn(abi.FnNetOpen, abi.AppendNetOpen(nil, o))
	if rc < 0 {
		return 0, hostErr("net open", rc)
	}
	return uint32(rc), nil
}

// NetSend sends b on socket id: a TCP connection queues it (ErrBusy when 64 KiB wait to be
// written, ErrState before the connection is made), a UDP socket sends one datagram.
func NetSend(id uint32, b []byte) error {
	return hostErr("net send", callIn(abi.FnNetSend, abi.AppendNetData(nil, abi.NetData{ID: id, Data: b})))
}

// NetClose closes socket id; no net_state event follows (bytes it had already received may
// still come to OnNetData in the next batch). ErrNotFound for an id already closed.
func NetClose(id uint32) error {
	return hostErr("net close", callArgs(abi.FnNetClose, int32(id), 0))
}

// handleNet hands a net_data or net_state event to the plugin's handler.
func handleNet(p *Plugin, ev abi.Event) error {
	if ev.Kind == abi.EvNetData {
		d, err := abi.DecodeNetData(ev.Data)
		if err == nil && p.OnNetData != nil {
			p.OnNetData(d.ID, d.Data)
		}
		return err
	}
	st, err := abi.DecodeNetState(ev.Data)
	if err == nil && p.OnNetState != nil {
		p.OnNetState(st)
	}
	return err
}
