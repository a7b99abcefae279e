package ota

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"devhost/host/boot"
	"devhost/host/ota/image"
)

// Refusals of a check or install.
var (
	errBusy        = errors.New("an update is already being checked or installed")
	errUnconfirmed = errors.New("the running image is not confirmed yet")
	errNotRunning  = errors.New("the updater is not running")
	errNoBuild     = errors.New("no newer build is available")
)

// defaultClient: plain http allowed; https with the system's roots unless insecure.
func defaultClient(insecure bool) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 30 * time.Second
	if insecure {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // ota.allow_insecure says so
	}
	return &http.Client{Transport: tr}
}

// begin claims the updater for a job and moves to state; prepare (nil for none) sets the
// members the job starts with, so the state's event already describes this job.
func (u *Updater) begin(state string, prepare func()) (context.Context, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	switch {
	case u.ctx == nil:
		return nil, errNotRunning
	case u.restartin:
		return nil, errRestarting
	case !u.st.Running.Confirmed:
		return nil, errUnconfirmed
	case u.busy || u.st.State == StateReady:
		return nil, errBusy
	}
	u.busy = true
	ctx, cancel := context.WithCancel(u.ctx)
	u.cancelJob = cancel
	u.jobs.Add(1)
	if prepare != nil {
		prepare()
	}
	u.setLocked(state, "")
	return ctx, nil
}

// done releases the updater after a job.
func (u *Updater) done() {
	u.mu.Lock()
	if u.cancelJob != nil {
		u.cancelJob()
	}
	u.busy, u.cancelJob = false, nil
	u.mu.Unlock()
	u.jobs.Done()
	u.kick()
}

// fail ends a job in `failed` with msg.
func (u *Updater) fail(msg string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.setLocked(StateFailed, msg)
}

// startCheck fetches the manifest in the background; install installs a newer build found
// (as does ota.auto_install).
func (u *Updater) startCheck(install bool) error {
	ctx, err := u.begin(StateChecking, nil)
	if err != nil {
		return err
	}
	go func() {
		defer u.done()
		b, err := u.check(ctx)
		u.mu.Lock()
		now := u.o.Clock.Now().UnixMilli()
		u.st.LastCheck = &now
		switch {
		case err != nil:
			u.mu.Unlock()
			u.log.Warn("check failed", "err", err)
			u.fail("check: " + err.Error())
			return
		case b == nil:
			u.st.Available = nil
			if install {
				u.setLocked(StateFailed, errNoBuild.Error())
			} else {
				u.setLocked(StateIdle, "")
			}
			u.mu.Unlock()
			return
		}
		u.st.Available = &Available{Version: b.Version, URL: b.URL, Channel: b.Channel, Size: b.Size, Notes: b.Notes, Date: b.Date}
		u.setLocked(StateAvailable, "")
		u.mu.Unlock()
		if install || u.o.Config.Bool("ota", "auto_install") {
			u.mu.Lock()
			u.resetDownloadLocked(b.URL)
			u.setLocked(StateDownloading, "")
			u.mu.Unlock()
			u.install(ctx, b.URL)
		}
	}()
	return nil
}

// startInstall installs the image at url in the background.
func (u *Updater) startInstall(src string) error {
	ctx, err := u.begin(StateDownloading, func() { u.resetDownloadLocked(src) })
	if err != nil {
		return err
	}
	go func() {
		defer u.done()
		u.install(ctx, src)
	}()
	return nil
}

// check fetches the manifest from the configured source and picks a build.
func (u *Updater) check(ctx context.Context) (*Build, error) {
	var (
		body []byte
		from string
		err  error
	)
	switch u.o.Config.String("ota", "manifest_src") {
	case "signalk":
		if u.o.SignalK == nil {
			return nil, errors.New("this build has no Signal K client")
		}
		body, from, err = u.o.SignalK.FetchManifest(ctx, u.o.Config.String("ota", "manifest_path"))
	default:
		from = u.o.Config.String("ota", "manifest_url")
		if from == "" {
			return nil, errors.New("ota.manifest_url is not set")
		}
		body, err = u.fetchManifest(ctx, from)
	}
	if err != nil {
		return nil, err
	}
	base, err := url.Parse(from)
	if err != nil {
		return nil, fmt.Errorf("manifest url: %w", err)
	}
	m, err := ParseManifest(body, base)
	if err != nil {
		return nil, err
	}
	channel := u.o.Config.String("ota", "channel")
	return Pick(m, Want{App: u.o.Project, Target: u.o.Target, Channel: channel, Running: u.o.Version}), nil
}

func (u *Updater) fetchManifest(ctx context.Context, src string) ([]byte, error) {
	resp, err := u.get(ctx, src)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if len(b) > MaxManifest {
		return nil, fmt.Errorf("manifest larger than %d bytes", MaxManifest)
	}
	return b, nil
}

func (u *Updater) get(ctx context.Context, src string) (*http.Response, error) {
	pu, err := url.Parse(src)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return nil, fmt.Errorf("%q is not an http or https URL", src)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", src, err)
	}
	resp, err := u.o.HTTP(u.o.Config.Bool("ota", "allow_insecure")).Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("fetch %s: HTTP %d", src, resp.StatusCode)
	}
	return resp, nil
}

