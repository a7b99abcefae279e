package plugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"devhost/abi"
	"devhost/host/plugin/trust"
)

// Layout of the `plugins` partition:
//
//	<id>/bundle        the signed bundle exactly as installed
//	<id>/record.json   what the operator decided: grants, wanted state, install time
//	keys/<kid>.pem     publisher keys an operator added
//	.cache/            compiled code (wazero's compilation cache)
//	.uploads/          chunked uploads in progress (emptied at boot)
//
// A replacement is written beside the old one as .new-<id>, the old one moved to .old-<id>,
// the new one renamed into place and the old one removed; Open finishes or undoes an
// interrupted swap, so a power cut leaves one complete installation. A removal renames the
// directory to .del-<id> first, so it is either undone or finished, never half done.
const (
	bundleFile = "bundle"
	recordFile = "record.json"
	keysDir    = "keys"
	cacheDir   = ".cache"
	uploadsDir = ".uploads"
	newPrefix  = ".new-"
	oldPrefix  = ".old-"
	delPrefix  = ".del-"
)

// Wanted is the state an operator (or the failure policy) asked for; it survives reboots.
type Wanted string

// The wanted states.
const (
	WantRunning  Wanted = "running"
	WantStopped  Wanted = "stopped"
	WantDisabled Wanted = "disabled"
)

// record is the operator's side of an installed plugin.
type record struct {
	ID          string   `json:"id"`
	Granted     []string `json:"granted"`
	Wanted      Wanted   `json:"wanted"`
	InstalledMS int64    `json:"installed_ms"`
	KeyID       string   `json:"kid"`
	SHA256      string   `json:"sha256"`
	// Reason is why the plugin is disabled, kept so the operator sees it after a reboot.
	Reason string `json:"reason,omitempty"`
	// Dormant is the dormancy the plugin asked for (dormant.go); a new bundle starts without.
	Dormant *dormantRecord `json:"dormant,omitempty"`
}

type partition struct{ dir string }

func (pt partition) pluginDir(id string) string { return filepath.Join(pt.dir, id) }

// open prepares the partition: finishes interrupted swaps and empties the upload area.
func (pt partition) open() error {
	for _, d := range []string{pt.dir, filepath.Join(pt.dir, cacheDir), filepath.Join(pt.dir, keysDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("plugins partition: %w", err)
		}
	}
	if err := os.RemoveAll(filepath.Join(pt.dir, uploadsDir)); err != nil {
		return fmt.Errorf("plugins partition: clear uploads: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(pt.dir, uploadsDir), 0o755); err != nil {
		return fmt.Errorf("plugins partition: %w", err)
	}
	ents, err := os.ReadDir(pt.dir)
	if err != nil {
		return fmt.Errorf("plugins partition: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		switch {
		case strings.HasPrefix(name, newPrefix), strings.HasPrefix(name, delPrefix):
			// An install that never completed, or a removal that did.
			if err := os.RemoveAll(filepath.Join(pt.dir, name)); err != nil {
				return fmt.Errorf("plugins partition: %w", err)
			}
		case strings.HasPrefix(name, oldPrefix):
			id := strings.TrimPrefix(name, oldPrefix)
			if _, err := os.Stat(pt.pluginDir(id)); errors.Is(err, os.ErrNotExist) {
				// The new one never arrived: put the old one back.
				if err := os.Rename(filepath.Join(pt.dir, name), pt.pluginDir(id)); err != nil {
					return fmt.Errorf("plugins partition: restore %s: %w", id, err)
				}
			} else if err := os.RemoveAll(filepath.Join(pt.dir, name)); err != nil {
				return fmt.Errorf("plugins partition: %w", err)
			}
		}
	}
	return trust.SyncDir(pt.dir)
}

// list returns the ids of installed plugins, sorted.
func (pt partition) list() ([]string, error) {
	ents, err := os.ReadDir(pt.dir)
	if err != nil {
		return nil, fmt.Errorf("plugins partition: %w", err)
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && validID(e.Name()) && !reservedID(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

func (pt partition) readRecord(id string) (record, error) {
	var rec record
	b, err := os.ReadFile(filepath.Join(pt.pluginDir(id), recordFile))
	if err != nil {
		return rec, fmt.Errorf("plugin %s: %w", id, err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("plugin %s: record: %w", id, err)
	}
	if rec.ID != id {
		return rec, fmt.Errorf("plugin %s: record names %q", id, rec.ID)
	}
	return rec, nil
}

func (pt partition) writeRecord(rec record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("plugin %s: record: %w", rec.ID, err)
	}
	return trust.WriteFileAtomic(filepath.Join(pt.pluginDir(rec.ID), recordFile), b, 0o644)
}

func (pt partition) readBundle(id string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(pt.pluginDir(id), bundleFile))
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", id, err)
	}
	return b, nil
}

// readHead reads the head of an installed bundle (its manifest), not its module: listing
// the installed plugins at boot reads kilobytes, not megabytes.
func (pt partition) readHead(id string) (*abi.Head, error) {
	f, err := os.Open(filepath.Join(pt.pluginDir(id), bundleFile))
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", id, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", id, err)
	}
	h, err := abi.ReadHead(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", id, err)
	}
	return h, nil
}

// install writes a bundle and its record, replacing any earlier installation of the id.
func (pt partition) install(rec record, bundle []byte) error {
	id := rec.ID
	staging := filepath.Join(pt.dir, newPrefix+id)
	if err := os.RemoveAll(staging); err != nil {
		return fmt.Errorf("plugin %s: %w", id, err)
	}
	if err := os.Mkdir(staging, 0o755); err != nil {
		return fmt.Errorf("plugin %s: %w", id, err)
	}
	fail := func(err error) error {
		_ = os.RemoveAll(staging)
		return fmt.Errorf("plugin %s: %w", id, err)
	}
	if err := trust.WriteFileAtomic(filepath.Join(staging, bundleFile), bundle, 0o644); err != nil {
		return fail(err)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fail(err)
	}
	if err := trust.WriteFileAtomic(filepath.Join(staging, recordFile), b, 0o644); err != nil {
		return fail(err)
	}
	final := pt.pluginDir(id)
	old := filepath.Join(pt.dir, oldPrefix+id)
	hadOld := false
	if _, err := os.Stat(final); err == nil {
		_ = os.RemoveAll(old)
		if err := os.Rename(final, old); err != nil {
			return fail(err)
		}
		hadOld = true
	}
	if err := os.Rename(staging, final); err != nil {
		if hadOld {
			_ = os.Rename(old, final)
		}
		return fail(err)
	}
	if err := trust.SyncDir(pt.dir); err != nil {
		return fmt.Errorf("plugin %s: %w", id, err)
	}
	if hadOld {
		if err := os.RemoveAll(old); err != nil {
			return fmt.Errorf("plugin %s: remove the replaced version: %w", id, err)
		}
	}
	return nil
}

// remove deletes an installation.
func (pt partition) remove(id string) error {
	gone := filepath.Join(pt.dir, delPrefix+id)
	_ = os.RemoveAll(gone)
	if err := os.Rename(pt.pluginDir(id), gone); err != nil {
		return fmt.Errorf("plugin %s: %w", id, err)
	}
	if err := trust.SyncDir(pt.dir); err != nil {
		return err
	}
	if err := os.RemoveAll(gone); err != nil {
		return fmt.Errorf("plugin %s: %w", id, err)
	}
	return nil
}
