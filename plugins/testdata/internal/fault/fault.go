// Package fault registers what the failure test plugins loop and memhog share: a fault that
// runs in every event call, reached by timer 1 (10 ms, armed at init when timer is granted,
// so a host granting timer reaches it by itself) and by any HTTP request.
package fault

import (
	"time"

	"devhost/sdk"
)

// Register makes run the plugin's handler for timer events and HTTP requests; run is not
// expected to return.
func Register(run func()) {
	sdk.Register(&sdk.Plugin{
		OnInit: func(sdk.Info) error {
			if sdk.Granted("timer") {
				return sdk.SetTimer(1, 10*time.Millisecond, 0)
			}
			return nil
		},
		OnTimer: func(uint32) { run() },
		OnHTTP:  func(*sdk.Request) sdk.Response { run(); return sdk.Response{} },
	})
}
