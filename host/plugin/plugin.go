package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"devhost/abi"
)

// State is where a plugin is in its life.
type State string

// The states of a plugin.
const (
	StateLoading  State = "loading"  // being verified, compiled, started
	StateRunning  State = "running"  // its instance runs and takes events
	StateFailed   State = "failed"   // its instance failed; a restart is scheduled
	StateStopped  State = "stopped"  // an operator stopped it
	StateDisabled State = "disabled" // it failed too often (or cannot run); an operator must start it
	StateDormant  State = "dormant"  // its work is off: no instance until a wake condition holds
)

// Start asks a stopped, failed or disabled plugin to run; its failure count starts afresh.
func (m *Manager) Start(id string) (Status, error) {
	return m.setWanted(id, WantRunning)
}

// Stop stops a plugin and keeps it stopped across reboots.
func (m *Manager) Stop(id string) (Status, error) {
	return m.setWanted(id, WantStopped)
}

// waitCommand bounds how long an API call waits for a plugin to react.
const waitCommand = 10 * time.Second

func (m *Manager) setWanted(id string, w Wanted) (Status, error) {
	p := m.get(id)
	if p == nil {
		return Status{}, errNotFound
	}
	p.mu.Lock()
	rec := p.rec
	rec.Wanted, rec.Reason = w, ""
	p.mu.Unlock()
	if err := m.part.writeRecord(rec); err != nil {
		return Status{}, fmt.Errorf("%w: %w", errStorage, err)
	}
	p.mu.Lock()
	p.rec = rec
	if w == WantRunning {
		p.failures = 0
	}
	s, load := p.sess, p.loadCancel
	p.mu.Unlock()
	if w != WantRunning {
		if load != nil {
			load()
		}
		if s != nil {
			s.abort()
		}
	}
	p.command(w == WantRunning)
	return p.status(), nil
}

// plugin is one installed plugin and its supervisor.
type plugin struct {
	m   *Manager
	id  string
	log *slog.Logger

	inbox *inbox
	ctl   chan command
	gen   atomic.Uint64 // generation of the running instance, 0 when none

	calls, errs, denied, restarts atomic.Uint64
	nextHTTP                      atomic.Uint32

	// man and size describe the installed bundle; they never change (a replacement is a new
	// plugin value).
	man  abi.Manifest
	size int64

	mu         sync.Mutex
	rec        record
	state      State
	lastErr    string
	failures   int
	nextRetry  time.Time
	sess       *session
	supervised bool
	halted     bool // shut down for a replacement or removal
	exited     chan struct{}

	// What the plugin set up this boot; it outlives instances.
	nsRegistered bool
	nsDesc       []byte
	healthNames  map[string]bool
	retained     map[string]json.RawMessage

	compiled    *compiled
	compiledKey string
	// Dormancy (dormant.go): dozing while dormant or waking up, events that wait for the
	// next instance, wake signals doze, routed tells the routes are on the router.
	dozing  bool
	pending []queued
	wake    chan struct{}
	routed  bool
	// btnCarry is a dormant plugin's watch of the button, carried into the instance it wakes
	// until that instance watches the button itself (it takes the watch over) or its init is
	// over: a press while the instance loads waits for it instead of being lost.
	btnCarry func()
	// loadCancel ends the load in progress (compile, start, init); nil when not loading.
	loadCancel context.CancelFunc
}

type command struct {
	start bool
	done  chan struct{}
}

func (m *Manager) newPlugin(rec record) *plugin {
	p := &plugin{m: m, id: rec.ID, rec: rec, inbox: newInbox(), ctl: make(chan command, 8),
		exited: make(chan struct{}), healthNames: map[string]bool{}, wake: make(chan struct{}, 1)}
	p.log = m.opts.PluginLogger(rec.ID)
	switch rec.Wanted {
	case WantRunning:
		p.state = StateLoading
	case WantDisabled:
		p.state, p.lastErr = StateDisabled, rec.Reason
	default:
		p.state = StateStopped
	}
	return p
}

