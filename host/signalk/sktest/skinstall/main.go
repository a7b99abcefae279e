// Command skinstall installs the real Signal K server the tests use into its cached folder
// (.cache/signalk-server under the module root, or $SIGNALK_SERVER_DIR). It does nothing when
// the folder already holds the wanted versions; `make test` runs it first.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"devhost/host/signalk/sktest"
)

func main() {
	dir, err := sktest.Dir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := sktest.Install(ctx, dir, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("signalk-server %s ready in %s\n", sktest.ServerVersion, dir)
}
