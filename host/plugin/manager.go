package plugin

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/abi"
	"devhost/host/api"
	"devhost/host/events"
	"devhost/host/plugin/trust"
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
)

// Defaults of Options.
const (
	DefaultMemoryPages = 512 // 32 MiB per instance: linear memory and Wasm stack
	DefaultStackBytes  = 1 << 20
	DefaultCallTimeout = time.Second
	DefaultDownload    = 20 * time.Second
	DefaultBackoffMin  = time.Second
	DefaultBackoffMax  = time.Minute
	DefaultMaxFailures = 5
	DefaultStableAfter = time.Minute
	// HealthKey is the one health condition the host raises for failing plugins.
	HealthKey = "plugins"
	// EventName is the SSE event published on every state change.
	EventName = "plugins"
)

// Options configure a Manager. Dir is required; every device interface may be nil, in
// which case the host functions that need it answer unavailable (hardware) or invalid state.
type Options struct {
	// Dir is the `plugins` partition.
	Dir string
	// CacheDir holds compiled code; default <Dir>/.cache.
	CacheDir string
	// TrustedKeys are the firmware's compiled-in keys (trust.DevicePublicKeys).
	TrustedKeys []*rsa.PublicKey

	Clock  clockwork.Clock
	Logger *slog.Logger
	// PluginLogger gives the logger a plugin's log lines go to, tagged with its id; default
	// Logger with a plugin attribute.
	PluginLogger func(id string) *slog.Logger
	// Publish sends an SSE event (events.Hub.Publish).
	Publish func(name string, data any)
	// DeviceID is the device identifier told to plugins at init.
	DeviceID string

	Config    ConfigRegistry
	Health    Health
	Router    Router
	WallClock Clock
	Power     Power
	GPIO      GPIO
	CAN       CAN
	BLE       BLE
	SignalK   SignalK
	MDNS      MDNS // nil: mdns_service answers ErrUnavailable

	// MemoryPages caps the memory of a plugin instance (64 KiB pages; a Go plugin needs 38):
	// its linear memory and its Wasm stack budget (StackBytes, rounded up to pages) together.
	MemoryPages uint32
	// StackBytes bounds the Wasm call stack of an instance (estimated frames; package
	// stackguard); a call that recurses past it traps.
	StackBytes uint32
	// CallTimeout limits every call into a plugin.
	CallTimeout time.Duration
	// MaxBundle caps downloads and uploads (default abi.MaxBundle).
	MaxBundle int64
	// DownloadTimeout limits an install by URL; HTTPClient does the download.
	DownloadTimeout time.Duration
	HTTPClient      *http.Client
	// Restart policy: the delay after the n-th consecutive failure is BackoffMin·2^(n-1),
	// at most BackoffMax; MaxFailures consecutive failures disable the plugin; a plugin
	// running for StableAfter has its count reset.
	BackoffMin  time.Duration
	BackoffMax  time.Duration
	MaxFailures int
	StableAfter time.Duration
}

// Manager is the plugin host: installed bundles, the trust store, uploads, and one supervised
// sandbox per plugin.
type Manager struct {
	opts    Options
	clk     clockwork.Clock
	log     *slog.Logger
	part    partition
	keys    *trust.Store
	uploads *uploads
	eng     *engine
	started time.Time

	installMu sync.Mutex // one install or removal at a time

	mu        sync.Mutex
	plugins   map[string]*plugin
	runCtx    context.Context
	wg        sync.WaitGroup
	putClaims map[string]string // PUT handler pattern → plugin id

	healthMu   sync.Mutex
	lastHealth string

	// loadHook and startHook, when set by a test, run as a plugin starts loading and right
	// before its module is instantiated (its start function runs).
	loadHook, startHook func(id string)
}

