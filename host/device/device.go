// Package device builds the app (the firmware image the boot supervisor runs) from its
// capabilities and runs it: it opens the flash, applies the factory document to an empty store,
// wires every capability to the others through narrow functions and notifications, serves HTTP,
// and turns reboot, factory-reset and watchdog requests into the exits the supervisor
// understands. It owns no behaviour of its own beyond that wiring.
package device

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/sync/errgroup"

	"devhost/abi"
	"devhost/host/api"
	"devhost/host/auth"
	"devhost/host/board"
	"devhost/host/boot"
	"devhost/host/build"
	"devhost/host/clock"
	"devhost/host/config"
	"devhost/host/events"
	"devhost/host/health"
	"devhost/host/httpd"
	"devhost/host/logs"
	"devhost/host/mdns"
	"devhost/host/netroute"
	"devhost/host/ota"
	"devhost/host/plugin"
	"devhost/host/portal"
	"devhost/host/power"
	"devhost/host/signalk"
	"devhost/host/sntp"
	"devhost/host/store"
	"devhost/host/system"
	"devhost/host/ui"
	"devhost/host/wifi"
	runtimens "devhost/runtime-ns"
)

// Options are the device command's flags and start options.
type Options struct {
	DataDir     string
	FactoryFile string
	BoardFile   string
	Listen      string // station-side bind address; "" = all addresses
	Port        int    // HTTP port for this run over the stored httpd.port; 0 = the stored one
	Stdout      io.Writer
	Stderr      io.Writer

	Handoff boot.Handoff

	AuthRequired   bool
	DebugCrash     bool
	HealthWatchdog bool
	PortalRecovery bool
	// MDNSInterfaces are the interfaces mDNS discovery may use; none means no discovery
	// (sk.server_host must be set).
	MDNSInterfaces []string
	// HealthTick overrides the health policy tick (tests of the watchdog restart only).
	HealthTick time.Duration
	// OTAConfirmUptime overrides the 60 s after which a new image without a station confirms.
	OTAConfirmUptime time.Duration
	// DeepSleep receives the sleep's duration and RTC memory before Run returns ExitDeepSleep.
	DeepSleep func(d time.Duration, rtc []byte)
}

// Exit is how a run of the app ended.
type Exit int

// The ways the app hands control back to the supervisor.
const (
	ExitShutdown  Exit = iota // asked to stop (SIGTERM): the supervisor stops too
	ExitReboot                // software reset (POST /system/reboot, factory reset)
	ExitWatchdog              // the health policy restarts the device
	ExitDeepSleep             // the duty cycle sleeps (Options.DeepSleep has the parameters)
)

// Device is one boot of the app.
type Device struct {
	opts  Options
	clk   clockwork.Clock
	ring  *logs.Ring
	log   *slog.Logger
	store *store.Store
	cfg   *config.Config
	sim   *board.Sim
	hub   *events.Hub
	hlth  *health.Registry
	auth  *auth.Auth
	clock *clock.Clock
	ui    *ui.UI
	net   *netroute.Route
	wifi  *wifi.Manager
	sk    *signalk.Client
	mdns  *mdns.Responder // nil without --mdns-iface
	sntp  *sntp.Client
	ota   *ota.Updater
	power *power.Cycle
	rtns  *runtimens.Registry
	sys   *system.System
	srv   *httpd.Server
	ap    *portal.Portal  // the setup portal's network side
	pm    *plugin.Manager // set before the server serves

	wifiWatchers   watchers[abi.WiFiStatus] // plugins' wifi_watch
	buttonWatchers watchers[int]            // plugins' button_watch: the press's window in seconds

	exitOnce sync.Once
	exit     Exit
	stop     context.CancelFunc
	erase    bool

	skConnected func() bool   // the Signal K stream is connected
	sleepFor    time.Duration // the deep sleep the duty cycle asked for
	sleepRTC    []byte        // and the RTC memory it leaves
}

