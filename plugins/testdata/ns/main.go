// Command ns is a test plugin that registers a small valid namespace f_<id> at start and logs
// "ns: registered" or "ns: <error>"; it starts either way. Packed under many ids it fills the
// device's 32 run-time namespace slots: the 33rd answers limit exceeded and raises
// flowConfig.
package main

import "devhost/sdk"

func init() {
	sdk.Register(&sdk.Plugin{OnInit: func(sdk.Info) error {
		err := sdk.RegisterNamespace(sdk.Namespace{Version: 1, Title: "Slot filler",
			Keys: []sdk.Key{{Name: "n", Type: sdk.TypeInt, Default: 1, Min: sdk.Float(0), Max: sdk.Float(9)}}})
		if err != nil {
			return sdk.Log(sdk.LevelWarn, "ns: "+err.Error())
		}
		return sdk.Log(sdk.LevelInfo, "ns: registered")
	}})
}

func main() {}
