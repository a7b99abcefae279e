package main

import (
	"encoding/json"
	"fmt"
	"io"

	"devhost/host/build"
)

// printIdentity answers --version (the version alone, which `devctl ota pack` reads) and
// --build-info (the identity an image header carries).
func printIdentity(f flags, stdout io.Writer) int {
	if f.version {
		fmt.Fprintln(stdout, build.Version)
		return 0
	}
	b, err := json.Marshal(map[string]string{"project": build.App, "version": build.Version,
		"target": build.Target, "build_time": build.Time})
	if err != nil {
		return 1
	}
	fmt.Fprintln(stdout, string(b))
	return 0
}
