// Package deptest holds the test that keeps the import layers of README.md ("Layers") from
// eroding: it lists every package of the repository's modules with `go list` and fails on an
// import that crosses a layer the wrong way. It has no code of its own.
package deptest
