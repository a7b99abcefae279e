// Package system owns the device-level endpoints: ping, the system info document, reboot,
// factory reset, the core dump and the deliberate crash. It holds no device state of its own
// beyond the read-once `last_reset` record; everything else it reports is asked of its owner
// at request time, so every field is live.
//
// Choices where the spec is silent: `idf_version` is the Go toolchain version; a factory reset
// erases the configuration store (`nvs`) only, leaving the core dump, the UI and installed
// plugin bundles in their own partitions; the ping document is
// `{app, version, auth}` where `auth` is true when protected endpoints need a credential.
package system

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/api"
	"devhost/host/board"
	"devhost/host/build"
)

// TimeInfo is the `time` member of the info document.
type TimeInfo struct {
	Synced bool   `json:"synced"`
	Source string `json:"source"`
	Now    int64  `json:"now"`
}

// Options wires the package to the owners of what it reports. Every function must be set
// except where noted.
type Options struct {
	Clock        clockwork.Clock
	Logger       *slog.Logger
	Board        board.Board
	ResetReason  string
	StorageReset bool // config_storage_reset
	SchemaETag   func() string
	UIStorage    func() bool
	Time         func() TimeInfo
	// LastReset is the health watchdog's reset record left for this boot, or nil.
	LastReset any
	// AuthWanted reports whether protected endpoints need a credential (the ping's `auth`).
	AuthWanted func() bool
	// CoreDump reads the core dump partition: summary document and raw image, fs.ErrNotExist
	// when there is none.
	CoreDump      func() (any, []byte, error)
	EraseCoreDump func() error
	// Restart arms a reboot (factory true: erase the store first). The device refuses writes
	// from now on and restarts about 500 ms later.
	Restart func(factory bool)
	// Crash enables POST /system/crash (HTTPD_DEBUG_CRASH).
	Crash bool
}

// System serves the /system endpoints.
type System struct {
	opts    Options
	started time.Time
	// pingDocs are the two ping documents (index 1: auth true), encoded once: the ping is
	// the endpoint clients poll, and its content only changes with AuthWanted.
	pingDocs [2][]byte

	mu        sync.Mutex
	lastReset any // cleared by the boot's first read
}

// New builds the system endpoints. The uptime counts from this call.
func New(opts Options) *System {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	s := &System{opts: opts, started: opts.Clock.Now()}
	for i, wanted := range []bool{false, true} {
		// Two strings and a bool: encoding cannot fail.
		b, _ := json.Marshal(ping{App: build.App, Version: build.Version, Auth: wanted})
		s.pingDocs[i] = append(b, '\n')
	}
	// The record is only believed after a software reset (the watchdog's).
	if opts.ResetReason == "software" {
		s.lastReset = opts.LastReset
	}
	return s
}

// Uptime is the time since the app started.
func (s *System) Uptime() time.Duration { return s.opts.Clock.Since(s.started) }

// Routes lists the endpoints.
func (s *System) Routes() []api.Route {
	rs := []api.Route{
		{Method: "GET", Path: "/system/ping", Public: true, Handler: s.ping},
		{Method: "GET", Path: "/system/info", Handler: s.info},
		{Method: "POST", Path: "/system/reboot", NoBody: true, Handler: s.reboot},
		{Method: "POST", Path: "/system/factory-reset", NoBody: true, Handler: s.factoryReset},
		{Method: "GET", Path: "/system/coredump", Handler: s.coreDump},
		{Method: "GET", Path: "/system/coredump/raw", Handler: s.coreDumpRaw},
		{Method: "DELETE", Path: "/system/coredump", NoBody: true, Handler: s.eraseCoreDump},
	}
	if s.opts.Crash {
		rs = append(rs, api.Route{Method: "POST", Path: "/system/crash", NoBody: true, Handler: s.crash})
	}
	return rs
}

type ping struct {
	App     string `json:"app"`
	Version string `json:"version"`
	Auth    bool   `json:"auth"`
}

func (s *System) ping(w http.ResponseWriter, _ *http.Request) {
	doc := s.pingDocs[0]
	if s.opts.AuthWanted() {
		doc = s.pingDocs[1]
	}
	api.WriteRawJSON(w, http.StatusOK, doc)
}

