// Package ota is the app's side of firmware updates: the spec's OTA image lifecycle. It finds
// builds (a direct URL, a manifest at a URL, or a manifest on the Signal K server), streams an
// image into the slot that is not running, verifies it, hands the slot to the bootloader
// (package boot owns otadata and the boot-time rules) and reboots; after an update it confirms
// the new image or rolls it back. It owns the GET/POST /ota endpoints and the `ota` event.
//
// States (Status.State), designed where the spec is silent:
//
//	idle            nothing going on; the running image is confirmed
//	pending_verify  the running image is new and not confirmed yet
//	checking        fetching a manifest
//	available       a strictly newer build is known (Status.Available)
//	downloading     streaming an image into the other slot (Status.Progress 0..100)
//	verifying       SHA-256 and signature of the written image
//	ready           the other slot holds the verified image; reboot in about 1.5 s
//	failed          the last check or install failed (Status.Error); nothing changed
//
// A check or install starts from idle, available or failed; never while the running image is
// unconfirmed (the previous slot is the rollback target) nor while one is running.
package ota

import (
	"cmp"
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/boot"
)

// States of Status.State.
const (
	StateIdle          = "idle"
	StatePendingVerify = "pending_verify"
	StateChecking      = "checking"
	StateAvailable     = "available"
	StateDownloading   = "downloading"
	StateVerifying     = "verifying"
	StateReady         = "ready"
	StateFailed        = "failed"
)

// Timings of the spec's OTA lifecycle.
const (
	FirstCheckDelay      = 20 * time.Second
	RebootDelay          = 1500 * time.Millisecond
	DefaultConfirmUptime = 60 * time.Second
	// progressStep: an `ota` event about every 32 KiB of download.
	progressStep = 32 << 10
)

// Config is the `ota` namespace as the updater reads it.
type Config interface {
	String(ns, key string) string
	Bool(ns, key string) bool
	Int(ns, key string) int
}

// Station is the WiFi station as the confirmation rule needs it. The WiFi package provides it;
// until then a nil Station means no station is configured.
type Station interface {
	// Configured reports whether a station is configured and enabled.
	Configured() bool
}

// ManifestSource fetches the manifest at a path on the Signal K server (through the Signal K
// client's HTTP helper: its token, limits and TLS trust), returning the body and the URL it
// came from (relative build URLs resolve against it).
type ManifestSource interface {
	FetchManifest(ctx context.Context, path string) (body []byte, from string, err error)
}

// Options configures the updater. DataDir, Config and Restart are required.
type Options struct {
	Clock   clockwork.Clock
	Logger  *slog.Logger
	DataDir string
	// Slot is the slot the app runs from (boot handoff).
	Slot int
	// Project, Version and Target identify the running build; Target is the board's chip.
	Project, Version, Target string
	// Keys are the keys images are verified with (the compiled-in firmware key), asked for at
	// the first verification: a development key may still have to be generated.
	Keys    func() ([]*rsa.PublicKey, error)
	Config  Config
	Station Station
	// SignalK serves `ota.manifest_src` = signalk; nil when the build has no Signal K client.
	SignalK ManifestSource
	// Publish sends an SSE event.
	Publish func(name string, data any)
	// Restart refuses writes from now on and resets the device after delay.
	Restart func(delay time.Duration)
	// Uptime is the time since this boot started.
	Uptime func() time.Duration
	// ConfirmUptime replaces the 60 s of uptime after which an image confirms itself when no
	// station is configured (tests).
	ConfirmUptime time.Duration
	// HTTP fetches manifests and images; nil builds one per request from ota.allow_insecure.
	HTTP func(insecure bool) *http.Client
}

// Updater runs the lifecycle for one boot.
type Updater struct {
	o   Options
	log *slog.Logger

	mu        sync.Mutex
	st        Status
	busy      bool // a check or install runs
	netUp     bool
	netSeen   bool // the network was up at least once this boot
	restartin bool
	cancelJob context.CancelFunc
	jobs      sync.WaitGroup
	ctx       context.Context
	wake      chan struct{} // timers to rearm
	lastSent  int64         // bytes at the last progress event
}