// Keys in the store that are device state rather than configuration.
const (
	keyResetRecord = "state/reset_record"
	keyRecovery    = "state/recovery_cycles"
)

// Run boots the app and serves until ctx ends or the device asks to restart.
func Run(ctx context.Context, opts Options) (Exit, error) {
	d, err := open(opts)
	if err != nil {
		return ExitShutdown, err
	}
	exit, err := d.run(ctx)
	if exit == ExitDeepSleep && opts.DeepSleep != nil {
		opts.DeepSleep(d.sleepFor, d.sleepRTC)
	}
	return exit, err
}

func open(opts Options) (*Device, error) {
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	d := &Device{opts: opts, clk: clockwork.NewRealClock()}
	d.ring = logs.New(logs.Options{Clock: d.clk, Console: opts.Stderr})
	d.log = d.ring.Logger("main")
	d.log.Info("boot", "reset_reason", opts.Handoff.ResetReason, "version", build.Version)

	st, err := store.Open(filepath.Join(opts.DataDir, "nvs"))
	if err != nil {
		return nil, fmt.Errorf("open the configuration store: %w", err)
	}
	d.store = st
	empty, err := storeEmpty(st)
	if err != nil {
		return nil, err
	}
	d.sim, err = board.LoadSim(opts.BoardFile)
	if err != nil {
		return nil, fmt.Errorf("board: %w", err)
	}
	// The device identifier fills the defaults the spec writes with <id>.
	cfg, err := config.New(st, d.ring.Logger("config"), config.BuiltinFor(d.sim.Hardware().DeviceID())...)
	if err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	d.cfg = cfg
	if empty && opts.FactoryFile != "" {
		if err := d.applyFactory(); err != nil {
			return nil, err
		}
	}

	return d, nil
}

func storeEmpty(st *store.Store) (bool, error) {
	empty := true
	err := st.Scan("", func(string, string) bool { empty = false; return false })
	if err != nil {
		return false, fmt.Errorf("scan the store: %w", err)
	}
	return empty, nil
}

func (d *Device) applyFactory() error {
	b, err := os.ReadFile(d.opts.FactoryFile)
	if err != nil {
		return fmt.Errorf("factory document: %w", err)
	}
	if _, err := d.cfg.Apply(b); err != nil {
		return fmt.Errorf("factory document %s: %w", d.opts.FactoryFile, err)
	}
	d.log.Info("factory configuration applied", "file", d.opts.FactoryFile)
	return nil
}

