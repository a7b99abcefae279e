// Command trapinit is a test plugin whose init panics: inside the device dev_init traps. The
// host must discard the instance, count the failure, restart with backoff and finally disable
// the plugin, while it keeps answering HTTP.
package main

import "devhost/sdk"

func init() {
	sdk.Register(&sdk.Plugin{OnInit: func(sdk.Info) error { panic("trapinit: failing on purpose") }})
}

func main() {}
