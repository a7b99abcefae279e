// Command afterstop is a test plugin that keeps calling the host while the host stops it.
// Started, it arms timer 1 (10 ms); the timer event (or GET /afterstop/run) calls clock_now
// in a loop until an answer is plugin stopped (-10) or 5,000,000 calls passed, then tries
// once more to publish and to log, and returns. While that call runs the host stops the
// plugin: every host call made after the stop must answer plugin stopped and take no effect
// (no value published, no line logged). In its stop event it arms timer 99 and publishes
// afterstop.value = 1 (allowed during the stop call); timer 99 must never fire.
package main

import (
	"errors"
	"time"

	"devhost/sdk"
)

func run() {
	for i := 0; i < 5000000; i++ {
		if _, err := sdk.Now(); errors.Is(err, sdk.ErrStopped) {
			break
		}
	}
	_ = sdk.Publish("afterstop.value", 2)
	_ = sdk.Flush()
	_ = sdk.Log(sdk.LevelInfo, "afterstop: still running")
}

func init() {
	sdk.Register(&sdk.Plugin{
		OnInit:  func(sdk.Info) error { return sdk.SetTimer(1, 10*time.Millisecond, 0) },
		OnTimer: func(id uint32) { run() },
		OnHTTP:  func(*sdk.Request) sdk.Response { run(); return sdk.JSONResponse(200, map[string]bool{"done": true}) },
		OnStop: func() {
			_ = sdk.SetTimer(99, time.Millisecond, 0)
			_ = sdk.Publish("afterstop.value", 1)
		},
	})
}

func main() {}
