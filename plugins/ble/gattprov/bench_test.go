package gattprov

import (
	"testing"

	"devhost/host/board"
)

// BenchmarkHandshakeSec1 is the provisioning handshake over the simulated board's GATT
// peripheral at the default MTU of 23 (every message a long write and a long read): connect,
// discovery by user description, proto-ver, security 1, disconnect.
func BenchmarkHandshakeSec1(b *testing.B) {
	r := newRig(b)
	for b.Loop() {
		c, id := r.connect(b, board.DefaultMTU)
		if _, err := c.Version(); err != nil {
			b.Fatal(err)
		}
		if err := c.Handshake(); err != nil {
			b.Fatal(err)
		}
		if err := r.sim.CentralDisconnect(id); err != nil {
			b.Fatal(err)
		}
	}
}