// New opens the partition and the trust store and lists the installed plugins. Nothing runs
// until Run.
func New(opts Options) (*Manager, error) {
	if opts.Dir == "" {
		return nil, errors.New("plugin: no partition directory")
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PluginLogger == nil {
		base := opts.Logger
		opts.PluginLogger = func(id string) *slog.Logger { return base.With("plugin", id) }
	}
	if opts.Publish == nil {
		opts.Publish = func(string, any) {}
	}
	if opts.MemoryPages == 0 {
		opts.MemoryPages = DefaultMemoryPages
	}
	if opts.StackBytes == 0 {
		opts.StackBytes = DefaultStackBytes
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.MaxBundle <= 0 || opts.MaxBundle > abi.MaxBundle {
		opts.MaxBundle = abi.MaxBundle
	}
	if opts.DownloadTimeout <= 0 {
		opts.DownloadTimeout = DefaultDownload
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = newHTTPClient(opts.DownloadTimeout)
	}
	if opts.BackoffMin <= 0 {
		opts.BackoffMin = DefaultBackoffMin
	}
	if opts.BackoffMax < opts.BackoffMin {
		opts.BackoffMax = max(DefaultBackoffMax, opts.BackoffMin)
	}
	if opts.MaxFailures <= 0 {
		opts.MaxFailures = DefaultMaxFailures
	}
	if opts.StableAfter <= 0 {
		opts.StableAfter = DefaultStableAfter
	}
	m := &Manager{opts: opts, clk: opts.Clock, log: opts.Logger, part: partition{dir: opts.Dir},
		plugins: map[string]*plugin{}, putClaims: map[string]string{}}
	m.started = m.clk.Now()
	if err := m.part.open(); err != nil {
		return nil, err
	}
	keys, bad, err := trust.Open(filepath.Join(opts.Dir, keysDir), opts.TrustedKeys, m.clk.Now)
	if err != nil {
		return nil, err
	}
	for _, e := range bad {
		m.log.Warn("publisher key ignored", "err", e)
	}
	m.keys = keys
	m.uploads = newUploads(filepath.Join(opts.Dir, uploadsDir), m.clk, opts.MaxBundle)
	if opts.CacheDir == "" {
		opts.CacheDir = filepath.Join(opts.Dir, cacheDir)
		m.opts.CacheDir = opts.CacheDir
	}
	eng, err := newEngine(opts.CacheDir, opts.MemoryPages, opts.StackBytes, hostFunctions())
	if err != nil {
		return nil, err
	}
	m.eng = eng
	ids, err := m.part.list()
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		rec, err := m.part.readRecord(id)
		if err != nil {
			m.log.Error("installed plugin unreadable, skipped", "id", id, "err", err)
			continue
		}
		p := m.newPlugin(rec)
		if b, err := m.part.readBundle(id); err == nil {
			if bd, err := abi.Parse(b); err == nil {
				p.man, p.size = bd.Manifest, int64(len(b))
			}
		}
		m.plugins[id] = p
	}
	return m, nil
}

// Run starts every installed plugin that should run, in the background, and supervises the
// plugins until ctx ends; then it stops them in order and returns.
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	m.runCtx = ctx
	for _, p := range m.sortedLocked() {
		m.startSupervisorLocked(p)
	}
	m.mu.Unlock()
	m.reportHealth()
	m.publish()
	<-ctx.Done()
	m.wg.Wait()
	m.mu.Lock()
	ps := m.sortedLocked()
	m.mu.Unlock()
	for _, p := range ps {
		p.releaseCompiled()
	}
	m.uploads.closeAll()
	m.eng.close(context.Background())
	return nil
}

func (m *Manager) startSupervisorLocked(p *plugin) {
	if m.runCtx == nil || p.supervised {
		return
	}
	p.supervised = true
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		// Every export call runs on this goroutine: a plugin spinning into its time limit
		// must not take a core from the host's own work.
		lowerWorkerPriority()
		p.supervise(m.runCtx)
	}()
}

func (m *Manager) sortedLocked() []*plugin {
	out := make([]*plugin, 0, len(m.plugins))
	for _, p := range m.plugins {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (m *Manager) get(id string) *plugin {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.plugins[id]
}

// wallTime is the device's wall clock as the plugin's WASI clock: the clock source's time,
// or the host's when none is wired.
func (m *Manager) wallTime() time.Time {
	if m.opts.WallClock != nil {
		if t, _, _ := m.opts.WallClock(); !t.IsZero() {
			return t
		}
	}
	return m.clk.Now()
}

// Trust is the trust store.
func (m *Manager) Trust() *trust.Store { return m.keys }

// ConfigChanged tells the host a key's effective value changed (config.Config.OnChange).
func (m *Manager) ConfigChanged(ns, _ string) {
	id, ok := strings.CutPrefix(ns, "f_")
	if !ok {
		return
	}
	if p := m.get(id); p != nil {
		p.inbox.markConfig(p.gen.Load())
	}
}

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
}

// List answers the state of every installed plugin, by id.
func (m *Manager) List() ListDoc {
	m.mu.Lock()
	ps := m.sortedLocked()
	m.mu.Unlock()
	doc := ListDoc{Plugins: make([]Status, 0, len(ps))}
	for _, p := range ps {
		doc.Plugins = append(doc.Plugins, p.status())
	}
	return doc
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

// claimPutPattern reserves an inbound PUT pattern for one plugin.
func (m *Manager) claimPutPattern(id, pattern string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if owner, ok := m.putClaims[pattern]; ok && owner != id {
		return false
	}
	m.putClaims[pattern] = id
	return true
}

func (m *Manager) releasePutPattern(id, pattern string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.putClaims[pattern] == id {
		delete(m.putClaims, pattern)
	}
}

func (m *Manager) releasePutPatterns(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for pat, owner := range m.putClaims {
		if owner == id {
			delete(m.putClaims, pat)
		}
	}
}

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
	// loadCancel ends the load in progress (compile, start, init); nil when not loading.
	loadCancel context.CancelFunc
}

type command struct {
	start bool
	done  chan struct{}
}

func (m *Manager) newPlugin(rec record) *plugin {
	p := &plugin{m: m, id: rec.ID, rec: rec, inbox: newInbox(), ctl: make(chan command, 8),
		exited: make(chan struct{}), healthNames: map[string]bool{}}
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
	return st
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
