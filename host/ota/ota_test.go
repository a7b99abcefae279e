package ota

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/boot"
	"devhost/host/ota/image"
	"devhost/host/ota/otatest"
	"devhost/host/testio"
)

func packImage(t *testing.T, k *rsa.PrivateKey, project, version string, exe []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	h := image.Header{Project: project, Version: version, Target: "esp32s3", BuildTime: "2026-01-01T00:00:00Z"}
	if err := image.Pack(&b, h, bytes.NewReader(exe), int64(len(exe)), k); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

type fakeConfig struct {
	mu     sync.Mutex
	m      map[string]any
	onBool func(key string) // when set, called (outside the lock) at each Bool with "ns.key"
}

func newConfig() *fakeConfig {
	return &fakeConfig{m: map[string]any{"ota.manifest_src": "url", "ota.manifest_url": "", "ota.channel": "stable",
		"ota.auto_check": true, "ota.check_h": 24, "ota.auto_install": false, "ota.allow_insecure": false,
		"ota.confirm_tmo_s": 600, "ota.manifest_path": "/m.json"}}
}

func (c *fakeConfig) set(k string, v any) { c.mu.Lock(); c.m[k] = v; c.mu.Unlock() }
func (c *fakeConfig) get(ns, k string) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[ns+"."+k]
}
func (c *fakeConfig) String(ns, k string) string { s, _ := c.get(ns, k).(string); return s }
func (c *fakeConfig) Bool(ns, k string) bool {
	c.mu.Lock()
	hook := c.onBool
	c.mu.Unlock()
	if hook != nil {
		hook(ns + "." + k)
	}
	b, _ := c.get(ns, k).(bool)
	return b
}
func (c *fakeConfig) Int(ns, k string) int { i, _ := c.get(ns, k).(int); return i }

type station struct{ configured bool }

func (s station) Configured() bool { return s.configured }

// rig is one boot of the updater over a throwaway flash, with a fake clock and a loopback
// file server.
type rig struct {
	t        *testing.T
	dir      string
	clk      *clockwork.FakeClock
	cfg      *fakeConfig
	key      *rsa.PrivateKey
	u        *Updater
	srv      *httptest.Server
	files    map[string][]byte
	mu       sync.Mutex
	events   []Status
	restarts []time.Duration
	cancel   context.CancelFunc
	done     chan struct{}
}

