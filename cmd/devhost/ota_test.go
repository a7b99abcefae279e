package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Firmware images for the OTA tests, built and signed once per test binary with one key
// directory that every OTA test device shares.
var (
	imgOnce  sync.Once
	imgErr   error
	imgDir   string
	keyDir   string
	newImg   string // this source as version 9.9.9
	newExe   string
	panicImg string // an image that panics at start (version 9.9.1)
	otherImg string // 9.9.9 signed with another key
)

func images(t *testing.T) {
	t.Helper()
	imgOnce.Do(func() {
		imgDir, imgErr = os.MkdirTemp("", "devhost-ota")
		if imgErr != nil {
			return
		}
		keyDir = filepath.Join(imgDir, "keys")
		newExe = filepath.Join(imgDir, "devhost-9.9.9")
		panicExe := filepath.Join(imgDir, "panicapp")
		newImg, panicImg, otherImg = filepath.Join(imgDir, "new.img"), filepath.Join(imgDir, "panic.img"), filepath.Join(imgDir, "other.img")
		steps := [][]string{
			{"go", "build", "-ldflags", "-X devhost/host/build.Version=9.9.9", "-o", newExe, "."},
			{"go", "build", "-o", panicExe, "./testdata/panicapp"},
			{devctl, "ota", "pack", "--image", newExe, "--out", newImg},
			{devctl, "ota", "pack", "--image", panicExe, "--out", panicImg},
			{devctl, "ota", "pack", "--image", newExe, "--out", otherImg, "--key", "../../abi/testdata/other.pem"},
		}
		for _, s := range steps {
			if _, imgErr = runTool(context.Background(), []string{"DEVHOST_KEYS=" + keyDir}, s[0], s[1:]...); imgErr != nil {
				return
			}
		}
	})
	if imgErr != nil {
		t.Fatal(imgErr)
	}
}

// otaDev is a device that trusts the shared development firmware key. A new image confirms
// itself only by hand (POST /ota/confirm) unless the test says otherwise.
func otaDev(t *testing.T, opts ...devOpt) *dev {
	t.Helper()
	images(t)
	opts = append([]devOpt{withEnv("DEVHOST_KEYS=" + keyDir), withArgs("--ota-confirm-uptime", "1h")}, opts...)
	return newDev(t, opts...)
}

type otaStatus struct {
	State    string  `json:"state"`
	Progress *int    `json:"progress"`
	Error    *string `json:"error"`
	Running  struct {
		Version    string `json:"version"`
		Slot       int    `json:"slot"`
		Confirmed  bool   `json:"confirmed"`
		RolledBack bool   `json:"rolled_back"`
	} `json:"running"`
	OtherVersion *string `json:"other_version"`
	OtherState   string  `json:"other_state"`
	Bytes        int64   `json:"bytes"`
}

func (d *dev) otaStatus() otaStatus {
	d.t.Helper()
	return getDoc[otaStatus](d, "/api/v1/ota/status")
}

