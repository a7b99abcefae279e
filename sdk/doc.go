// Package sdk is the Go API for writing devhost plugins: WebAssembly modules built with the
// standard Go toolchain (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared) that the
// device loads, sandboxes and drives through the ABI of package devhost/abi.
//
// A plugin registers its handlers from an init function and leaves main empty:
//
//	func init() {
//		sdk.Register(&sdk.Plugin{
//			OnInit: func(info sdk.Info) error { return sdk.Publish("a.b", 1.0) },
//			OnPut:  func(req sdk.PutRequest) sdk.PutResult { return sdk.Success() },
//		})
//	}
//
//	func main() {}
//
// The device calls the plugin once to start it (OnInit) and then once per batch of events
// (configuration changes, Signal K deltas and PUTs, timers, HTTP requests, GPIO edges, CAN
// frames, BLE adverts); handlers run one at a time and never concurrently. Values given to
// Publish are buffered and sent in one host call when the handler returns, so a handler that
// publishes a hundred values crosses into the host once. PublishTo does the same for
// another context (an AIS target: `vessels.urn:mrn:imo:mmsi:<mmsi>`), one call per context.
//
// Everything a plugin does goes through a capability its manifest asks for and the operator
// granted; a call outside the grants fails with ErrPermission. Errors from the host are
// abi.Errno values: match them with errors.Is(err, sdk.ErrPermission) and friends.
//
// Built for any other GOOS, the package talks to a FakeHost instead of the device, so a
// plugin is unit-tested natively with go test (see FakeHost). The fake host is package-wide
// state: tests that use it must not run in parallel.
//
// Choices:
//   - Publish checks its arguments and the signalk.publish grant at once; the host's answer to
//     the buffered batch comes from Flush, or is logged when the handler's batch is flushed
//     automatically.
//   - Inbound PUT results are sent after the handler's published values, so the Signal K
//     server sees the new state no later than the COMPLETED answer.
//   - A panic in a handler is not recovered: inside the device it traps, and the device
//     discards the instance and restarts the plugin from a clean state.
package sdk
