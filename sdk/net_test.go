//go:build !wasip1

package sdk

import (
	"errors"
	"testing"

	"devhost/abi"
)

func TestNet(t *testing.T) {
	var got []string
	var states []NetState
	p := &Plugin{
		OnNetData:  func(id uint32, b []byte) { got = append(got, string(b)) },
		OnNetState: func(s NetState) { states = append(states, s) },
	}
	h := start(t, p, abi.CapNetClient)
	id, err := NetDial("gw.local", 1457)
	if err != nil || h.Sockets[id] == nil || h.Sockets[id].Open.Host != "gw.local" {
		t.Fatalf("dial: %d %v", id, err)
	}
	if err := NetSend(id, []byte("x")); !errors.Is(err, ErrState) {
		t.Fatalf("send before the connection is made: %v", err)
	}
	if err := h.NetOpen(id); err != nil {
		t.Fatal(err)
	}
	if err := NetSend(id, []byte("09F8027F 00\r\n")); err != nil || string(h.Sockets[id].Sent[0]) != "09F8027F 00\r\n" {
		t.Fatalf("send: %v", err)
	}
	if err := h.NetData(id, []byte("line one\r\nli")); err != nil {
		t.Fatal(err)
	}
	if err := h.NetDrop(id, "closed by the peer"); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "line one\r\nli" || len(states) != 2 || states[0].State != NetOpened ||
		states[1].State != NetClosed || states[1].Reason != "closed by the peer" {
		t.Fatalf("data %q states %+v", got, states)
	}
	if err := NetClose(id); !errors.Is(err, ErrNotFound) {
		t.Fatalf("close after the drop: %v", err)
	}
	if _, err := NetDial("h", 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("port 0: %v", err)
	}
	if _, err := NetListenUDP(80, "", 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("privileged port: %v", err)
	}
	for i := 0; i < abi.MaxSockets; i++ {
		if _, err := NetListenUDP(0, "", 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NetListenUDP(0, "", 0); !errors.Is(err, ErrLimit) {
		t.Fatalf("fifth socket: %v", err)
	}
	if err := h.Stop(); err != nil || len(h.Sockets) != 0 {
		t.Fatalf("stop: %v, %d sockets", err, len(h.Sockets))
	}
}
