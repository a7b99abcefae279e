// Command memhog is a test plugin that allocates and keeps memory until the runtime dies in
// every dev_event call: the host's memory cap must turn that into a trap (instance discarded,
// failure counted, restart with backoff) without disturbing the host. Its init arms timer 1
// (10 ms); GET /memhog/eat reaches it too.
package main

import "devhost/plugins/testdata/internal/fault"

var hoard [][]byte

func eat() {
	for {
		b := make([]byte, 1<<20)
		for i := range b {
			b[i] = byte(i)
		}
		hoard = append(hoard, b)
	}
}

func init() { fault.Register(eat) }

func main() {}