// inheritBoot carries what a replaced version set up this boot over to its successor.
func (p *plugin) inheritBoot(old *plugin) {
	old.mu.Lock()
	defer old.mu.Unlock()
	p.nsRegistered, p.nsDesc = old.nsRegistered, old.nsDesc
	p.healthNames = old.healthNames
	p.calls.Store(old.calls.Load())
	p.errs.Store(old.errs.Load())
	p.denied.Store(old.denied.Load())
}

// command wakes the supervisor and waits (bounded) until it reacted. Before Run there is
// no supervisor: the wanted state shows at once and Run acts on it.
func (p *plugin) command(start bool) {
	p.mu.Lock()
	supervised := p.supervised
	p.mu.Unlock()
	if !supervised {
		st := StateStopped
		if start {
			st = StateLoading
		}
		p.setState(st, "")
		return
	}
	done := make(chan struct{})
	select {
	case p.ctl <- command{start: start, done: done}:
	default:
		return // commands are pending: the supervisor will see the wanted state
	}
	select {
	case <-done:
	case <-p.exited:
	case <-p.m.clk.After(waitCommand):
	}
}

// shutdown stops the supervisor for good (replacement or removal) and waits for it.
func (p *plugin) shutdown() {
	p.mu.Lock()
	p.halted = true
	supervised := p.supervised
	s, load := p.sess, p.loadCancel
	p.mu.Unlock()
	if load != nil {
		load()
	}
	if s != nil {
		s.abort()
	}
	if !supervised {
		return
	}
	done := make(chan struct{})
	p.ctl <- command{done: done}
	<-p.exited
}

// resume undoes shutdown after a failed replacement or removal.
func (p *plugin) resume() {
	p.mu.Lock()
	p.halted = false
	p.supervised = false
	p.exited = make(chan struct{})
	p.mu.Unlock()
	p.m.mu.Lock()
	p.m.startSupervisorLocked(p)
	p.m.mu.Unlock()
}

func (p *plugin) wanted() (Wanted, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rec.Wanted, p.halted
}

func (p *plugin) currentSession() *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sess
}

func (p *plugin) setState(st State, lastErr string) {
	p.mu.Lock()
	p.state = st
	if lastErr != "" {
		p.lastErr = lastErr
	}
	p.mu.Unlock()
	p.m.changed()
}

func (p *plugin) declaresEvent(name string) bool {
	for _, e := range p.man.Events {
		if e == name {
			return true
		}
	}
	return false
}

func (p *plugin) claimHealthName(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healthNames[name] {
		return true
	}
	if len(p.healthNames) >= abi.MaxHealthKeys {
		return false
	}
	p.healthNames[name] = true
	return true
}

func (p *plugin) registerNamespace(desc []byte) error {
	cfg := p.m.opts.Config
	if cfg == nil {
		return abi.ErrState
	}
	p.mu.Lock()
	same := p.nsRegistered && bytes.Equal(p.nsDesc, desc)
	was, old := p.nsRegistered, p.nsDesc
	p.mu.Unlock()
	if same {
		return nil // a restarted instance registering what is registered: nothing changes
	}
	if was {
		if err := cfg.Unregister(p.id); err != nil {
			return fmt.Errorf("replace namespace: %w", err)
		}
	}
	if _, err := cfg.Register(p.id, desc); err != nil {
		if was {
			// The replacement was refused: the previous registration stays.
			if _, rerr := cfg.Register(p.id, old); rerr != nil {
				p.mu.Lock()
				p.nsRegistered = false
				p.mu.Unlock()
				p.log.Error("restore the namespace", "err", rerr)
			}
		}
		return err
	}
	p.mu.Lock()
	p.nsRegistered, p.nsDesc = true, append([]byte(nil), desc...)
	p.mu.Unlock()
	return nil
}

func (p *plugin) configValues() ([]byte, bool) {
	p.mu.Lock()
	reg := p.nsRegistered
	p.mu.Unlock()
	if !reg || p.m.opts.Config == nil {
		return nil, false
	}
	v, err := p.m.opts.Config.Values(abi.Namespace(p.id))
	if err != nil {
		p.log.Warn("read the plugin's configuration", "err", err)
		return nil, false
	}
	return v, true
}