// progressWriter counts the download and publishes about every 32 KiB.
type progressWriter struct {
	u *Updater
}

func (p progressWriter) Write(b []byte) (int, error) {
	p.u.addBytes(int64(len(b)))
	return len(b), nil
}

func (u *Updater) addBytes(n int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.st.Bytes += n
	if u.st.Total > 0 {
		pc := int(min(u.st.Bytes*100/u.st.Total, 100))
		u.st.Progress = &pc
	}
	if u.st.Bytes-u.lastSent >= progressStep {
		u.lastSent = u.st.Bytes
		u.publishLocked()
	}
}

// resetDownloadLocked starts the download counters of an install of src at zero; u.mu is held.
func (u *Updater) resetDownloadLocked(src string) {
	zero := 0
	u.st.Bytes, u.st.Total, u.st.Progress, u.st.Source, u.lastSent = 0, 0, &zero, src, 0
}

// install downloads, verifies and selects the image at src, then arms the reboot; the state is
// already downloading, announced for src. Every failure leaves otadata and both slots as they
// were.
func (u *Updater) install(ctx context.Context, src string) {
	other := 1 - u.o.Slot
	dl := downloadPath(u.o.DataDir, other)
	start := u.o.Clock.Now()

	h, sum, err := u.download(ctx, src, dl)
	if err != nil {
		_ = os.Remove(dl)
		u.log.Error("install failed", "src", src, "err", err)
		msg := err.Error()
		if errors.Is(err, image.ErrRejected) {
			msg = image.ErrRejected.Error()
		}
		u.fail(msg)
		return
	}
	// The slot file is replaced only now: first otadata forgets the old image, then the
	// verified file takes its place, then otadata names the new image and selects it. A power
	// cut between any two steps leaves a bootable running slot and a truthful record.
	err = boot.UpdateOTAData(u.o.DataDir, func(d *boot.OTAData) error {
		d.Slots[other] = boot.Slot{State: boot.SlotEmpty}
		return nil
	})
	if err == nil {
		err = os.Rename(dl, boot.SlotPath(u.o.DataDir, other))
	}
	if err == nil {
		err = syncDir(u.o.DataDir)
	}
	if err == nil {
		err = boot.UpdateOTAData(u.o.DataDir, func(d *boot.OTAData) error {
			d.Slots[other] = boot.Slot{State: boot.SlotNew, Version: h.Version, Size: h.Size, SHA256: sum}
			d.Boot = other
			return nil
		})
	}
	if err != nil {
		_ = os.Remove(dl)
		u.log.Error("install: write the slot", "err", err)
		u.fail("install: " + err.Error())
		return
	}
	d, err := boot.ReadOTAData(u.o.DataDir)
	u.mu.Lock()
	defer u.mu.Unlock()
	if err == nil {
		u.fill(d)
	}
	u.log.Info("image ready", "version", h.Version, "slot", other, "took", u.o.Clock.Since(start))
	u.restartin = true
	u.setLocked(StateReady, "")
	u.o.Restart(RebootDelay)
}

// download streams the image at src into the file dl (the header checked before a byte is
// written), then verifies it; it returns the header and the executable's SHA-256.
func (u *Updater) download(ctx context.Context, src, dl string) (image.Header, string, error) {
	resp, err := u.get(ctx, src)
	if err != nil {
		return image.Header{}, "", fmt.Errorf("download: %w", err)
	}
	defer resp.Body.Close()
	h, raw, err := image.ReadHeader(resp.Body)
	if err != nil {
		return h, "", err
	}
	if h.Project != u.o.Project {
		return h, "", image.Rejected("project %q, this device runs %q", h.Project, u.o.Project)
	}
	total := int64(len(raw)) + h.Size + image.SignatureSize
	u.mu.Lock()
	u.st.Total = total
	u.mu.Unlock()
	u.addBytes(int64(len(raw)))

	f, err := os.OpenFile(dl, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return h, "", fmt.Errorf("download: open the slot: %w", err)
	}
	n, err := io.CopyN(io.MultiWriter(f, progressWriter{u}), resp.Body, h.Size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if n < h.Size && ctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
			return h, "", image.Rejected("truncated after %d of %d bytes", n, h.Size)
		}
		return h, "", fmt.Errorf("download: %w", err)
	}
	sig, err := io.ReadAll(io.LimitReader(resp.Body, image.SignatureSize+1))
	if err != nil {
		return h, "", fmt.Errorf("download: %w", err)
	}
	u.addBytes(int64(len(sig)))

	u.mu.Lock()
	u.setLocked(StateVerifying, "")
	u.mu.Unlock()
	keys, err := u.o.Keys()
	if err != nil {
		return h, "", fmt.Errorf("verify: %w", err)
	}
	start := u.o.Clock.Now()
	sum, err := image.VerifyFile(raw, dl, h.Size, sig, keys)
	if err != nil {
		return h, "", err
	}
	u.log.Info("image verified", "bytes", h.Size, "took", u.o.Clock.Since(start))
	return h, sum, nil
}

func syncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
