// Command loop is a test plugin that spins forever in every dev_event call: the host's time
// limit per call must stop it (the instance is then discarded and the plugin restarted with
// backoff) while the host keeps answering HTTP. Its init arms timer 1 (10 ms) so a host
// granting timer reaches the loop by itself; GET /loop/spin reaches it too.
package main

import "devhost/plugins/testdata/internal/fault"

var sink int

func spin() {
	for i := 0; ; i++ {
		sink = i
	}
}

func init() { fault.Register(spin) }

func main() {}