func (d *Device) run(parent context.Context) (Exit, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	d.stop = cancel
	opts := d.opts

	d.hub = events.New(events.Options{Clock: d.clk, Logger: d.ring.Logger("events")})
	var rtc *clock.RTCValue
	if _, clk := splitRTC(opts.Handoff.RTC); opts.Handoff.ResetReason == "deepsleep" && len(clk) > 0 {
		if v, err := clock.DecodeRTC(clk); err == nil {
			rtc = v
		} else {
			d.log.Warn("RTC memory ignored", "err", err)
		}
	}
	d.clock = clock.New(clock.Options{Clock: d.clk, Logger: d.ring.Logger("time"), RTC: rtc,
		StaleAfter: clock.DefaultStaleAfter, TZ: tzStore{d.cfg}, SNTP: d.sntpConfig})
	d.ring.SetWallClock(d.clock.WallClock)

	lastReset := d.takeResetRecord()
	started := d.clk.Now()
	d.hlth = health.New(health.Options{Clock: d.clk, Logger: d.ring.Logger("health"), Memory: d.sim.Memory,
		Policy: opts.HealthWatchdog, Restart: d.watchdogRestart, WallClock: d.clock.WallClock,
		Uptime: func() time.Duration { return d.clk.Since(started) }, Tick: opts.HealthTick})
	d.reportStorage()
	d.auth = auth.New(auth.Options{Clock: d.clk, Logger: d.ring.Logger("auth"),
		Key:        func() string { return d.cfg.String("httpd", "api_key") },
		SessionTTL: func() time.Duration { return time.Duration(d.cfg.Int("httpd", "session_ttl_s")) * time.Second },
		Required:   opts.AuthRequired, PortalIP: d.portalIP, Recovery: opts.PortalRecovery,
		Counter: counterStore{d.store}, PowerOn: opts.Handoff.ResetReason == "poweron"})
	hw := d.sim.Hardware()
	d.net = netroute.New(netroute.Options{Clock: d.clk, Logger: d.ring.Logger("net"), MAC: hw.MAC, ID: hw.DeviceID(),
		Hostname: func() string { return d.cfg.String("net", "hostname") },
		Publish:  d.hub.Publish, Health: healthReporter{d.hlth}})
	d.hub.OnConnect(func() []events.Event { name, st := d.net.OnConnect(); return []events.Event{{Name: name, Data: st}} })
	d.newPortal()
	d.wifi = d.wifiStation(announcedPortal{d})
	if err := d.writeLabel(); err != nil {
		return ExitShutdown, err
	}
	d.ui = ui.New(filepath.Join(opts.DataDir, "ui"), d.ring.Logger("ui"))
	// A partition that holds a UI already (every boot after the first) is compared with the
	// carried one once the device answers: the comparison hashes every carried file, and it
	// almost always finds them the same. A firmware carrying another UI swaps it in a moment
	// after the listener opens. An empty partition is written first, so the first page
	// served is the real UI.
	uiLater := d.ui.Available()
	if !uiLater {
		d.installUI()
	}
	d.rtns = runtimens.New(d.cfg, healthReporter{d.hlth})
	d.sys = system.New(system.Options{Clock: d.clk, Logger: d.ring.Logger("system"), Board: d.sim,
		ResetReason: opts.Handoff.ResetReason, StorageReset: d.store.ErasedAtBoot(),
		SchemaETag: func() string { _, etag := d.cfg.Schema(); return etag },
		UIStorage:  d.ui.Available,
		Time: func() system.TimeInfo {
			t, src, synced := d.clock.Now()
			ti := system.TimeInfo{Synced: synced, Source: src.String()}
			if !t.IsZero() {
				ti.Now = t.UnixMilli()
			}
			return ti
		},
		LastReset:     lastReset,
		AuthWanted:    func() bool { return opts.AuthRequired || d.cfg.String("httpd", "api_key") != "" },
		CoreDump:      func() (any, []byte, error) { return boot.ReadCoreDump(opts.DataDir) },
		EraseCoreDump: func() error { return boot.EraseCoreDump(opts.DataDir) },
		Restart:       func(factory bool) { d.restart(ExitReboot, factory) },
		Crash:         opts.DebugCrash,
	})
	d.srv = httpd.New(httpd.Options{Logger: d.ring.Logger("httpd"), Auth: authCheck{d.auth}, UI: d.portalRoot(d.probeAliases(d.ui)),
		AllowedHosts: func() []string { return d.hostNames(hw.DeviceID()) }, AnyHost: d.auth.OnPortal})
	for _, rs := range [][]api.Route{d.sys.Routes(), d.cfg.Routes(), d.auth.Routes(), d.ring.Routes(),
		d.hlth.Routes(), d.clock.Routes(), d.hub.Routes(), d.net.Routes(), d.wifi.Routes(), d.ap.Routes()} {
		if err := d.srv.HandleAll(rs); err != nil {
			return ExitShutdown, fmt.Errorf("routes: %w", err)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	// fail stops what already runs before a boot that cannot finish returns.
	fail := func(err error) (Exit, error) {
		cancel()
		_ = g.Wait()
		return ExitShutdown, err
	}
	if err := d.signalK(gctx, g); err != nil {
		return fail(err)
	}
	if err := d.otaUpdater(gctx, g, started); err != nil {
		return fail(err)
	}
	if err := d.powerCycle(gctx, g); err != nil {
		return fail(err)
	}
	if err := d.plugins(gctx, g); err != nil {
		return fail(err)
	}
	if err := d.startSNTP(gctx, g); err != nil {
		return fail(err)
	}
	cfgLog := d.ring.Logger("config")
	d.cfg.OnChange(func(ns, key string) {
		// The key only: a secret's value never reaches the log.
		cfgLog.Info("changed", "key", ns+"."+key)
		d.hub.Publish("config", map[string]string{"ns": ns, "key": key})
		if ns == "httpd" && key == "api_key" {
			d.auth.KeyChanged()
		}
	})

	ctl, err := board.Listen(filepath.Join(opts.DataDir, "board.sock"))
	if err != nil {
		return fail(fmt.Errorf("board control channel: %w", err))
	}
	port := d.listenPort()
	ln, err := net.Listen("tcp", net.JoinHostPort(opts.Listen, strconv.Itoa(port)))
	if err != nil {
		ctl.Close()
		return fail(fmt.Errorf("listen on port %d: %w", port, err))
	}
	fmt.Fprintf(opts.Stdout, "devhost: listening on http://%s\n", displayAddr(ln.Addr()))
	d.sayWidened(ln.Addr())
	d.log.Info("listening", "addr", ln.Addr().String())

	g.Go(func() error { return d.srv.Serve(gctx, ln) })
	if uiLater {
		g.Go(func() error { d.installUI(); return nil })
	}
	g.Go(func() error { d.hlth.Run(gctx); return nil })
	g.Go(func() error { return d.auth.Run(gctx) })
	g.Go(func() error { d.ring.Notify(gctx, d.hub.Publish); return nil })
	g.Go(func() error { <-gctx.Done(); d.hub.Close(); return nil })
	g.Go(func() error {
		if err := d.sim.ServeListener(gctx, ctl); err != nil && gctx.Err() == nil {
			return fmt.Errorf("board control channel: %w", err)
		}
		return nil
	})
	g.Go(func() error { d.boardEvents(gctx); return nil })
	runWiFi(gctx, g, d.wifi)
	g.Go(func() error { d.compactStore(gctx); return nil })
	runErr := g.Wait()

	if d.erase {
		if err := d.store.EraseAll(); err != nil {
			d.log.Error("factory reset: erase the store", "err", err)
		} else {
			d.log.Warn("factory reset: configuration erased")
		}
	}
	if err := d.store.Close(); err != nil {
		d.log.Error("close the store", "err", err)
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return ExitShutdown, runErr
	}
	return d.exit, nil
}

// installUI writes the carried UI into the partition when the partition holds another one.
func (d *Device) installUI() {
	if wrote, err := d.ui.InstallBundled(); err != nil {
		d.ring.Logger("ui").Warn("ui partition not written", "err", err)
	} else if wrote {
		d.ring.Logger("ui").Info("ui partition written from the bundled build")
	}
}

// restart arms a reset: writes are refused from now on, and about 500 ms later the app stops
// serving and hands control back to the supervisor.
func (d *Device) restart(why Exit, erase bool) { d.restartAfter(why, erase, 500*time.Millisecond) }

// restartAfter is restart with another delay (the update reboot waits about 1.5 s).
func (d *Device) restartAfter(why Exit, erase bool, delay time.Duration) {
	d.exitOnce.Do(func() {
		d.srv.SetRestarting()
		d.exit, d.erase = why, erase
		d.clk.AfterFunc(delay, d.stop)
	})
}

// watchdogRestart is the health policy's restart: the reset record is written first.
func (d *Device) watchdogRestart(rec health.ResetRecord) {
	b, err := json.Marshal(rec)
	if err == nil {
		err = d.store.Set(keyResetRecord, string(b))
	}
	if err != nil {
		d.log.Error("write the reset record", "err", err)
	}
	d.log.Error("health watchdog restart", "condition", rec.HealthKey, "message", rec.Message)
	d.restart(ExitWatchdog, false)
}

// takeResetRecord reads and removes the watchdog's record so it is shown for one boot only.
func (d *Device) takeResetRecord() any {
	v, ok, err := d.store.Get(keyResetRecord)
	if err != nil || !ok {
		return nil
	}
	if err := d.store.Delete(keyResetRecord); err != nil {
		d.log.Warn("remove the reset record", "err", err)
	}
	return json.RawMessage(v)
}

func (d *Device) boardEvents(ctx context.Context) {
	for ev := range d.sim.Subscribe(ctx) {
		if ev.Presence > 0 {
			d.buttonWatchers.tell(ev.Presence)
		}
		switch {
		case ev.Presence > 0:
			d.log.Warn("presence button: recovery window opened", "seconds", ev.Presence)
			d.auth.OpenWindow(ev.Presence)
		case ev.Iface != nil:
			d.net.Update(*ev.Iface)
		}
	}
}

// compactStore rewrites the store's log without dead records now and then: buntdb shrinks on
// its own only past 32 MiB, and the flash is small.
func (d *Device) compactStore(ctx context.Context) {
	t := d.clk.NewTicker(6 * time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			if err := d.store.Compact(); err != nil {
				d.log.Warn("compact the store", "err", err)
			}
		}
	}
}

func (d *Device) sntpConfig() clock.SNTPConfig {
	// The client in effect: its keys are restart-required, so a stored change waits for the
	// next boot and the document must not show it before. It is built (startSNTP) before the
	// HTTP server serves GET /time.
	if d.sntp == nil {
		return clock.SNTPConfig{}
	}
	st := d.sntp.Status()
	return clock.SNTPConfig{Enabled: st.Enabled, Running: st.Running, FromDHCP: st.FromDHCP, Servers: st.Servers}
}

// displayAddr is the URL host an operator can open: the loopback address when bound to all.
func displayAddr(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	ip := ta.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(ta.Port))
}

