//go:build !bundled

package bundled

import "io/fs"

// carried is the folder of bundles this executable carries: none without the bundled build
// tag (a plain `go build`).
func carried() (fs.FS, error) { return nil, nil }
