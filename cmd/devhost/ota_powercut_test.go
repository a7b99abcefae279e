package main_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The power-cut tests pull the power (kill -9 of the supervisor) at each stage of an update.
// Every time, the next power-on must boot a valid signed image, keep the configuration, and
// report the truth about both slots.

// cutOn installs the new image and pulls the power on the first `ota` event whose state is
// state.
//
// An install sends an `ota` event about every 32 KiB; a reader slowed down by a loaded machine
// can fall 64 events behind, and the device then closes its stream (the client is to
// reconnect). So does this one: the snapshot of a new stream carries the current state.
func cutOn(t *testing.T, d *dev, state string) {
	t.Helper()
	evs := d.events()
	d.install(serveFile(t, newImg))
	deadline := time.Now().Add(hangGuard)
	for {
		select {
		case e, open := <-evs:
			if !open {
				evs = d.events()
				continue
			}
			if e.name == "ota" && strings.Contains(e.data, `"state":"`+state+`"`) {
				d.powerCut()
				return
			}
		case <-time.After(time.Until(deadline)):
			t.Fatalf("no ota %s event within %v", state, hangGuard)
		}
	}
}

// powerOnKept powers the device on after a cut, checks that the configuration kept the
// hostname set before it, and answers the OTA status.
func (d *dev) powerOnKept(hostname string) otaStatus {
	d.t.Helper()
	d.powerOn()
	d.expectHostname(hostname)
	return d.otaStatus()
}

func TestOTAPowerCutDuringDownload(t *testing.T) {
	d := otaDev(t)
	d.setHostname("cut-download")
	img, err := os.ReadFile(newImg)
	if err != nil {
		t.Fatal(err)
	}
	// Half the image, then nothing: the download is in progress when the power goes.
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(img[:len(img)/2])
		w.(http.Flusher).Flush()
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stall) })
	d.install(srv.URL + "/new.img")
	d.waitOTA("half the download", func(s otaStatus) bool { return s.State == "downloading" && s.Bytes >= int64(len(img)/2) })
	d.powerCut()
	st := d.powerOnKept("cut-download")
	st.expect(t, "0.1.0-dev", 0, true, false, "")
	st.expectState(t, "idle")
	leftovers, _ := filepath.Glob(filepath.Join(d.data, "flash", "ota_1*"))
	if len(leftovers) != 0 {
		t.Fatalf("the partial download was left: %v", leftovers)
	}
}

func TestOTAPowerCutDuringVerification(t *testing.T) {
	d := otaDev(t)
	d.setHostname("cut-verify")
	cutOn(t, d, "verifying")
	// The cut lands in the verification or just after it selected the slot: either way a
	// valid image runs and the status agrees with the flash.
	st := d.powerOnKept("cut-verify")
	t.Logf("after the cut: running %+v", st.Running)
	if st.Running.Slot == 1 {
		st.expect(t, "9.9.9", 1, false, false, "0.1.0-dev")
	} else {
		st.expect(t, "0.1.0-dev", 0, true, false, "")
	}
}

func TestOTAPowerCutBetweenReadyAndRebootThenDuringFirstBoot(t *testing.T) {
	d := otaDev(t)
	d.setHostname("cut-ready")
	cutOn(t, d, "ready")
	// The slot was selected before `ready`: the next power-on boots the new image, pending.
	st := d.powerOnKept("cut-ready")
	st.expect(t, "9.9.9", 1, false, false, "0.1.0-dev")
	st.expectState(t, "pending_verify")

	// Power lost during the new image's first boot, before it confirmed: the bootloader
	// rolls back, and the status says so.
	d.powerCut()
	d.powerOnKept("cut-ready").expect(t, "0.1.0-dev", 0, true, true, "9.9.9")
}

func TestOTAPowerCutAfterConfirmation(t *testing.T) {
	d := otaDev(t)
	d.setHostname("cut-confirmed")
	d.install(serveFile(t, newImg))
	d.waitBoot()
	if r := d.call("POST", "/api/v1/ota/confirm", ""); r.status != 200 {
		t.Fatalf("confirm: %d %s", r.status, r.body)
	}
	d.powerCut()
	st := d.powerOnKept("cut-confirmed")
	st.expect(t, "9.9.9", 1, true, false, "0.1.0-dev")
	st.expectState(t, "idle")
}

// TestOTAConfirmsByUptime: without a configured station a new image confirms itself after the
// uptime rule (shortened here), and a power cut after that keeps it.
func TestOTAConfirmsByUptime(t *testing.T) {
	d := otaDev(t, withArgs("--ota-confirm-uptime", "2s"))
	d.install(serveFile(t, newImg))
	d.waitBoot()
	start := time.Now()
	st := d.waitOTA("the uptime confirmation", func(s otaStatus) bool { return s.Running.Confirmed })
	t.Logf("confirmed %v after the new image answered", time.Since(start))
	st.expect(t, "9.9.9", 1, true, false, "0.1.0-dev")
	d.powerCut()
	d.powerOn()
	d.otaStatus().expect(t, "9.9.9", 1, true, false, "0.1.0-dev")
}
