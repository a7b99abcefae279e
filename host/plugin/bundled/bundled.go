package bundled

import (
	"fmt"
	"io/fs"
	"sort"

	"devhost/abi"
)

// Bundle is one plugin bundle the firmware carries.
type Bundle struct {
	ID      string
	Version string
	Data    []byte
}

// Carried lists the bundles this executable carries, by id: none in a build without the
// bundled tag. A carried file that is not a bundle is reported and left out; nothing here
// checks a signature (the plugin host does, at install).
func Carried() ([]Bundle, []error) {
	fsys, err := carried()
	if err != nil {
		return nil, []error{err}
	}
	return Read(fsys)
}

// Read lists the bundles (*.devplug) at the top of fsys, by id; a nil fsys holds none.
func Read(fsys fs.FS) ([]Bundle, []error) {
	if fsys == nil {
		return nil, nil
	}
	names, err := fs.Glob(fsys, "*.devplug")
	if err != nil {
		return nil, []error{fmt.Errorf("bundled plugins: %w", err)}
	}
	var out []Bundle
	var bad []error
	seen := map[string]string{}
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			bad = append(bad, fmt.Errorf("bundled plugin %s: %w", name, err))
			continue
		}
		bd, err := abi.Parse(b)
		if err != nil {
			bad = append(bad, fmt.Errorf("bundled plugin %s: %w", name, err))
			continue
		}
		id := bd.Manifest.ID
		if other, dup := seen[id]; dup {
			bad = append(bad, fmt.Errorf("bundled plugin %s: id %q already carried by %s", name, id, other))
			continue
		}
		seen[id] = name
		out = append(out, Bundle{ID: id, Version: bd.Manifest.Version, Data: b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, bad
}

// Installed is what the plugin host holds under a bundled plugin's id.
type Installed struct {
	Version string
	Asked   []abi.Capability
	Granted []string
	Stopped bool // the owner stopped it
}

// Host is the plugin host as Sync uses it. Install verifies the bundle against the device's
// trust store as an upload is verified and refuses it otherwise.
type Host interface {
	Installed(id string) (Installed, bool)
	Install(bundle []byte, grant []abi.Capability) error
	Stop(id string) error
}

// Ledger is the store Sync remembers the offered versions in.
type Ledger interface {
	Get(key string) (string, bool, error)
	Set(key, value string) error
}

// LedgerPrefix starts the store key of each bundled plugin id ("state/bundled/n2k").
const LedgerPrefix = "state/bundled/"

// Action is what Sync did with one carried bundle.
type Action string

// The actions.
const (
	ActInstalled   Action = "installed"    // not installed and never offered: installed
	ActReplaced    Action = "replaced"     // an older version was installed: replaced
	ActKept        Action = "kept"         // the same or a newer version is installed
	ActLeftRemoved Action = "left_removed" // offered before and removed by the owner since
	ActFailed      Action = "failed"       // refused by the plugin host, or the ledger failed
)

// Result is the outcome for one carried bundle.
type Result struct {
	ID, Version string
	Action      Action
	Err         error
}

// Compare orders two plugin versions (-1, 0, 1); the device passes the firmware's version
// rule (dotted numbers, a -prerelease below its release), which manifests follow too.
type Compare func(a, b string) int

// Sync offers each bundle to the host by the rules of the package comment and records what
// it offered in the ledger. A bundle the host refuses is reported and not recorded, so the
// next boot offers it again.
func Sync(bundles []Bundle, h Host, l Ledger, cmp Compare) []Result {
	out := make([]Result, 0, len(bundles))
	for _, b := range bundles {
		r := Result{ID: b.ID, Version: b.Version}
		r.Action, r.Err = syncOne(b, h, l, cmp)
		if r.Err != nil {
			r.Action = ActFailed
		}
		out = append(out, r)
	}
	return out
}

func syncOne(b Bundle, h Host, l Ledger, cmp Compare) (Action, error) {
	key := LedgerPrefix + b.ID
	_, offered, err := l.Get(key)
	if err != nil {
		return ActFailed, fmt.Errorf("bundled plugin %s: read the record: %w", b.ID, err)
	}
	have, installed := h.Installed(b.ID)
	act := ActKept
	switch {
	case !installed && offered:
		return ActLeftRemoved, nil
	case !installed:
		if err := h.Install(b.Data, nil); err != nil {
			return ActFailed, fmt.Errorf("bundled plugin %s %s: %w", b.ID, b.Version, err)
		}
		act = ActInstalled
	case cmp(b.Version, have.Version) > 0:
		if err := h.Install(b.Data, keepWithheld(b, have)); err != nil {
			return ActFailed, fmt.Errorf("bundled plugin %s %s over %s: %w", b.ID, b.Version, have.Version, err)
		}
		if have.Stopped {
			if err := h.Stop(b.ID); err != nil {
				return ActFailed, fmt.Errorf("bundled plugin %s: keep it stopped: %w", b.ID, err)
			}
		}
		act = ActReplaced
	}
	if err := l.Set(key, b.Version); err != nil {
		return ActFailed, fmt.Errorf("bundled plugin %s: record: %w", b.ID, err)
	}
	return act, nil
}

// keepWithheld is the grant for a replacement: every capability the new version asks for,
// but those the installed version asked for and the owner did not grant.
func keepWithheld(b Bundle, have Installed) []abi.Capability {
	bd, err := abi.Parse(b.Data)
	if err != nil {
		return nil // the host refuses it with the reason
	}
	granted := map[string]bool{}
	for _, g := range have.Granted {
		granted[g] = true
	}
	grant := []abi.Capability{}
	for _, c := range bd.Manifest.Capabilities {
		if abi.HasCapability(have.Asked, c) && !granted[string(c)] {
			continue
		}
		grant = append(grant, c)
	}
	return grant
}
