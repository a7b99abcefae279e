package bundled

import (
	"fmt"

	"devhost/abi"
	"devhost/host/plugin"
)

// ManagerHost is the device's plugin host as Sync uses it.
func ManagerHost(m *plugin.Manager) Host { return managerHost{m} }

type managerHost struct{ m *plugin.Manager }

func (h managerHost) Installed(id string) (Installed, bool) {
	st, ok := h.m.Status(id)
	if !ok {
		return Installed{}, false
	}
	return Installed{Version: st.Version, Asked: st.Asked, Granted: st.Granted, Stopped: st.Wanted == plugin.WantStopped}, true
}

func (h managerHost) Trusts(keyID string) bool {
	_, ok := h.m.Trust().Lookup(keyID)
	return ok
}

func (h managerHost) Install(b []byte, grant []abi.Capability) error {
	if _, err := h.m.Install(b, grant); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	return nil
}

func (h managerHost) Stop(id string) error {
	if _, err := h.m.Stop(id); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	return nil
}
