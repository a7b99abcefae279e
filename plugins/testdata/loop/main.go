// Command loop is a test plugin that spins forever in every dev_event call: the host's time
// limit per call must stop it (the instance is then discarded and the plugin restarted with
// backoff) while the host keeps answering HTTP. Its init arms timer 1 (10 ms) so a host
// granting timer reaches the loop by itself; GET /loop/spin reaches it too.
package main

import (
	"time"

	"devhost/sdk"
)

var sink int

func spin() {
	for i := 0; ; i++ {
		sink = i
	}
}

func init() {
	sdk.Register(&sdk.Plugin{
		OnInit: func(sdk.Info) error {
			if sdk.Granted("timer") {
				return sdk.SetTimer(1, 10*time.Millisecond, 0)
			}
			return nil
		},
		OnTimer: func(uint32) { spin() },
		OnHTTP:  func(*sdk.Request) sdk.Response { spin(); return sdk.Response{} },
	})
}

func main() {}
