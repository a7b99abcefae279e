package device

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"testing"

	"devhost/abi"
	"devhost/host/board"
	"devhost/host/plugin"
)

// TestSimPeripheral: a plugin's service on the simulated board's peripheral role, played
// by a central: connection and MTU notices, discovery with the properties and descriptions,
// a long write assembled by the board and handed over whole, a read, the plugin's ATT error
// reaching the central, a notification, the scan response, the withdrawal.
func TestSimPeripheral(t *testing.T) {
	sim, err := board.NewSim(board.DefaultFile())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var notices []string
	written := map[int][]byte{}
	note := func(s string) { mu.Lock(); notices = append(notices, s); mu.Unlock() }
	svc := &plugin.PeripheralService{
		GATTService: abi.GATTService{UUID: "021a9004-0382-4aea-bff4-6b3f1c5adfb4", Chars: []abi.GATTChar{
			{UUID: "021aff51-0382-4aea-bff4-6b3f1c5adfb4", Props: abi.GATTPropRead | abi.GATTPropWrite, Description: "prov-session"},
			{UUID: "021aff52-0382-4aea-bff4-6b3f1c5adfb4", Props: abi.GATTPropNotify, Description: "note"}}},
		Connected:    func(int) { note("connect") },
		MTU:          func(_, mtu int) { note("mtu") },
		Disconnected: func(int) { note("disconnect") },
		Read: func(conn, char int) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			return written[conn], nil
		},
		Write: func(conn, char int, v []byte) error {
			if string(v) == "refuse" {
				return plugin.ATTError(0x80)
			}
			mu.Lock()
			defer mu.Unlock()
			written[conn] = bytes.Clone(v)
			return nil
		},
	}
	p := simPeripheral{sim}
	if err := p.Serve(svc); err != nil {
		t.Fatal(err)
	}
	if err := p.ScanResponse([]byte{5, 9, 'P', 'R', 'O', 'V'}); err != nil || string(sim.Radios().ScanResponse) != "\x05\x09PROV" {
		t.Fatalf("scan response %q, %v", sim.Radios().ScanResponse, err)
	}
	conn, err := sim.CentralConnect()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.CentralMTU(conn, 64); err != nil {
		t.Fatal(err)
	}
	svcs, err := sim.CentralDiscover(conn)
	if err != nil || len(svcs) != 1 || len(svcs[0].Chars) != 2 {
		t.Fatalf("discover %+v, %v", svcs, err)
	}
	rw, nt := svcs[0].Chars[0], svcs[0].Chars[1]
	if rw.Description != "prov-session" || len(rw.Properties) != 2 || nt.Properties[0] != "notify" {
		t.Errorf("characteristics %+v %+v", rw, nt)
	}
	long := bytes.Repeat([]byte("0123456789"), 20) // beyond the MTU: a prepared write
	for off := 0; off < len(long); off += 59 {
		if err := sim.CentralWrite(conn, rw.Handle, off, long[off:min(off+59, len(long))], true); err != nil {
			t.Fatal(err)
		}
	}
	if err := sim.CentralExecute(conn, true); err != nil {
		t.Fatal(err)
	}
	if v, err := sim.CentralRead(conn, rw.Handle, 0); err != nil || !bytes.Equal(v, long[:63]) {
		t.Errorf("read %q, %v", v, err)
	}
	var att *board.ATTError
	if err := sim.CentralWrite(conn, rw.Handle, 0, []byte("refuse"), false); !errors.As(err, &att) || att.Code != 0x80 {
		t.Errorf("refused write: %v", err)
	}
	if err := sim.CentralSubscribe(conn, nt.Handle, true); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Notify(1, []byte("hi")); err != nil || n != 1 {
		t.Errorf("notify %d, %v", n, err)
	}
	if _, err := p.Notify(0, []byte("hi")); !errors.Is(err, abi.ErrInvalid) {
		t.Errorf("notify of a characteristic without the property: %v", err)
	}
	if err := p.Serve(nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"connect", "mtu", "disconnect"}; !slices.Equal(notices, want) {
		t.Errorf("notices %v, want %v", notices, want)
	}
}

// TestPoP: 8 hex characters, per device, stable.
func TestPoP(t *testing.T) {
	a, b := popFromSecret([]byte("device one")), popFromSecret([]byte("device two"))
	if len(a) != 8 || a == b || a != popFromSecret([]byte("device one")) {
		t.Fatalf("PoPs %q %q", a, b)
	}
}

// TestFailureOf: the reasons a provisioning client tells apart.
func TestFailureOf(t *testing.T) {
	for code, want := range map[int]string{0: "", 201: "not_found", 2: "auth", 15: "auth", 202: "auth", 204: "auth", 8: ""} {
		if got := failureOf(code); got != want {
			t.Errorf("failureOf(%d) = %q, want %q", code, got, want)
		}
	}
}
