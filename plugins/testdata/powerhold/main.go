// Command powerhold is a test plugin that holds the power duty cycle awake from its start
// (power_hold 1) and traps whenever its key f_powerhold.trap is true: at start, after the
// hold, or as soon as the key changes to true. So each instance that crashes held the device
// first, and the host must end that hold with the instance.
package main

import "devhost/sdk"

func trapIfAsked(cfg sdk.Config) {
	if cfg.Bool("trap") {
		panic("powerhold: trapping on purpose")
	}
}

func init() {
	sdk.Register(&sdk.Plugin{
		OnInit: func(info sdk.Info) error {
			err := sdk.RegisterNamespace(sdk.Namespace{Version: 1, Title: "Power hold",
				Keys: []sdk.Key{{Name: "trap", Type: sdk.TypeBool, Default: false}}})
			if err != nil {
				return err
			}
			if err := sdk.HoldPower(true); err != nil {
				return err
			}
			cfg, err := sdk.GetConfig()
			if err != nil {
				return err
			}
			trapIfAsked(cfg)
			return sdk.Log(sdk.LevelInfo, "powerhold: holding")
		},
		OnConfig: trapIfAsked,
	})
}

func main() {}
