//go:build webui

package ui

import (
	"embed"
	"fmt"
	"io/fs"
)

// The UI that `make build` put into dist (git-ignored apart from its placeholder file).
//
//go:embed all:dist
var bundled embed.FS

// Bundled returns the UI files this executable carries.
func Bundled() (fs.FS, error) {
	sub, err := fs.Sub(bundled, "dist")
	if err != nil {
		return nil, fmt.Errorf("bundled ui: %w", err)
	}
	return sub, nil
}