// New reads otadata and builds the updater. A leftover partial download is removed.
func New(o Options) (*Updater, error) {
	o.Clock = cmp.Or(o.Clock, clockwork.NewRealClock())
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	if o.Publish == nil {
		o.Publish = func(string, any) {}
	}
	if o.ConfirmUptime <= 0 {
		o.ConfirmUptime = DefaultConfirmUptime
	}
	if o.Uptime == nil {
		start := o.Clock.Now()
		o.Uptime = func() time.Duration { return o.Clock.Since(start) }
	}
	if o.HTTP == nil {
		o.HTTP = defaultClient
	}
	if o.DataDir == "" || o.Config == nil || o.Restart == nil || o.Keys == nil {
		return nil, errors.New("ota: data directory, config, keys and restart are required")
	}
	u := &Updater{o: o, log: o.Logger, wake: make(chan struct{}, 1)}
	_ = os.Remove(downloadPath(o.DataDir, 1-o.Slot))
	d, err := boot.ReadOTAData(o.DataDir)
	if err != nil {
		return nil, fmt.Errorf("ota: %w", err)
	}
	u.st = Status{State: StateIdle}
	u.fill(d)
	if !u.st.Running.Confirmed {
		u.st.State = StatePendingVerify
	}
	return u, nil
}

func downloadPath(dir string, slot int) string {
	return filepath.Join(dir, filepath.Base(boot.SlotPath(dir, slot))+".download")
}

// fill copies what otadata says about the slots into the status.
func (u *Updater) fill(d boot.OTAData) {
	run, other := d.Slots[u.o.Slot], d.Slots[1-u.o.Slot]
	u.st.Running = Running{Version: u.o.Version, Slot: u.o.Slot, Confirmed: run.State == boot.SlotValid,
		RolledBack: other.Failed()}
	u.st.OtherVersion = nil
	if other.Version != "" && other.State != boot.SlotEmpty {
		v := other.Version
		u.st.OtherVersion = &v
	}
	u.st.OtherState = other.State
}

// Status is the GET /ota/status document and the `ota` event.
func (u *Updater) Status() Status {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.st.clone()
}

// OnConnect is the `ota` snapshot for a new event stream.
func (u *Updater) OnConnect() (string, any) { return "ota", u.Status() }

// publishLocked sends the status as an event; u.mu is held.
func (u *Updater) publishLocked() {
	u.o.Publish("ota", u.st.clone())
}

// setLocked moves to a state and publishes it.
func (u *Updater) setLocked(state string, errMsg string) {
	u.st.State = state
	u.st.Error = nil
	if errMsg != "" {
		u.st.Error = &errMsg
	}
	if state != StateDownloading && state != StateVerifying {
		u.st.Progress = nil
	}
	u.log.Info("state", "state", state, "error", errMsg)
	u.publishLocked()
}

func (u *Updater) kick() {
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// NetworkUp is the network-up edge: it ends the confirm timeout and arms the first check.
func (u *Updater) NetworkUp() {
	u.mu.Lock()
	u.netUp, u.netSeen = true, true
	u.mu.Unlock()
	u.kick()
}

// NetworkDown is the network-down edge.
func (u *Updater) NetworkDown() {
	u.mu.Lock()
	u.netUp = false
	u.mu.Unlock()
	u.kick()
}

// StationConnected is the WiFi station's connected notification: a pending image confirms.
func (u *Updater) StationConnected() {
	if err := u.confirm("WiFi station connected"); err != nil {
		u.log.Error("confirm", "err", err)
	}
}

// Unconfirmed reports whether the running image still waits for confirmation.
func (u *Updater) Unconfirmed() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return !u.st.Running.Confirmed
}

// Busy reports whether an update is being checked, downloaded or installed.
func (u *Updater) Busy() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.busy || u.st.State == StateReady
}

// confirm marks the running image valid; a no-op when it is.
func (u *Updater) confirm(why string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.st.Running.Confirmed {
		return nil
	}
	err := boot.UpdateOTAData(u.o.DataDir, func(d *boot.OTAData) error {
		d.Slots[u.o.Slot].State = boot.SlotValid
		return nil
	})
	if err != nil {
		return fmt.Errorf("ota: confirm: %w", err)
	}
	u.st.Running.Confirmed = true
	u.log.Info("running image confirmed", "version", u.o.Version, "slot", u.o.Slot, "why", why)
	if u.st.State == StatePendingVerify {
		u.setLocked(StateIdle, "")
	} else {
		u.publishLocked()
	}
	u.kick()
	return nil
}

// errNoRollback: the other slot holds nothing bootable.
var errNoRollback = errors.New("the other slot holds no image to roll back to")

// rollback marks the running image invalid, selects the other slot and reboots.
func (u *Updater) rollback(why string) error {
	_, err := u.rollbackIf(why, nil)
	return err
}