// Info is the system info document.
type Info struct {
	App                string             `json:"app"`
	Version            string             `json:"version"`
	IDFVersion         string             `json:"idf_version"`
	Chip               string             `json:"chip"`
	ChipRevision       int                `json:"chip_revision"`
	Cores              int                `json:"cores"`
	UptimeS            int64              `json:"uptime_s"`
	FreeHeap           int64              `json:"free_heap"`
	MinFreeHeap        int64              `json:"min_free_heap"`
	FreeInternal       int64              `json:"free_internal"`
	MinInternalFree    int64              `json:"min_internal_free"`
	ResetReason        string             `json:"reset_reason"`
	ConfigStorageReset bool               `json:"config_storage_reset"`
	SchemaETag         string             `json:"schema_etag"`
	UIStorage          bool               `json:"ui_storage"`
	Hardware           board.InfoHardware `json:"hardware"`
	Time               TimeInfo           `json:"time"`
	LastReset          any                `json:"last_reset"`
}

// Info builds the document; takeLastReset consumes the read-once record.
func (s *System) Info(takeLastReset bool) Info {
	hw := s.opts.Board.Hardware()
	mem := s.opts.Board.Memory()
	if hw.Features == nil {
		hw.Features = []string{}
	}
	info := Info{
		App: build.App, Version: build.Version, IDFVersion: build.PlatformVersion(),
		Chip: hw.Chip, ChipRevision: hw.ChipRevision, Cores: hw.Cores,
		UptimeS:  int64(s.Uptime() / time.Second),
		FreeHeap: mem.FreeHeap, MinFreeHeap: mem.MinFreeHeap,
		FreeInternal: mem.FreeInternal, MinInternalFree: mem.MinFreeInternal,
		ResetReason: s.opts.ResetReason, ConfigStorageReset: s.opts.StorageReset,
		SchemaETag: s.opts.SchemaETag(), UIStorage: s.opts.UIStorage(),
		Hardware: hw.InfoHardware, Time: s.opts.Time(),
	}
	s.mu.Lock()
	info.LastReset = s.lastReset
	if takeLastReset {
		s.lastReset = nil
	}
	s.mu.Unlock()
	return info
}

func (s *System) info(w http.ResponseWriter, _ *http.Request) {
	api.WriteJSON(w, http.StatusOK, s.Info(true))
}

func (s *System) reboot(w http.ResponseWriter, _ *http.Request) {
	s.opts.Logger.Warn("reboot requested over the API")
	s.opts.Restart(false)
	api.WriteJSON(w, http.StatusAccepted, map[string]string{"status": "rebooting"})
}

func (s *System) factoryReset(w http.ResponseWriter, _ *http.Request) {
	s.opts.Logger.Warn("factory reset requested over the API")
	s.opts.Restart(true)
	api.WriteJSON(w, http.StatusAccepted, map[string]any{"status": "factory_reset", "rebooting": true})
}

func (s *System) coreDump(w http.ResponseWriter, _ *http.Request) {
	sum, _, err := s.opts.CoreDump()
	if s.coreDumpErr(w, err) {
		return
	}
	api.WriteJSON(w, http.StatusOK, sum)
}

func (s *System) coreDumpRaw(w http.ResponseWriter, _ *http.Request) {
	_, raw, err := s.opts.CoreDump()
	if s.coreDumpErr(w, err) {
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Length", strconv.Itoa(len(raw)))
	h.Set("Content-Disposition", `attachment; filename="coredump.bin"`)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(raw)
}

func (s *System) coreDumpErr(w http.ResponseWriter, err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, fs.ErrNotExist) {
		api.WriteErr(w, api.Errorf(http.StatusNotFound, api.CodeNotFound, "no core dump"))
		return true
	}
	s.opts.Logger.Error("read core dump", "err", err)
	api.WriteErr(w, fmt.Errorf("read core dump: %w", err))
	return true
}

func (s *System) eraseCoreDump(w http.ResponseWriter, _ *http.Request) {
	if err := s.opts.EraseCoreDump(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.opts.Logger.Error("erase core dump", "err", err)
		api.WriteErr(w, fmt.Errorf("erase core dump: %w", err))
		return
	}
	api.WriteJSON(w, http.StatusOK, map[string]string{"status": "erased"})
}

// crash panics on a goroutine of its own: net/http recovers handler panics, a firmware crash
// does not recover, and the panicking goroutine is what the core dump names.
func (s *System) crash(w http.ResponseWriter, _ *http.Request) {
	s.opts.Logger.Error("crash requested over the API")
	api.WriteJSON(w, http.StatusAccepted, map[string]string{"status": "crashing"})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	go deliberateCrash()
}

func deliberateCrash() {
	time.Sleep(100 * time.Millisecond) // let the answer leave
	panic("deliberate crash requested by POST /system/crash")
}
