package plugin

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"devhost/abi"
	"devhost/host/events"
)

// Snapshot is the on-connect snapshot of the SSE stream (events.Hub.OnConnect): the plugins
// document and every retained plugin event.
func (m *Manager) Snapshot() []events.Event {
	out := []events.Event{{Name: EventName, Data: m.List()}}
	m.mu.Lock()
	ps := m.sortedLocked()
	m.mu.Unlock()
	for _, p := range ps {
		p.mu.Lock()
		names := make([]string, 0, len(p.retained))
		for n := range p.retained {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			out = append(out, events.Event{Name: n, Data: p.retained[n]})
		}
		p.mu.Unlock()
	}
	return out
}

// ListDoc is the GET /plugins document and the data of the `plugins` event.
type ListDoc struct {
	Plugins []Status `json:"plugins"`
	// BundledPending is true while the device is still offering the plugins its firmware
	// carries (after every boot, in the background): a bundled plugin not listed yet may
	// still be installed. A plugin is listed from the moment it is installed.
	BundledPending bool `json:"bundled_pending"`
}

// List answers the state of every installed plugin, by id.
func (m *Manager) List() ListDoc {
	m.mu.Lock()
	ps := m.sortedLocked()
	m.mu.Unlock()
	doc := ListDoc{Plugins: make([]Status, 0, len(ps)), BundledPending: m.offering.Load() > 0}
	for _, p := range ps {
		doc.Plugins = append(doc.Plugins, p.status())
	}
	return doc
}

// OfferingBundled marks the plugins the firmware carries as being offered to this host
// (package bundled) until done is called: GET /plugins and the plugins event say
// bundled_pending meanwhile, so that a client tells a bundled plugin not installed yet from
// one the owner removed.
func (m *Manager) OfferingBundled() (done func()) {
	m.offering.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			m.offering.Add(-1)
			m.publish()
		})
	}
}

// Status answers one plugin's state.
func (m *Manager) Status(id string) (Status, bool) {
	p := m.get(id)
	if p == nil {
		return Status{}, false
	}
	return p.status(), true
}

// publish sends the `plugins` event.
func (m *Manager) publish() { m.opts.Publish(EventName, m.List()) }

// changed is called after every state change of a plugin.
func (m *Manager) changed() {
	m.reportHealth()
	m.publish()
}

// reportHealth raises the shared condition: warn while a plugin is failed and waiting for its
// restart or restarting, alarm while one is disabled by failures, normal otherwise. The message names them.
func (m *Manager) reportHealth() {
	m.healthMu.Lock()
	defer m.healthMu.Unlock()
	m.mu.Lock()
	ps := m.sortedLocked()
	m.mu.Unlock()
	var disabled, failed []string
	for _, p := range ps {
		p.mu.Lock()
		switch p.state {
		case StateDisabled:
			disabled = append(disabled, fmt.Sprintf("%s disabled: %s", p.id, p.lastErr))
		case StateFailed:
			failed = append(failed, fmt.Sprintf("%s failed (%d in a row): %s", p.id, p.failures, p.lastErr))
		case StateLoading:
			// A restart after failures stays a warning until the plugin runs: the condition
			// must not flicker back to normal at every attempt of a plugin that keeps failing.
			if p.failures > 0 {
				failed = append(failed, fmt.Sprintf("%s restarting after %d failures in a row: %s", p.id, p.failures, p.lastErr))
			}
		}
		p.mu.Unlock()
	}
	state := "normal"
	switch {
	case len(disabled) > 0:
		state = "alarm"
	case len(failed) > 0:
		state = "warn"
	}
	msg := strings.Join(append(disabled, failed...), "; ")
	if len(msg) > 255 {
		msg = msg[:252] + "..."
		for !utf8ValidPrefix(msg) {
			msg = msg[:len(msg)-4] + "..."
		}
	}
	key := state + "\x00" + msg
	if key == m.lastHealth || m.opts.Health == nil {
		return
	}
	if err := m.opts.Health.Report(HealthKey, state, msg); err != nil {
		m.log.Warn("plugin health condition not reported", "err", err)
		return
	}
	m.lastHealth = key
}

func utf8ValidPrefix(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func (m *Manager) publishPluginEvent(p *plugin, name string, data json.RawMessage, retain bool) {
	if retain {
		p.mu.Lock()
		if p.retained == nil {
			p.retained = map[string]json.RawMessage{}
		}
		p.retained[name] = data
		p.mu.Unlock()
	}
	m.opts.Publish(name, data)
}

// Status is a plugin as the API shows it.
type Status struct {
	ID          string           `json:"id"`
	Name        string           `json:"name"`
	Version     string           `json:"version"`
	ABI         string           `json:"abi"`
	Description string           `json:"description,omitempty"`
	State       State            `json:"state"`
	Wanted      Wanted           `json:"wanted"`
	Asked       []abi.Capability `json:"asked"`
	Granted     []string         `json:"granted"`
	KeyID       string           `json:"kid"`
	Size        int64            `json:"size"`
	InstalledMS int64            `json:"installed_ms"`
	Memory      uint64           `json:"memory"`
	Calls       uint64           `json:"calls"`
	Errors      uint64           `json:"errors"`
	Denied      uint64           `json:"denied"`
	Dropped     uint64           `json:"dropped"`
	Restarts    uint64           `json:"restarts"`
	Failures    int              `json:"failures"`
	LastError   *string          `json:"last_error"`
	NextRetryS  *int64           `json:"next_retry_s,omitempty"`
	Namespace   *string          `json:"namespace"`
	Routes      []abi.Route      `json:"routes"`
	Events      []string         `json:"events"`
	// Wake is what wakes a dormant plugin (state dormant): its abi.Wake conditions.
	Wake *abi.Wake `json:"wake,omitempty"`
}

func (p *plugin) status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Status{ID: p.id, Name: p.man.Name, Version: p.man.Version,
		ABI: fmt.Sprintf("%d.%d", p.man.ABI, p.man.ABIMinor), Description: p.man.Description,
		State: p.state, Wanted: p.rec.Wanted, Asked: p.man.Capabilities, Granted: p.rec.Granted,
		KeyID: p.rec.KeyID, Size: p.size, InstalledMS: p.rec.InstalledMS,
		Calls: p.calls.Load(), Errors: p.errs.Load(), Denied: p.denied.Load(),
		Dropped: p.inbox.droppedCount(), Restarts: p.restarts.Load(), Failures: p.failures,
		Routes: p.man.Routes, Events: p.man.Events}
	if st.Asked == nil {
		st.Asked = []abi.Capability{}
	}
	if st.Granted == nil {
		st.Granted = []string{}
	}
	if st.Routes == nil {
		st.Routes = []abi.Route{}
	}
	if st.Events == nil {
		st.Events = []string{}
	}
	if p.sess != nil {
		st.Memory = p.sess.inst.bytes()
	}
	if p.lastErr != "" {
		e := p.lastErr
		st.LastError = &e
	}
	if p.state == StateFailed && !p.nextRetry.IsZero() {
		s := int64((p.m.clk.Until(p.nextRetry) + time.Second - 1) / time.Second)
		st.NextRetryS = &s
	}
	if p.nsRegistered {
		ns := abi.Namespace(p.id)
		st.Namespace = &ns
	}
	if p.state == StateDormant && p.rec.Dormant != nil {
		w := p.rec.Dormant.Wake
		st.Wake = &w
	}
	return st
}
