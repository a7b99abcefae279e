//go:build !wasip1

package sdk

import (
	"fmt"

	"devhost/abi"
)

// FakeSocket is a socket the plugin opened on a FakeHost (net_open). The test plays the far
// side: NetOpen delivers the opened event, NetData received bytes, NetDrop the closed event.
type FakeSocket struct {
	Open   abi.NetOpen
	Opened bool     // the opened event was delivered
	Sent   [][]byte // what the plugin sent, one entry per net_send
}

// netIn plays net_open and net_send with the device's rules: at most abi.MaxSockets, a TCP
// connection takes data once open and at most abi.MaxNetSendBuf at a time, a UDP socket needs
// a destination.
func (h *FakeHost) netIn(fn string, b []byte) int32 {
	if fn == abi.FnNetOpen {
		o, err := abi.DecodeNetOpen(b)
		if err != nil {
			return int32(abi.ErrInvalid)
		}
		if len(h.Sockets) >= abi.MaxSockets {
			return int32(abi.ErrLimit)
		}
		h.nextID++
		h.Sockets[h.nextID] = &FakeSocket{Open: o}
		return int32(h.nextID)
	}
	d, err := abi.DecodeNetData(b)
	if err != nil {
		return int32(abi.ErrInvalid)
	}
	s := h.Sockets[d.ID]
	switch {
	case s == nil:
		return int32(abi.ErrNotFound)
	case s.Open.Proto == abi.NetTCP && !s.Opened, s.Open.Proto == abi.NetUDP && s.Open.Host == "":
		return int32(abi.ErrState)
	case s.Open.Proto == abi.NetTCP && len(d.Data) > abi.MaxNetSendBuf:
		return int32(abi.ErrBusy)
	}
	s.Sent = append(s.Sent, append([]byte(nil), d.Data...))
	return int32(len(d.Data))
}

func (h *FakeHost) socket(id uint32) (*FakeSocket, error) {
	s := h.Sockets[id]
	if s == nil {
		return nil, fmt.Errorf("sdk: fake host: no socket %d", id)
	}
	return s, nil
}

// NetOpen makes socket id's connection (or binding) and delivers the opened event.
func (h *FakeHost) NetOpen(id uint32) error {
	s, err := h.socket(id)
	if err != nil {
		return err
	}
	s.Opened = true
	return h.deliver(abi.Event{Kind: abi.EvNetState, Data: abi.AppendNetState(nil, abi.NetState{ID: id, State: abi.NetOpened})})
}

// NetData delivers bytes received on socket id, in one event.
func (h *FakeHost) NetData(id uint32, b []byte) error {
	if _, err := h.socket(id); err != nil {
		return err
	}
	return h.deliver(abi.Event{Kind: abi.EvNetData, Data: abi.AppendNetData(nil, abi.NetData{ID: id, Data: b})})
}

// NetDrop ends socket id (a refused or failed connection, a peer that closed) and delivers
// the closed event with reason; the id is unknown afterwards.
func (h *FakeHost) NetDrop(id uint32, reason string) error {
	if _, err := h.socket(id); err != nil {
		return err
	}
	delete(h.Sockets, id)
	return h.deliver(abi.Event{Kind: abi.EvNetState, Data: abi.AppendNetState(nil, abi.NetState{ID: id, State: abi.NetClosed, Reason: reason})})
}
