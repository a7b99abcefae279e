// Command minimal is the smallest SDK plugin: it registers and does nothing else, so what the
// device spends on it is the floor every plugin pays (the host's BenchmarkMinimalPluginRSS).
//
// The files behind build tags add one thing each, for the memory levers sdk/README.md names
// (BenchmarkPluginMemoryLevers builds each variant):
//
//	churn    OnInit makes 16 MiB of short-lived garbage, as a plugin parsing a large
//	         document at start does; a Wasm memory never shrinks, so the peak stays
//	lowgc    sets the garbage collector's target to 25 % (debug.SetGCPercent) before that
//	memlimit sets a soft memory limit of 8 MiB (debug.SetMemoryLimit) before that
//	idle64   starts 64 goroutines that wait for ever
package main

import "devhost/sdk"

// onInit holds what the tagged files add to the start; with no tag it stays empty.
var onInit []func(sdk.Info) error

func init() {
	sdk.Register(&sdk.Plugin{OnInit: func(info sdk.Info) error {
		for _, f := range onInit {
			if err := f(info); err != nil {
				return err
			}
		}
		return nil
	}})
}

func main() {}
