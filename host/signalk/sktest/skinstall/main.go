// Command skinstall installs the real Signal K server the tests use into its cached folder
// (.cache/signalk-server under the module root, or $SIGNALK_SERVER_DIR). It does nothing when
// the folder already holds the wanted versions; `make test` runs it first.
package main

import (
	"context"
	"fmt"
	"os"

	"devhost/host/signalk/sktest"
)

func main() {
	sktest.Command("skinstall", func(ctx context.Context) error {
		dir, err := sktest.Prepare(ctx, os.Stderr)
		if err != nil {
			return err
		}
		fmt.Printf("signalk-server %s ready in %s\n", sktest.ServerVersion, dir)
		return nil
	})
}
