//go:build webui

package ui

import (
	"embed"
	"fmt"
	"io/fs"
)

// The UI that `make build` put into dist (git-ignored apart from _README, which the embed
// pattern leaves out like every name starting with _ or .).
//
//go:embed dist
var bundled embed.FS

// Bundled returns the UI files this executable carries.
func Bundled() (fs.FS, error) {
	sub, err := fs.Sub(bundled, "dist")
	if err != nil {
		return nil, fmt.Errorf("bundled ui: %w", err)
	}
	return sub, nil
}
