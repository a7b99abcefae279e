package plugin

import (
	"context"
	"crypto/rsa"
	"errors"
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
	"devhost/host/plugin/trust"
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
	// ABI minor 2; each nil makes its functions answer ErrUnavailable.
	Peripheral Peripheral
	WiFi       WiFi
	Button     Button
	// PoP gives the device's proof of possession for provisioning (prov_pop).
	PoP func() (string, error)

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

	mu      sync.Mutex
	plugins map[string]*plugin
	runCtx  context.Context
	// stopping is set once Run began stopping the plugins: a plugin installed from then on
	// (an offer of a carried bundle or an upload racing the shutdown) waits for the next boot.
	stopping  bool
	wg        sync.WaitGroup
	offering  atomic.Int32      // offers of carried bundles in progress (OfferingBundled)
	putClaims map[string]string // PUT handler pattern → plugin id
	owners    periphOwners      // the GATT table's and the portal paths' instances

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
		if h, err := m.part.readHead(id); err == nil {
			p.man, p.size = h.Manifest, h.Size
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
	m.mu.Lock()
	m.stopping = true // no wg.Add after this: Wait must not race one
	m.mu.Unlock()
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
	if m.runCtx == nil || m.stopping || p.supervised {
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
		p.signalWake() // a dormant plugin looks at its conditions again
	}
}

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
