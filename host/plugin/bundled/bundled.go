package bundled

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"sort"

	"devhost/abi"
)

// Bundle is one plugin bundle the firmware carries. Listing the carried bundles reads only
// their heads (manifest and signature, a few kilobytes): the bytes are read when Sync
// installs one.
type Bundle struct {
	ID      string
	Version string
	// Digest identifies the bundle's exact bytes without reading them: the SHA-256 of its
	// length, key id, manifest and signature. The signature is over the SHA-256 of every
	// byte before it, so two bundles that verify with the same signature are the same bytes.
	Digest string
	KeyID  string // the key that signed it, as the trust store names keys
	// Data is the bundle, nil until Sync needs it (an install or a replacement).
	Data []byte
	open func() ([]byte, error)
}

// bytes returns the bundle, reading it the first time.
func (b *Bundle) bytes() ([]byte, error) {
	if b.Data == nil && b.open != nil {
		data, err := b.open()
		if err != nil {
			return nil, fmt.Errorf("bundled plugin %s: %w", b.ID, err)
		}
		b.Data = data
	}
	return b.Data, nil
}

// Loaded tells whether Sync read the bundle's bytes (to install it).
func (b *Bundle) Loaded() bool { return b.Data != nil }

// newBundle describes a bundle by its head; open reads its bytes when they are needed.
func newBundle(h *abi.Head, data []byte, open func() ([]byte, error)) Bundle {
	d := sha256.New()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(h.Size))
	d.Write(n[:])
	d.Write([]byte(h.KeyID))
	d.Write(h.ManifestJSON)
	d.Write(h.Signature)
	return Bundle{ID: h.Manifest.ID, Version: h.Manifest.Version, Digest: hex.EncodeToString(d.Sum(nil)),
		KeyID: h.KeyID, Data: data, open: open}
}

// FromBytes describes a bundle held in memory.
func FromBytes(b []byte) (Bundle, error) {
	h, err := abi.ReadHead(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return Bundle{}, err
	}
	return newBundle(h, b, nil), nil
}

// Carried lists the bundles this executable carries: none in a build without the
// bundled tag. See Read.
func Carried() ([]Bundle, []error) {
	fsys, err := carried()
	if err != nil {
		return nil, []error{err}
	}
	return Read(fsys)
}

// Read lists the bundles (*.devplug) at the top of fsys, by id; a nil fsys holds none. Only
// each file's head is read (when the file can be read at an offset, as embedded files can):
// a carried file that is not a bundle is reported and left out; nothing here checks a
// signature (the plugin host does, at install).
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
		b, err := readOne(fsys, name)
		if err != nil {
			bad = append(bad, fmt.Errorf("bundled plugin %s: %w", name, err))
			continue
		}
		if other, dup := seen[b.ID]; dup {
			bad = append(bad, fmt.Errorf("bundled plugin %s: id %q already carried by %s", name, b.ID, other))
			continue
		}
		seen[b.ID] = name
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, bad
}

// readOne reads a bundle's head, or the whole file when it cannot be read at an offset.
func readOne(fsys fs.FS, name string) (Bundle, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return Bundle{}, err
	}
	defer f.Close()
	ra, ok := f.(io.ReaderAt)
	if !ok {
		data, err := io.ReadAll(f)
		if err != nil {
			return Bundle{}, err
		}
		return FromBytes(data)
	}
	st, err := f.Stat()
	if err != nil {
		return Bundle{}, err
	}
	h, err := abi.ReadHead(ra, st.Size())
	if err != nil {
		return Bundle{}, err
	}
	return newBundle(h, nil, func() ([]byte, error) { return fs.ReadFile(fsys, name) }), nil
}

// Installed is what the plugin host holds under a bundled plugin's id.
type Installed struct {
	Version string
	Asked   []abi.Capability
	Granted []string
	Stopped bool // the owner stopped it
}

// Host is the plugin host as Sync uses it. Install verifies the bundle against the device's
// trust store as an upload is verified and refuses it otherwise; Trusts tells beforehand
// whether the key a bundle names is in the trust store, so that an untrusted bundle is
// refused without reading it.
type Host interface {
	Installed(id string) (Installed, bool)
	Trusts(keyID string) bool
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
// next boot offers it again. Only an install or a replacement reads a bundle's bytes (into
// its Data), and the ledger is written only when its record changes: on a boot with nothing
// to install Sync costs a look-up per bundle. It stops between bundles once ctx ends; the
// bundles not offered then are left out of the results.
func Sync(ctx context.Context, bundles []Bundle, h Host, l Ledger, cmp Compare) []Result {
	out := make([]Result, 0, len(bundles))
	for i := range bundles {
		if ctx.Err() != nil {
			break
		}
		b := &bundles[i]
		r := Result{ID: b.ID, Version: b.Version}
		r.Action, r.Err = syncOne(b, h, l, cmp)
		if r.Err != nil {
			r.Action = ActFailed
		}
		out = append(out, r)
	}
	return out
}

// record is the ledger's value for a bundle offered: its version and digest ("1.2.0 ab12…").
// A record written before digests were kept holds the version alone.
func record(b *Bundle) string { return b.Version + " " + b.Digest }

func syncOne(b *Bundle, h Host, l Ledger, cmp Compare) (Action, error) {
	key := LedgerPrefix + b.ID
	rec, offered, err := l.Get(key)
	if err != nil {
		return ActFailed, fmt.Errorf("bundled plugin %s: read the record: %w", b.ID, err)
	}
	have, installed := h.Installed(b.ID)
	act := ActKept
	switch {
	case !installed && offered:
		return ActLeftRemoved, nil
	case !installed:
		data, err := b.load(h)
		if err == nil {
			err = h.Install(data, nil)
		}
		if err != nil {
			return ActFailed, fmt.Errorf("bundled plugin %s %s: %w", b.ID, b.Version, err)
		}
		act = ActInstalled
	case cmp(b.Version, have.Version) > 0:
		data, err := b.load(h)
		if err == nil {
			err = h.Install(data, keepWithheld(data, have))
		}
		if err != nil {
			return ActFailed, fmt.Errorf("bundled plugin %s %s over %s: %w", b.ID, b.Version, have.Version, err)
		}
		if have.Stopped {
			if err := h.Stop(b.ID); err != nil {
				return ActFailed, fmt.Errorf("bundled plugin %s: keep it stopped: %w", b.ID, err)
			}
		}
		act = ActReplaced
	}
	if want := record(b); rec != want {
		if err := l.Set(key, want); err != nil {
			return ActFailed, fmt.Errorf("bundled plugin %s: record: %w", b.ID, err)
		}
	}
	return act, nil
}

// load reads the bundle to install it, unless the key that signed it is not trusted: the
// host would refuse it for that before any other check.
func (b *Bundle) load(h Host) ([]byte, error) {
	if !h.Trusts(b.KeyID) {
		return nil, fmt.Errorf("signed by key %s, which is not in the trust store", b.KeyID)
	}
	return b.bytes()
}

// keepWithheld is the grant for a replacement: every capability the new version asks for,
// but those the installed version asked for and the owner did not grant.
func keepWithheld(data []byte, have Installed) []abi.Capability {
	bd, err := abi.Parse(data)
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
