// Command genkeys writes host/config/keys.go from the built-in descriptors
// (config.KeyConstants); `go generate ./host/config` runs it.
package main

import (
	"fmt"
	"os"

	"devhost/host/config"
)

func main() {
	src, err := config.KeyConstants()
	if err == nil {
		err = os.WriteFile("keys.go", src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genkeys:", err)
		os.Exit(1)
	}
}
