package abi

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// netOpenCases are net_open inputs and whether the ABI takes them.
var netOpenCases = []struct {
	name string
	o    NetOpen
	ok   bool
}{
	{"tcp", NetOpen{Proto: NetTCP, Host: "192.168.1.50", Port: 1457}, true},
	{"tcp name", NetOpen{Proto: NetTCP, Host: "ydwg.local", Port: 1457}, true},
	{"tcp no host", NetOpen{Proto: NetTCP, Port: 1457}, false},
	{"tcp no port", NetOpen{Proto: NetTCP, Host: "a"}, false},
	{"tcp port too big", NetOpen{Proto: NetTCP, Host: "a", Port: 65536}, false},
	{"tcp local port", NetOpen{Proto: NetTCP, Host: "a", Port: 1, LocalPort: 2000}, false},
	{"tcp host with a path", NetOpen{Proto: NetTCP, Host: "a/b", Port: 1}, false},
	{"tcp host with a port", NetOpen{Proto: NetTCP, Host: "[::1]", Port: 1}, false},
	{"udp receive only", NetOpen{Proto: NetUDP, LocalPort: 1456}, true},
	{"udp any port", NetOpen{Proto: NetUDP}, true},
	{"udp with destination", NetOpen{Proto: NetUDP, Host: "10.0.0.2", Port: 1456, LocalPort: 1456}, true},
	{"udp privileged port", NetOpen{Proto: NetUDP, LocalPort: 53}, false},
	{"udp host without port", NetOpen{Proto: NetUDP, Host: "a", LocalPort: 1456}, false},
	{"udp port without host", NetOpen{Proto: NetUDP, Port: 1, LocalPort: 1456}, false},
	{"proto", NetOpen{Proto: 2, Host: "a", Port: 1}, false},
}

func TestNetOpenRules(t *testing.T) {
	for _, c := range netOpenCases {
		b := AppendNetOpen(nil, c.o)
		got, err := DecodeNetOpen(b)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: %v is not ErrInvalid", c.name, err)
			}
			continue
		}
		if got != c.o {
			t.Errorf("%s: round trip %+v", c.name, got)
		}
	}
	if _, err := DecodeNetOpen(append(AppendNetOpen(nil, NetOpen{Proto: NetUDP}), 0)); err == nil {
		t.Error("trailing byte accepted")
	}
	if _, err := DecodeNetOpen(AppendNetOpen(nil, NetOpen{Proto: NetTCP, Host: strings.Repeat("a", MaxNetHost+1), Port: 1})); err == nil {
		t.Error("long host accepted")
	}
}

func TestNetEventsRoundTrip(t *testing.T) {
	d := NetData{ID: 3, Data: []byte("00:00:01.000 R 09F8027F 00 FC\r\n")}
	got, err := DecodeNetData(AppendNetData(nil, d))
	if err != nil || got.ID != 3 || !bytes.Equal(got.Data, d.Data) {
		t.Fatalf("net data %+v %v", got, err)
	}
	if _, err := DecodeNetData(AppendNetData(nil, NetData{Data: make([]byte, MaxNetDatagram+1)})); err == nil {
		t.Error("oversized data accepted")
	}
	for _, s := range []NetState{{ID: 1, State: NetOpened}, {ID: 2, State: NetClosed, Reason: "connection refused"}} {
		got, err := DecodeNetState(AppendNetState(nil, s))
		if err != nil || got != s {
			t.Errorf("net state %+v: %+v %v", s, got, err)
		}
	}
	if _, err := DecodeNetState(AppendNetState(nil, NetState{State: 2})); err == nil {
		t.Error("state 2 accepted")
	}
	if NetOpened.String() != "open" || NetClosed.String() != "closed" || EvNetData.String() != "net_data" {
		t.Error("names")
	}
}

// FuzzNet feeds any bytes to the net decoders: an error or a value that encodes back to the
// same bytes, never a panic.
func FuzzNet(f *testing.F) {
	f.Add(uint8(0), AppendNetOpen(nil, NetOpen{Proto: NetTCP, Host: "h", Port: 1457}))
	f.Add(uint8(1), AppendNetData(nil, NetData{ID: 1, Data: []byte("x\n")}))
	f.Add(uint8(2), AppendNetState(nil, NetState{ID: 1, State: NetClosed, Reason: "eof"}))
	roundTrip := []func([]byte) ([]byte, error){
		func(b []byte) ([]byte, error) { v, err := DecodeNetOpen(b); return AppendNetOpen(nil, v), err },
		func(b []byte) ([]byte, error) { v, err := DecodeNetData(b); return AppendNetData(nil, v), err },
		func(b []byte) ([]byte, error) { v, err := DecodeNetState(b); return AppendNetState(nil, v), err },
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		again, err := roundTrip[int(which)%len(roundTrip)](b)
		if err != nil {
			return
		}
		if !bytes.Equal(again, b) {
			t.Fatalf("not canonical:\n% x\n% x", b, again)
		}
	})
}
