package socketcan

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"go.einride.tech/can"
	"go.einride.tech/can/pkg/socketcan"

	"devhost/host/board"
	"devhost/host/mdns/mdnstest"
)

// vcanIface is the virtual CAN interface the namespace tests create.
const vcanIface = "vcan0"

// vcan runs the calling top-level test in a network namespace of its own (mdnstest.Netns)
// holding an up vcan0, so that no frame touches a real bus. Where the kernel has no vcan
// driver (an unprivileged namespace cannot load the module) the test is skipped, saying so.
func vcan(t *testing.T) bool {
	t.Helper()
	if !mdnstest.Netns(t) {
		return false
	}
	for _, args := range [][]string{{"link", "add", vcanIface, "type", "vcan"}, {"link", "set", vcanIface, "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Skipf("no virtual CAN interface here: `ip %s` answered %v: %s (the kernel needs the vcan module: `modprobe vcan` as root on the host; a network namespace cannot load it)",
				strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	return true
}

func ipLink(t *testing.T, state string) {
	t.Helper()
	if out, err := exec.Command("ip", "link", "set", vcanIface, state).CombinedOutput(); err != nil {
		t.Fatalf("ip link set %s %s: %v: %s", vcanIface, state, err, out)
	}
}

func TestNetnsVcan(t *testing.T) {
	if !vcan(t) {
		return
	}
	b := runBus(t, Options{Iface: vcanIface})
	ctx := t.Context()

	// Another raw socket on the interface stands for the other devices on the bus.
	peer, err := socketcan.DialContext(ctx, "can", vcanIface)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	tx := socketcan.NewTransmitter(peer)
	got := make(collector, 64)
	if _, err := b.CANReceive(got.fn); err != nil {
		t.Fatal(err)
	}
	// sendUntil repeats f from the peer until the bus delivers a frame with its id (earlier
	// copies may still arrive later): the bus opens its socket, and opens it again after the
	// interface comes back, in its own time.
	sendUntil := func(f can.Frame) board.CANFrame {
		t.Helper()
		deadline := time.Now().Add(hangGuard)
		for time.Now().Before(deadline) {
			if err := tx.TransmitFrame(ctx, f); err != nil {
				t.Fatalf("peer send: %v", err)
			}
			repeat := time.After(50 * time.Millisecond)
			for waiting := true; waiting; {
				select {
				case r := <-got:
					if r.ID == f.ID {
						return r
					}
				case <-repeat:
					waiting = false
				}
			}
		}
		t.Fatalf("frame %v never arrived", f)
		return board.CANFrame{}
	}
	r := sendUntil(can.Frame{ID: 0x09f80123, IsExtended: true, Length: 8, Data: can.Data{1, 2, 3, 4, 5, 6, 7, 8}})
	if r.ID != 0x09f80123 || !r.Extended || !slices.Equal(r.Data, []byte{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Errorf("received %+v", r)
	}

	// The device's frames reach the peer: standard, extended and remote.
	rx := socketcan.NewReceiver(peer)
	for _, f := range []board.CANFrame{
		{ID: 0x123, Data: []byte{0xaa}},
		{ID: 0x18eaff00, Extended: true, Data: []byte{0x00, 0xee, 0x00}},
		{ID: 0x10, Remote: true},
	} {
		if err := b.CANSend(f); err != nil {
			t.Fatalf("CANSend %+v: %v", f, err)
		}
		if !rx.Receive() {
			t.Fatalf("peer read: %v", rx.Err())
		}
		pf := rx.Frame()
		if pf.ID != f.ID || pf.IsExtended != f.Extended || pf.IsRemote != f.Remote || !slices.Equal(pf.Data[:pf.Length], f.Data) && !f.Remote {
			t.Errorf("peer got %v for %+v", pf, f)
		}
	}

	// The interface goes down and up: the bus counts the failure and comes back on its own.
	ipLink(t, "down")
	ipLink(t, "up")
	// The peer's socket holds the same pending ENETDOWN; a fresh one stands for a peer that
	// came back with the interface.
	peer.Close()
	if peer, err = socketcan.DialContext(ctx, "can", vcanIface); err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	tx = socketcan.NewTransmitter(peer)
	if r := sendUntil(can.Frame{ID: 0x42, Length: 1, Data: can.Data{7}}); r.ID != 0x42 {
		t.Errorf("after down/up received %+v", r)
	}
	if st := b.Stats(); st.Errors < 1 || st.Opens < 2 {
		t.Errorf("stats %+v after the interface went down and up: want an error counted and a reopen", st)
	}
}
