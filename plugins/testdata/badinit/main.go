//go:build wasip1

// Command badinit is a test plugin whose dev_init answers 42 without trapping (a garbage
// answer): the host must treat the start as failed (instance discarded, failure counted,
// restart with backoff). dev_event answers 0 but must never be called.
package main

//go:wasmexport dev_init
func devInit() int32 { return 42 }

//go:wasmexport dev_event
func devEvent() int32 { return 0 }

func main() {}
