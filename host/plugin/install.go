package plugin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"

	"devhost/abi"
	"devhost/host/api"
)

// errRefused wraps every reason a bundle is refused.
var errRefused = errors.New("bundle refused")

// verify parses a bundle and checks it against the trust store and this host's ABI.
func (m *Manager) verify(b []byte) (*abi.Bundle, error) {
	if bytes.HasPrefix(b, []byte("\x00asm")) {
		return nil, fmt.Errorf("%w: this is a bare WebAssembly module, not a bundle: pack and sign it with its manifest first (devctl plugin pack --manifest manifest.json --wasm FILE)", errRefused)
	}
	bd, err := abi.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errRefused, err)
	}
	if err := abi.CheckVersion(bd.Manifest.ABI, bd.Manifest.ABIMinor); err != nil {
		return nil, fmt.Errorf("%w: %w", errRefused, err)
	}
	pub, ok := m.keys.Lookup(bd.KeyID)
	if !ok {
		return nil, fmt.Errorf("%w: signed by key %s, which is not in the trust store", errRefused, bd.KeyID)
	}
	if err := bd.Verify(pub); err != nil {
		return nil, fmt.Errorf("%w: %w", errRefused, err)
	}
	return bd, nil
}

// InstallResult is the answer to an install.
type InstallResult struct {
	Status
	// Replaced is true when the bundle replaced an installed version.
	Replaced bool `json:"replaced"`
}

// Install verifies a bundle, stores it and starts the plugin. grant nil grants every asked
// capability; otherwise it must be a subset of those asked. Nothing is stored when the
// bundle is refused.
func (m *Manager) Install(b []byte, grant []abi.Capability) (InstallResult, error) {
	bd, err := m.verify(b)
	if err != nil {
		return InstallResult{}, err
	}
	man := bd.Manifest
	granted := man.Capabilities
	if grant != nil {
		granted = []abi.Capability{}
		for _, c := range grant {
			if !abi.HasCapability(man.Capabilities, c) {
				return InstallResult{}, fmt.Errorf("%w: %q", errNotAsked, c)
			}
			if !abi.HasCapability(granted, c) {
				granted = append(granted, c)
			}
		}
	}
	m.installMu.Lock()
	defer m.installMu.Unlock()
	if err := m.checkRoutes(man); err != nil {
		return InstallResult{}, err
	}
	sum := sha256.Sum256(b)
	rec := record{ID: man.ID, Granted: capStrings(granted), Wanted: WantRunning,
		InstalledMS: m.clk.Now().UnixMilli(), KeyID: bd.KeyID, SHA256: hex.EncodeToString(sum[:])}
	old := m.get(man.ID)
	if old != nil {
		old.shutdown() // the old instance stops before its files go
		old.releaseCompiled()
	}
	if err := m.part.install(rec, b); err != nil {
		if old != nil {
			old.resume()
		}
		return InstallResult{}, fmt.Errorf("%w: %w", errStorage, err)
	}
	p := m.newPlugin(rec)
	p.man, p.size = man, int64(len(b))
	if old != nil {
		p.inheritBoot(old)
	}
	m.mu.Lock()
	m.plugins[man.ID] = p
	m.startSupervisorLocked(p)
	m.mu.Unlock()
	m.log.Info("plugin installed", "id", man.ID, "version", man.Version, "kid", bd.KeyID, "granted", rec.Granted)
	m.changed()
	return InstallResult{Status: p.status(), Replaced: old != nil}, nil
}

var (
	errNotAsked = errors.New("grant names a capability the plugin does not ask for")
	errStorage  = errors.New("storage")
	errConflict = errors.New("conflict")
	errNotFound = errors.New("no such plugin")
)

// checkRoutes refuses a manifest whose spec routes another installed plugin already serves.
func (m *Manager) checkRoutes(man abi.Manifest) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.plugins {
		if p.id == man.ID {
			continue
		}
		for _, r := range man.Routes {
			for _, o := range p.man.Routes {
				if r.Method == o.Method && r.Path == o.Path {
					return fmt.Errorf("%w: %s %s is served by plugin %s", errConflict, r.Method, r.Path, p.id)
				}
			}
		}
	}
	return nil
}

func validID(id string) bool { return abi.ValidID(id) }

func reservedID(id string) bool {
	for _, r := range abi.ReservedIDs {
		if id == r {
			return true
		}
	}
	return false
}

func capStrings(cs []abi.Capability) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// Remove stops and deletes a plugin. Its configuration namespace is unregistered; with purge
// its stored values are erased too.
func (m *Manager) Remove(id string, purge bool) error {
	m.installMu.Lock()
	defer m.installMu.Unlock()
	p := m.get(id)
	if p == nil {
		return errNotFound
	}
	p.shutdown()
	p.releaseCompiled()
	if err := m.part.remove(id); err != nil {
		p.resume()
		return fmt.Errorf("%w: %w", errStorage, err)
	}
	m.mu.Lock()
	delete(m.plugins, id)
	m.mu.Unlock()
	if cfg := m.opts.Config; cfg != nil {
		p.mu.Lock()
		registered := p.nsRegistered
		p.nsRegistered = false
		p.mu.Unlock()
		if registered {
			if err := cfg.Unregister(id); err != nil {
				m.log.Warn("unregister the namespace of a removed plugin", "id", id, "err", err)
			}
		}
		if purge {
			if err := cfg.Purge(id); err != nil {
				m.log.Warn("purge the configuration of a removed plugin", "id", id, "err", err)
			}
		}
	}
	if h := m.opts.Health; h != nil {
		p.mu.Lock()
		names := p.healthNames
		p.mu.Unlock()
		for n := range names {
			_ = h.Report(id+"."+n, "normal", "plugin removed")
		}
	}
	m.log.Info("plugin removed", "id", id, "purge", purge)
	m.changed()
	return nil
}

// apiError turns the manager's errors into the spec's answers.
func apiError(err error) error {
	var ae *api.Error
	switch {
	case errors.As(err, &ae):
		return err
	case errors.Is(err, errNotFound):
		return api.Errorf(http.StatusNotFound, api.CodeNotFound, "%v", err)
	case errors.Is(err, errTooLarge):
		return api.Errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "%v", err)
	case errors.Is(err, errConflict):
		return api.Errorf(http.StatusConflict, api.CodeConflict, "%v", err)
	case errors.Is(err, errStorage):
		return storageError(err)
	case errors.Is(err, errRefused):
		return api.Validation("", "%v", err)
	case errors.Is(err, errNotAsked):
		return api.Validation("grant", "%v", err)
	}
	return err
}
