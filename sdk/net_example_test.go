//go:build !wasip1

package sdk_test

import (
	"fmt"
	"strings"

	"devhost/abi"
	"devhost/sdk"
)

// Network: a TCP connection to a gateway, its bytes and its end; the plugin dials again
// (from a timer, in a real plugin) after a drop.
func ExampleNetDial() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapNetClient)}
	var id uint32
	_ = h.Start(&sdk.Plugin{
		OnInit:     func(sdk.Info) (err error) { id, err = sdk.NetDial("192.168.1.50", 1457); return err },
		OnNetData:  func(_ uint32, b []byte) { fmt.Printf("got %q\n", b) },
		OnNetState: func(s sdk.NetState) { fmt.Println(strings.TrimSpace(s.State.String() + " " + s.Reason)) },
	})
	_ = h.NetOpen(id)
	fmt.Println(sdk.NetSend(id, []byte("09F80100 01 02\r\n")))
	_ = h.NetData(id, []byte("16:29:27.082 R 09F8017F 50 C3\r\n"))
	_ = h.NetDrop(id, "closed by the peer")
	// Output:
	// open
	// <nil>
	// got "16:29:27.082 R 09F8017F 50 C3\r\n"
	// closed closed by the peer
}