// newRig writes otadata (slot 0 valid 1.0.0, slot 1 as given) and boots from slot.
func newRig(t *testing.T, slot int, slots [2]boot.Slot, st Station) *rig {
	r := &rig{t: t, dir: t.TempDir(), clk: clockwork.NewFakeClock(), cfg: newConfig(), key: otatest.Key(t, "publisher"),
		files: map[string][]byte{}}
	for n := range 2 {
		if slots[n].State != boot.SlotEmpty {
			exe := []byte("slot " + slots[n].Version)
			if err := os.WriteFile(boot.SlotPath(r.dir, n), exe, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := boot.WriteOTAData(r.dir, boot.OTAData{Boot: slot, Slots: slots}); err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		b, ok := r.files[req.URL.Path]
		r.mu.Unlock()
		if !ok {
			http.NotFound(w, req)
			return
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(r.srv.Close)
	u, err := New(Options{Clock: r.clk, DataDir: r.dir, Slot: slot, Project: "devhost",
		Version: slots[slot].Version, Target: "esp32s3", Keys: func() ([]*rsa.PublicKey, error) { return []*rsa.PublicKey{&r.key.PublicKey}, nil }, Config: r.cfg,
		Station: st,
		Publish: func(name string, data any) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.events = append(r.events, data.(Status))
		},
		Restart: func(d time.Duration) { r.mu.Lock(); r.restarts = append(r.restarts, d); r.mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	r.u = u
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel, r.done = cancel, make(chan struct{})
	go func() { defer close(r.done); u.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-r.done })
	r.waitFor("the updater to run", func() bool { u.mu.Lock(); defer u.mu.Unlock(); return u.ctx != nil })
	return r
}

func confirmedRig(t *testing.T) *rig {
	return newRig(t, 0, [2]boot.Slot{{State: boot.SlotValid, Version: "1.0.0"}, {State: boot.SlotEmpty}}, nil)
}

// waitFor waits for cond; a failure shows the updater's status, the first thing to look at.
func (r *rig) waitFor(what string, cond func() bool) {
	r.t.Helper()
	testio.Await(r.t, hangGuard, what, r.u.Status, func(Status) bool { return cond() })
}

// waitState waits for the updater to reach state and answers the status in that state.
func (r *rig) waitState(state string) Status {
	r.t.Helper()
	return testio.Await(r.t, hangGuard, "state "+state, r.u.Status, func(s Status) bool { return s.State == state })
}

// hangGuard bounds a wait for the updater's goroutine: a guard against a hang, not a timing.
const hangGuard = 20 * time.Second

func (r *rig) serve(path string, b []byte) string {
	r.mu.Lock()
	r.files[path] = b
	r.mu.Unlock()
	return r.srv.URL + path
}

func (r *rig) otadata() boot.OTAData {
	r.t.Helper()
	d, err := boot.ReadOTAData(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

func (r *rig) states() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if len(out) == 0 || out[len(out)-1] != e.State {
			out = append(out, e.State)
		}
	}
	return out
}

func (r *rig) restartsSeen() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Duration(nil), r.restarts...)
}

func TestInstallFromURL(t *testing.T) {
	r := confirmedRig(t)
	exe := bytes.Repeat([]byte("new executable "), 10000) // about 150 KiB: several progress events
	src := r.serve("/fw.img", packImage(t, r.key, "devhost", "1.1.0", exe))
	if err := r.u.startInstall(src); err != nil {
		t.Fatal(err)
	}
	st := r.waitState(StateReady)
	if got := r.states(); len(got) != 3 || got[0] != StateDownloading || got[1] != StateVerifying || got[2] != StateReady {
		t.Fatalf("states %v", got)
	}
	r.mu.Lock()
	progressEvents := 0
	for _, e := range r.events {
		if e.State == StateDownloading {
			progressEvents++
		}
	}
	r.mu.Unlock()
	if progressEvents < 4 {
		t.Fatalf("%d downloading events for %d bytes", progressEvents, len(exe))
	}
	if st.OtherVersion == nil || *st.OtherVersion != "1.1.0" || st.Progress != nil || st.Error != nil {
		t.Fatalf("ready status %+v", st)
	}
	d := r.otadata()
	if d.Boot != 1 || d.Slots[1].State != boot.SlotNew || d.Slots[1].Version != "1.1.0" || d.Slots[0].State != boot.SlotValid {
		t.Fatalf("otadata %+v", d)
	}
	if b, _ := os.ReadFile(boot.SlotPath(r.dir, 1)); !bytes.Equal(b, exe) {
		t.Fatal("slot 1 does not hold the executable")
	}
	if got := r.restartsSeen(); len(got) != 1 || got[0] != RebootDelay {
		t.Fatalf("restarts %v", got)
	}
	// The reboot is armed: everything else is refused.
	if err := r.u.startInstall(src); err != errRestarting {
		t.Fatalf("install while restarting: %v", err)
	}
}

// "Events" (`ota`: the /ota/status document on state changes): the event that says an install
// started describes that install, not the one before it. A second install used to announce
// `downloading` with the previous image's source and byte counts before resetting them.
func TestInstallStartsWithItsOwnSourceAndCounters(t *testing.T) {
	r := confirmedRig(t)
	exe := bytes.Repeat([]byte("new executable "), 10000)
	first := r.serve("/first.img", packImage(t, otatest.Key(t, "other"), "devhost", "1.1.0", exe))
	if err := r.u.startInstall(first); err != nil {
		t.Fatal(err)
	}
	if st := r.waitState(StateFailed); st.Bytes == 0 {
		t.Fatalf("the first install counted nothing: %+v", st)
	}
	r.waitFor("the job to end", func() bool { return !r.u.Busy() })
	r.mu.Lock()
	seen := len(r.events)
	r.mu.Unlock()
	second := r.serve("/second.img", packImage(t, r.key, "devhost", "1.1.0", exe))
	if err := r.u.startInstall(second); err != nil {
		t.Fatal(err)
	}
	r.waitState(StateReady)
	r.mu.Lock()
	defer r.mu.Unlock()
	starts := 0
	for _, e := range r.events[seen:] {
		if e.State != StateDownloading {
			continue
		}
		if e.Source != second || e.Error != nil || e.Progress == nil {
			t.Fatalf("downloading event %+v, want source %s, no error, a progress", e, second)
		}
		if starts == 0 && (e.Bytes != 0 || e.Total != 0 || *e.Progress != 0) {
			t.Fatalf("first downloading event %+v, want the counters at 0", e)
		}
		starts++
	}
	if starts == 0 {
		t.Fatal("no downloading event")
	}
}

func TestRejectedImagesChangeNothing(t *testing.T) {
	other := otatest.Key(t, "other")
	exe := []byte("an executable")
	r := confirmedRig(t)
	good := packImage(t, r.key, "devhost", "1.1.0", exe)
	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)-SignatureOffset(corrupt)-3] ^= 1
	cases := map[string][]byte{
		"other key":     packImage(t, other, "devhost", "1.1.0", exe),
		"other project": packImage(t, r.key, "otherproj", "1.1.0", exe),
		"not an image":  []byte("<html>not found</html>"),
		"corrupt":       corrupt,
		"truncated":     good[:len(good)-100],
	}
	before, _ := os.ReadFile(filepath.Join(r.dir, boot.OTADataFile))
	for name, img := range cases {
		t.Run(name, func(t *testing.T) {
			src := r.serve("/"+name, img)
			if err := r.u.startInstall(src); err != nil {
				t.Fatal(err)
			}
			st := r.waitState(StateFailed)
			if st.Error == nil || *st.Error != "image rejected: bad signature or corrupt" {
				t.Fatalf("error %v", st.Error)
			}
			r.waitFor("the job to end", func() bool { return !r.u.Busy() })
			after, _ := os.ReadFile(filepath.Join(r.dir, boot.OTADataFile))
			if !bytes.Equal(before, after) {
				t.Fatal("otadata changed")
			}
			if _, err := os.Stat(boot.SlotPath(r.dir, 1)); !os.IsNotExist(err) {
				t.Fatalf("slot 1 written: %v", err)
			}
			if _, err := os.Stat(downloadPath(r.dir, 1)); !os.IsNotExist(err) {
				t.Fatalf("download left behind: %v", err)
			}
		})
	}
	if len(r.restartsSeen()) != 0 {
		t.Fatal("a rejected image rebooted")
	}
}

// SignatureOffset is how far from the end the executable's last byte is.
func SignatureOffset([]byte) int { return image.SignatureSize }

func TestDownloadErrorsFail(t *testing.T) {
	r := confirmedRig(t)
	if err := r.u.startInstall(r.srv.URL + "/missing"); err != nil {
		t.Fatal(err)
	}
	st := r.waitState(StateFailed)
	if st.Error == nil || *st.Error == "" || st.Progress != nil {
		t.Fatalf("status %+v", st)
	}
}

func TestPendingImageConfirmsAfterUptimeWithoutStation(t *testing.T) {
	slots := [2]boot.Slot{{State: boot.SlotValid, Version: "1.0.0"}, {State: boot.SlotPending, Version: "1.1.0"}}
	r := newRig(t, 1, slots, station{configured: false})
	st := r.u.Status()
	if st.State != StatePendingVerify || st.Running.Confirmed || st.Running.Slot != 1 || *st.OtherVersion != "1.0.0" {
		t.Fatalf("boot status %+v", st)
	}
	if err := r.u.startCheck(false); err != errUnconfirmed {
		t.Fatalf("check while unconfirmed: %v", err)
	}
	if err := r.clk.BlockUntilContext(t.Context(), 2); err != nil { // confirm and timeout timers
		t.Fatal(err)
	}
	r.clk.Advance(DefaultConfirmUptime - time.Millisecond)
	time.Sleep(10 * time.Millisecond)
	if r.u.Status().Running.Confirmed {
		t.Fatal("confirmed before 60 s")
	}
	r.clk.Advance(time.Millisecond)
	st = r.waitState(StateIdle)
	if !st.Running.Confirmed || r.otadata().Slots[1].State != boot.SlotValid {
		t.Fatalf("status %+v otadata %+v", st, r.otadata())
	}
}

func TestStationConfiguredWaitsForConnection(t *testing.T) {
	slots := [2]boot.Slot{{State: boot.SlotValid, Version: "1.0.0"}, {State: boot.SlotPending, Version: "1.1.0"}}
	r := newRig(t, 1, slots, station{configured: true})
	if err := r.clk.BlockUntilContext(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(DefaultConfirmUptime)
	r.u.NetworkUp()
	time.Sleep(10 * time.Millisecond)
	if r.u.Status().Running.Confirmed {
		t.Fatal("a configured station must connect before the image confirms")
	}
	// The network came up: the confirm timeout no longer applies.
	r.clk.Advance(600 * time.Second)
	time.Sleep(10 * time.Millisecond)
	if len(r.restartsSeen()) != 0 {
		t.Fatal("rolled back although the network came up")
	}
	r.u.StationConnected()
	if st := r.waitState(StateIdle); !st.Running.Confirmed {
		t.Fatalf("status %+v", st)
	}
}

// The network comes up as the confirm timeout fires: the updater's loop has read "no network
// yet" and, before it waits again, finds both its wake-up and the fired timer ready; it may
// take either first, and an image whose network came up before the timeout is never rolled
// back. The loop reads ota.auto_check between the two points, which is where the test holds
// it; the next read shows that the first case taken has been handled. Rounds, since the
// choice between ready cases is the runtime's.
func TestNetworkUpAsTheConfirmTimeoutFires(t *testing.T) {
	slots := [2]boot.Slot{{State: boot.SlotValid, Version: "1.0.0"}, {State: boot.SlotPending, Version: "1.1.0"}}
	for round := range 20 {
		r := newRig(t, 1, slots, station{configured: true})
		if err := r.clk.BlockUntilContext(t.Context(), 2); err != nil { // confirm and timeout timers
			t.Fatal(err)
		}
		held, release, next := make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
		var once sync.Once
		r.cfg.mu.Lock()
		r.cfg.onBool = func(key string) {
			if key != "ota.auto_check" {
				return
			}
			first := false
			once.Do(func() { first = true })
			if first {
				close(held)
				<-release
				return
			}
			select {
			case next <- struct{}{}:
			default:
			}
		}
		r.cfg.mu.Unlock()
		r.u.NetworkDown() // a turn of the loop (the network was never up)
		waitChan(t, held, "the loop between its read and its wait")
		r.u.NetworkUp()
		r.clk.Advance(600 * time.Second) // the default ota.confirm_tmo_s
		close(release)
		waitChan(t, next, "the loop's next turn")
		if n := len(r.restartsSeen()); n != 0 || r.otadata().Slots[1].State != boot.SlotPending {
			t.Fatalf("round %d: rolled back although the network came up first: %d restarts, otadata %+v", round, n, r.otadata())
		}
	}
}

// waitChan waits for ch to deliver or close, failing after hangGuard.
func waitChan(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(hangGuard):
		t.Fatalf("%s: not reached within %v", what, hangGuard)
	}
}

func TestNoNetworkWithinConfirmTimeoutRollsBack(t *testing.T) {
	slots := [2]boot.Slot{{State: boot.SlotValid, Version: "1.0.0"}, {State: boot.SlotPending, Version: "1.1.0"}}
	r := newRig(t, 1, slots, station{configured: true})
	r.cfg.set("ota.confirm_tmo_s", 90)
	if err := r.clk.BlockUntilContext(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(600 * time.Second) // the timer was armed with the default, before the change
	r.waitFor("the rollback", func() bool { return len(r.restartsSeen()) == 1 })
	d := r.otadata()
	if d.Boot != 0 || d.Slots[1].State != boot.SlotInvalid || d.Slots[0].State != boot.SlotValid {
		t.Fatalf("otadata %+v", d)
	}
}

func TestConfirmAndRollbackByHand(t *testing.T) {
	slots := [2]boot.Slot{{State: boot.SlotValid, Version: "1.0.0"}, {State: boot.SlotPending, Version: "1.1.0"}}
	r := newRig(t, 1, slots, station{configured: true})
	if err := r.u.confirm("test"); err != nil {
		t.Fatal(err)
	}
	if err := r.u.confirm("test again"); err != nil { // a confirmed image: no-op
		t.Fatal(err)
	}
	if d := r.otadata(); d.Slots[1].State != boot.SlotValid {
		t.Fatalf("otadata %+v", d)
	}
	if err := r.u.rollback("test"); err != nil {
		t.Fatal(err)
	}
	if d := r.otadata(); d.Boot != 0 || d.Slots[1].State != boot.SlotInvalid {
		t.Fatalf("otadata %+v", d)
	}
	if err := r.u.rollback("twice"); err != errRestarting {
		t.Fatalf("second rollback: %v", err)
	}

	// Nothing to roll back to.
	r2 := confirmedRig(t)
	if err := r2.u.rollback("test"); err != errNoRollback {
		t.Fatalf("rollback without another image: %v", err)
	}
}

// The confirm timeout's rollback checks its condition under the lock of its writes: a
// confirmation that landed after the timer fired keeps the image (nothing written, no
// restart), and the condition still holding rolls back.
func TestConditionalRollbackRereadsUnderItsLock(t *testing.T) {
	slots := [2]boot.Slot{{State: boot.SlotValid, Version: "1.0.0"}, {State: boot.SlotPending, Version: "1.1.0"}}
	r := newRig(t, 1, slots, station{configured: true})
	if err := r.u.confirm("the network came up"); err != nil {
		t.Fatal(err)
	}
	before := r.otadata()
	rolled, err := r.u.rollbackIf("timeout", func() bool { return !r.u.st.Running.Confirmed })
	if err != nil || rolled {
		t.Fatalf("rollback of a confirmed image: rolled %v, %v", rolled, err)
	}
	if d := r.otadata(); d != before {
		t.Fatalf("otadata changed: %+v, was %+v", d, before)
	}
	rolled, err = r.u.rollbackIf("timeout", func() bool { return true })
	if err != nil || !rolled {
		t.Fatalf("rollback with the condition holding: rolled %v, %v", rolled, err)
	}
	if d := r.otadata(); d.Boot != 0 || d.Slots[1].State != boot.SlotInvalid {
		t.Fatalf("otadata %+v", d)
	}
}

func TestRolledBackStatus(t *testing.T) {
	slots := [2]boot.Slot{{State: boot.SlotValid, Version: "1.0.0"}, {State: boot.SlotAborted, Version: "1.1.0"}}
	r := newRig(t, 0, slots, nil)
	st := r.u.Status()
	if !st.Running.RolledBack || st.OtherVersion == nil || *st.OtherVersion != "1.1.0" || !st.Running.Confirmed {
		t.Fatalf("status %+v", st)
	}
	b, _ := json.Marshal(st)
	var doc map[string]any
	_ = json.Unmarshal(b, &doc)
	for _, k := range []string{"state", "progress", "error", "running", "other_version", "available"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("status lacks %q: %s", k, b)
		}
	}
}

func TestFirstCheckAfterNetworkUpThenAutoInstall(t *testing.T) {
	r := confirmedRig(t)
	img := packImage(t, r.key, "devhost", "1.2.0", []byte("newer"))
	r.serve("/fw/devhost-1.2.0.img", img)
	manifest := `{"schema":1,"builds":[{"version":"1.2.0","target":"esp32s3","url":"devhost-1.2.0.img","notes":"fixes","size":5},
		{"version":"1.1.0","target":"esp32s3","url":"old.img"}]}`
	r.cfg.set("ota.manifest_url", r.serve("/fw/manifest.json", []byte(manifest)))
	r.u.NetworkUp()
	if err := r.clk.BlockUntilContext(t.Context(), 2); err != nil { // confirm uptime, first check
		t.Fatal(err)
	}
	r.clk.Advance(FirstCheckDelay - time.Millisecond)
	time.Sleep(10 * time.Millisecond)
	if r.u.Status().LastCheck != nil {
		t.Fatal("checked before 20 s")
	}
	r.clk.Advance(time.Millisecond)
	st := r.waitState(StateAvailable)
	if st.Available == nil || st.Available.Version != "1.2.0" || st.Available.Notes != "fixes" ||
		st.Available.URL != r.srv.URL+"/fw/devhost-1.2.0.img" {
		t.Fatalf("available %+v", st.Available)
	}
	r.waitFor("the job to end", func() bool { return !r.u.Busy() })
	// The next check is check_h later; with auto_install it installs.
	r.cfg.set("ota.auto_install", true)
	if err := r.clk.BlockUntilContext(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(24 * time.Hour)
	r.waitState(StateReady)
	if d := r.otadata(); d.Boot != 1 || d.Slots[1].Version != "1.2.0" {
		t.Fatalf("otadata %+v", d)
	}
}

func TestInstallWithoutURLUsesTheManifest(t *testing.T) {
	r := confirmedRig(t)
	r.cfg.set("ota.manifest_url", r.serve("/m.json", []byte(`{"schema":1,"builds":[]}`)))
	if err := r.u.startCheck(true); err != nil {
		t.Fatal(err)
	}
	st := r.waitState(StateFailed)
	if *st.Error != errNoBuild.Error() {
		t.Fatalf("error %q", *st.Error)
	}
	r.waitFor("the job to end", func() bool { return !r.u.Busy() })
	r.serve("/n.img", packImage(t, r.key, "devhost", "2.0.0", []byte("x")))
	r.serve("/m.json", []byte(`{"schema":1,"builds":[{"version":"2.0.0","target":"esp32s3","url":"n.img"}]}`))
	if err := r.u.startCheck(true); err != nil {
		t.Fatal(err)
	}
	r.waitState(StateReady)
}

// TestFailedCheckKeepsTheBuildFound: a check that fails (the manifest server errs) says why
// in error and keeps the build the last successful check found; a check that finds no newer
// build clears it.
func TestFailedCheckKeepsTheBuildFound(t *testing.T) {
	r := confirmedRig(t)
	r.serve("/n.img", packImage(t, r.key, "devhost", "2.0.0", []byte("x")))
	r.cfg.set("ota.manifest_url", r.serve("/m.json", []byte(`{"schema":1,"builds":[{"version":"2.0.0","target":"esp32s3","url":"n.img"}]}`)))
	check := func() {
		t.Helper()
		r.waitFor("the job to end", func() bool { return !r.u.Busy() })
		if err := r.u.startCheck(false); err != nil {
			t.Fatal(err)
		}
	}
	check()
	r.waitState(StateAvailable)
	r.cfg.set("ota.manifest_url", r.srv.URL+"/missing.json")
	check()
	st := r.waitState(StateFailed)
	if st.Error == nil || !strings.Contains(*st.Error, "check") || st.Available == nil || st.Available.Version != "2.0.0" {
		t.Fatalf("after a failed check: error %v available %+v", st.Error, st.Available)
	}
	r.cfg.set("ota.manifest_url", r.serve("/m.json", []byte(`{"schema":1,"builds":[]}`)))
	check()
	if st := r.waitState(StateIdle); st.Available != nil {
		t.Fatalf("a check that found nothing kept %+v", st.Available)
	}
}

func TestManifestOverCapFails(t *testing.T) {
	r := confirmedRig(t)
	big := append([]byte(`{"schema":1,"builds":[],"x":"`), bytes.Repeat([]byte("y"), MaxManifest)...)
	r.cfg.set("ota.manifest_url", r.serve("/m.json", append(big, '"', '}')))
	if err := r.u.startCheck(false); err != nil {
		t.Fatal(err)
	}
	if st := r.waitState(StateFailed); st.LastCheck == nil {
		t.Fatalf("status %+v", st)
	}
}

type fakeSK struct{ body []byte }

func (f fakeSK) FetchManifest(_ context.Context, path string) ([]byte, string, error) {
	return f.body, "http://127.0.0.1:3000" + path, nil
}

func TestSignalKManifestSource(t *testing.T) {
	r := confirmedRig(t)
	r.u.o.SignalK = fakeSK{body: []byte(`{"schema":1,"builds":[{"version":"1.5.0","target":"esp32s3","url":"fw/a.img"}]}`)}
	r.cfg.set("ota.manifest_src", "signalk")
	r.cfg.set("ota.manifest_path", "/plugins/x/manifest.json")
	if err := r.u.startCheck(false); err != nil {
		t.Fatal(err)
	}
	st := r.waitState(StateAvailable)
	if st.Available.URL != "http://127.0.0.1:3000/plugins/x/fw/a.img" {
		t.Fatalf("url %s", st.Available.URL)
	}
}

func TestBusyRefusal(t *testing.T) {
	r := confirmedRig(t)
	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-block:
		case <-req.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(block) })
	if err := r.u.startInstall(slow.URL + "/x"); err != nil {
		t.Fatal(err)
	}
	if err := r.u.startInstall(slow.URL + "/y"); err != errBusy {
		t.Fatalf("second install: %v", err)
	}
	if err := r.u.startCheck(false); err != errBusy {
		t.Fatalf("check during install: %v", err)
	}
}