func (d *dev) waitOTA(what string, ok func(otaStatus) bool) otaStatus {
	d.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := d.try("GET", "/api/v1/ota/status", "")
		var st otaStatus
		if err == nil && r.status == 200 && json.Unmarshal(r.body, &st) == nil && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("%s: last status %s %v", what, r.body, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// expect checks the running image and what the status says about the other slot.
func (st otaStatus) expect(t *testing.T, version string, slot int, confirmed, rolledBack bool, other string) {
	t.Helper()
	o := ""
	if st.OtherVersion != nil {
		o = *st.OtherVersion
	}
	r := st.Running
	if r.Version != version || r.Slot != slot || r.Confirmed != confirmed || r.RolledBack != rolledBack || o != other {
		t.Fatalf("running %+v other %q; want %s slot %d confirmed %v rolled_back %v other %q", r, o, version, slot, confirmed, rolledBack, other)
	}
}

// expectState checks the update's state.
func (st otaStatus) expectState(t *testing.T, state string) {
	t.Helper()
	if st.State != state {
		t.Fatalf("state %q, want %q", st.State, state)
	}
}

// serveFile serves path on loopback, once or as often as asked.
func serveFile(t *testing.T, path string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, path)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/" + filepath.Base(path)
}

func (d *dev) setHostname(name string) {
	d.t.Helper()
	d.putConfig(`{"net":{"hostname":"` + name + `"}}`)
}

func (d *dev) expectHostname(name string) {
	d.t.Helper()
	r := d.call("GET", "/api/v1/config?ns=net", "")
	if !strings.Contains(string(r.body), `"hostname":"`+name+`"`) {
		d.t.Fatalf("configuration lost: %s", r.body)
	}
}

func (d *dev) install(url string) {
	d.t.Helper()
	if r := d.call("POST", "/api/v1/ota", `{"url":"`+url+`"}`); r.status != 202 {
		d.t.Fatalf("POST /ota: %d %s", r.status, r.body)
	}
}

func TestOTAPushConfirmRollback(t *testing.T) {
	d := otaDev(t)
	d.setHostname("boat-one")
	d.otaStatus().expect(t, "0.1.0-dev", 0, true, false, "")

	start := time.Now()
	out, err := exec.Command(devctl, "ota", "push", "--url", d.base, newImg).CombinedOutput()
	if err != nil {
		t.Fatalf("devctl ota push: %v\n%s", err, out)
	}
	d.waitBoot()
	st := d.otaStatus()
	st.expect(t, "9.9.9", 1, false, false, "0.1.0-dev")
	st.expectState(t, "pending_verify")
	// Writes that would start another update wait for the confirmation.
	if r := d.call("POST", "/api/v1/ota/check", ""); r.status != 409 {
		t.Fatalf("check while unconfirmed: %d %s", r.status, r.body)
	}
	if r := d.call("POST", "/api/v1/ota/confirm", ""); r.status != 200 {
		t.Fatalf("confirm: %d %s", r.status, r.body)
	}
	t.Logf("push to confirmed: %v", time.Since(start))
	if r := d.call("POST", "/api/v1/ota/confirm", ""); r.status != 200 {
		t.Fatalf("confirm again: %d %s", r.status, r.body)
	}
	d.otaStatus().expect(t, "9.9.9", 1, true, false, "0.1.0-dev")
	d.expectHostname("boat-one")

	// Rolling back on purpose boots the previous image; the status names the one that failed.
	if r := d.call("POST", "/api/v1/ota/rollback", ""); r.status != 202 {
		t.Fatalf("rollback: %d %s", r.status, r.body)
	}
	d.waitBoot()
	d.otaStatus().expect(t, "0.1.0-dev", 0, true, true, "9.9.9")
	d.expectHostname("boat-one")
}

func TestOTARejectsForeignImages(t *testing.T) {
	d := otaDev(t)
	notImage := filepath.Join(t.TempDir(), "index.html")
	if err := os.WriteFile(notImage, []byte("<html>not an image</html>"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, img := range []string{otherImg, notImage} {
		d.install(serveFile(t, img))
		st := d.waitOTA("the refusal", func(s otaStatus) bool { return s.State == "failed" })
		if st.Error == nil || *st.Error != "image rejected: bad signature or corrupt" {
			t.Fatalf("%s: error %v", img, st.Error)
		}
		st.expect(t, "0.1.0-dev", 0, true, false, "")
	}
	if d.boots != 1 || strings.Count(d.out.String(), "app started") != 1 {
		t.Fatal("a rejected image rebooted the device")
	}
}

func TestOTAPanickingImageRollsBack(t *testing.T) {
	d := otaDev(t)
	d.install(serveFile(t, panicImg))
	// The panicking image never listens; the bootloader boots the previous slot after it.
	d.waitBoot()
	st := d.otaStatus()
	st.expect(t, "0.1.0-dev", 0, true, true, "9.9.1")
	if !strings.Contains(d.out.String(), "panicapp: this image cannot start") {
		t.Fatal("the new image did not run")
	}
}

// TestUSBFlash: starting another executable on the same flash is a flash over USB into ota_0;
// the configuration stays.
func TestUSBFlash(t *testing.T) {
	d := otaDev(t)
	d.setHostname("boat-two")
	d.powerCut()
	d.cmd = nil
	old := binary
	binary = newExe
	defer func() { binary = old }()
	d.powerOn()
	d.otaStatus().expect(t, "9.9.9", 0, true, false, "")
	d.expectHostname("boat-two")
}
