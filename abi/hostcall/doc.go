// Package hostcall is the plugin side of the host functions: one Go function per entry of
// abi.Signatures, each a //go:wasmimport declaration (built for wasip1 only), and Call,
// which reaches any of them by its ABI name. The SDK, and the test plugins that speak the
// ABI without it, call the host through this package alone, so a plugin's imports cannot
// drift from the table the host links against and a new ABI row needs no hand-written
// declaration anywhere. It imports nothing but unsafe.
package hostcall

// The declarations (imports_wasip1.go) are generated from abi.Signatures and abi.ParamNames;
// a test in abi/cmd/wasmimports fails when they are stale.
//
//go:generate go run ../cmd/wasmimports -o imports_wasip1.go
