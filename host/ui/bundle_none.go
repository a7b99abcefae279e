//go:build !webui

package ui

import "io/fs"

// Bundled returns the UI files this executable carries: none without the webui build tag
// (a plain `go build`), so the partition is left as it is and the placeholder is served while
// it is empty.
func Bundled() (fs.FS, error) { return nil, nil }
