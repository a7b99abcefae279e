// Package abi is the contract between the device's plugin host and WebAssembly plugins: the
// ABI version and how it is negotiated, the signed bundle format, the plugin manifest, the
// capability names, the host functions and exports with their error codes and limits, and the
// binary encoding of every message that crosses the boundary. ABI.md beside this file is the
// prose form of the same contract; both sides (host/plugin and sdk) use this package, so one
// encoder and one decoder serve both directions.
//
// The package is pure Go with only standard-library imports and builds for GOOS=wasip1 too.
// The bundle functions (Pack, Parse, Verify and the key helpers) are left out of wasip1
// builds: plugins never need them, and crypto/x509 would add over a megabyte to every module.
//
// Choices where the spec is silent:
//   - Bundles are signed with RSASSA-PSS (SHA-256, salt length 32) by an RSA-3072 key. The
//     signature covers every byte of the bundle before it (magic, key id, manifest, module), so
//     lengths and the key id are bound too.
//   - Plugin ids are 1 to 12 characters matching ^[a-z][a-z0-9_]{0,11}$, so f_<id> is a valid
//     namespace name; ids naming a core API path segment or a host REST path are reserved.
//   - Unknown manifest members are refused: an operator grants exactly what is written.
//   - Numbers published to Signal K must be finite: JSON cannot carry NaN or infinities.
package abi