// tzStore keeps the clock's time zone in time.tz.
type tzStore struct{ cfg *config.Config }

func (t tzStore) TZ() string            { return t.cfg.String("time", "tz") }
func (t tzStore) SetTZ(tz string) error { return t.cfg.Set("time", "tz", tz) }

// counterStore keeps the recovery power-cycle count in the store.
type counterStore struct{ st *store.Store }

func (c counterStore) Load() (int, error) {
	v, ok, err := c.st.Get(keyRecovery)
	if err != nil || !ok {
		return 0, err
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, nil // a damaged count reads as none
	}
	return n, nil
}

func (c counterStore) Save(n int) error { return c.st.Set(keyRecovery, strconv.Itoa(n)) }

// healthReporter is the health registry for the parts that name states as strings (the
// run-time namespace registry, the network route, the plugin host).
type healthReporter struct{ r *health.Registry }

func (h healthReporter) Report(key, state, message string) error {
	return h.r.Report(key, health.State(state), message)
}

func (h healthReporter) ReportFatal(key, state, message string) error {
	return h.r.ReportFatal(key, health.State(state), message)
}

// hostNames are the names the HTTP server answers to besides IP literals and localhost:
// <hostname>.local (net.hostname, else dev-<id>) and the operator's httpd.hosts.
func (d *Device) hostNames(id string) []string {
	hn := d.cfg.String("net", "hostname")
	if hn == "" {
		hn = "dev-" + id
	}
	return append([]string{hn + ".local"}, config.HostNames(d.cfg.String("httpd", "hosts"))...)
}

// authCheck adapts auth to the HTTP server's Authenticator.
type authCheck struct{ a *auth.Auth }

func (c authCheck) Check(r *http.Request) error                 { _, err := c.a.Check(r); return err }
func (c authCheck) WriteError(w http.ResponseWriter, err error) { c.a.WriteError(w, err) }
func (c authCheck) Scope(ctx context.Context, r *http.Request) (context.Context, context.CancelFunc) {
	return c.a.Scope(ctx, r)
}
