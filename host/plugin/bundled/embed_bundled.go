//go:build bundled

package bundled

import (
	"embed"
	"fmt"
	"io/fs"
)

// The bundles `make build` put into dist (git-ignored apart from _README, which the pattern
// leaves out).
//
//go:embed dist/*.devplug
var embedded embed.FS

func carried() (fs.FS, error) {
	sub, err := fs.Sub(embedded, "dist")
	if err != nil {
		return nil, fmt.Errorf("bundled plugins: %w", err)
	}
	return sub, nil
}