// rollbackIf is rollback when still(), read under the same lock as the rollback's writes,
// holds; it answers whether it rolled back. The confirm timeout passes the "neither
// confirmed nor networked" check here, so a confirmation or a network-up edge that lands
// between the timer firing and the rollback wins instead of being undone.
func (u *Updater) rollbackIf(why string, still func() bool) (bool, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if still != nil && !still() {
		return false, nil
	}
	if u.restartin {
		return false, errRestarting
	}
	d, err := boot.ReadOTAData(u.o.DataDir)
	if err != nil {
		return false, fmt.Errorf("ota: rollback: %w", err)
	}
	other := d.Slots[1-u.o.Slot]
	if other.State != boot.SlotValid {
		return false, errNoRollback
	}
	d.Slots[u.o.Slot].State = boot.SlotInvalid
	d.Boot = 1 - u.o.Slot
	if err := boot.WriteOTAData(u.o.DataDir, d); err != nil {
		return false, fmt.Errorf("ota: rollback: %w", err)
	}
	u.log.Warn("rolling back", "from", u.o.Version, "to", other.Version, "why", why)
	u.restartin = true
	u.o.Restart(500 * time.Millisecond)
	return true, nil
}

var errRestarting = errors.New("a reboot is pending")

// Run owns the updater's timers (the confirmation rules, the first and periodic checks) and
// its jobs; it returns when ctx ends, after the jobs stopped.
func (u *Updater) Run(ctx context.Context) {
	u.mu.Lock()
	u.ctx = ctx
	u.mu.Unlock()
	defer u.jobs.Wait()

	var (
		checkT      clockwork.Timer // next manifest check
		checkArmed  bool
		firstDone   bool
		confirmT    = u.o.Clock.NewTimer(u.confirmUptimeLeft())
		timeoutT    = u.o.Clock.NewTimer(u.confirmTimeout())
		timeoutLive = true
	)
	defer confirmT.Stop()
	defer timeoutT.Stop()
	stopCheck := func() {
		if checkT != nil {
			checkT.Stop()
		}
		checkArmed = false
	}
	defer stopCheck()
	checkC := func() <-chan time.Time {
		if checkArmed {
			return checkT.Chan()
		}
		return nil
	}
	for {
		u.mu.Lock()
		confirmed, netSeen, netUp := u.st.Running.Confirmed, u.netSeen, u.netUp
		u.mu.Unlock()
		if (confirmed || netSeen) && timeoutLive {
			timeoutT.Stop()
			timeoutLive = false
		}
		autoCheck := u.o.Config.Bool("ota", "auto_check")
		switch {
		case !autoCheck || !netUp:
			stopCheck()
		case !checkArmed:
			d := FirstCheckDelay
			if firstDone {
				d = time.Duration(u.o.Config.Int("ota", "check_h")) * time.Hour
			}
			checkT = u.o.Clock.NewTimer(d)
			checkArmed = true
		}
		var timeoutC <-chan time.Time
		if timeoutLive {
			timeoutC = timeoutT.Chan()
		}
		select {
		case <-ctx.Done():
			u.cancelRunning()
			return
		case <-u.wake:
		case <-confirmT.Chan():
			if u.o.Station == nil || !u.o.Station.Configured() {
				if err := u.confirm("uptime without a configured station"); err != nil {
					u.log.Error("confirm", "err", err)
				}
			}
		case <-timeoutC:
			timeoutLive = false
			// The select takes any ready case: the network may have come up, or the image
			// been confirmed, after the read above and before the timer fired, or may yet
			// before the rollback writes. The rollback checks again under its own lock.
			rolled, err := u.rollbackIf("no network within ota.confirm_tmo_s", func() bool {
				return !u.st.Running.Confirmed && !u.netSeen
			})
			if err != nil {
				u.log.Error("no network within the confirm timeout; rollback failed", "err", err)
			} else if rolled {
				u.log.Error("no network within the confirm timeout")
			}
		case <-checkC():
			checkArmed, firstDone = false, true
			if err := u.startCheck(false); err != nil {
				u.log.Info("periodic check skipped", "why", err)
			}
		}
	}
}

func (u *Updater) confirmUptimeLeft() time.Duration {
	return max(u.o.ConfirmUptime-u.o.Uptime(), 0)
}

func (u *Updater) confirmTimeout() time.Duration {
	return max(time.Duration(u.o.Config.Int("ota", "confirm_tmo_s"))*time.Second-u.o.Uptime(), 0)
}

// cancelRunning stops a running job (the app is shutting down).
func (u *Updater) cancelRunning() {
	u.mu.Lock()
	c := u.cancelJob
	u.mu.Unlock()
	if c != nil {
		c()
	}
}
