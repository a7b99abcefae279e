// Command wasmimports writes a plugin's //go:wasmimport declarations from abi.Signatures
// (abi.WasmImports), for `go generate`:
//
//	wasmimports -pkg NAME -o FILE
package main

import (
	"flag"
	"fmt"
	"os"

	"devhost/abi"
)

func main() {
	pkg := flag.String("pkg", "", "the Go package name of the generated file")
	out := flag.String("o", "", "the file to write")
	flag.Parse()
	if *pkg == "" || *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: wasmimports -pkg NAME -o FILE")
		os.Exit(2)
	}
	src, err := abi.WasmImports(*pkg)
	if err == nil {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "wasmimports:", err)
		os.Exit(1)
	}
}
