// Command allcalls is a plugin that uses every SDK function, so its module imports every host
// function; the SDK's tests build it for wasip1 and check its imports and exports against the
// ABI.
package main

import (
	"time"

	"devhost/sdk"
)

func init() {
	sdk.Register(&sdk.Plugin{OnInit: func(sdk.Info) error {
		_ = sdk.Log(sdk.LevelInfo, "x")
		_ = sdk.RegisterNamespace(sdk.Namespace{})
		_, _ = sdk.GetConfig()
		_ = sdk.Publish("a.b", 1)
		_ = sdk.PublishTo("vessels.urn:mrn:imo:mmsi:230123456", "a.b", 1)
		_ = sdk.Flush()
		_ = sdk.DeclareMeta("a.b", nil)
		_ = sdk.Subscribe("a.*")
		_ = sdk.Unsubscribe("a.*")
		_ = sdk.HandlePuts("a.*")
		_ = sdk.CompletePut(1, sdk.Success())
		_, _ = sdk.SendPut("a.b", 1)
		_ = sdk.ReportHealth("x", sdk.Warn, "")
		_ = sdk.SetTimer(1, time.Second, 0)
		_ = sdk.CancelTimer(1)
		_ = sdk.HoldPower(true)
		_, _ = sdk.Now()
		_ = sdk.Emit("allcalls", nil, false)
		_, _ = sdk.GPIORead(1)
		_ = sdk.GPIOWrite(1, true)
		_ = sdk.GPIOWatch(1, sdk.EdgeBoth)
		_ = sdk.CANSend(sdk.CANFrame{})
		_ = sdk.CANReceive()
		_ = sdk.BLEScan(true)
		_ = sdk.BLEAdvertise(nil)
		_ = sdk.AdvertiseService(sdk.MDNSService{Type: "_x", Proto: "_tcp", Port: 1})
		return nil
	}})
}

func main() {}
