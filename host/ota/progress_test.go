package ota

import (
	"bytes"
	"testing"
)

// TestProgressEventRate pins the spec's Events table: `ota` goes out on state changes and
// about every 32 KiB of download, no more often, and the last downloading figure before
// verifying is 100. An image of 2 MiB therefore gives about 64 progress events.
func TestProgressEventRate(t *testing.T) {
	r := confirmedRig(t)
	exe := bytes.Repeat([]byte("0123456789abcdef"), 2<<20/16)
	var downloading []Status
	var verifying *Status
	for _, e := range r.installed(t, packImage(t, r.key, "devhost", "1.1.0", exe)) {
		switch e.State {
		case StateDownloading:
			downloading = append(downloading, e)
		case StateVerifying:
			if verifying == nil {
				verifying = &e
			}
		}
	}
	if verifying == nil || verifying.Progress == nil || *verifying.Progress != 100 {
		t.Fatalf("verifying event %+v, want progress 100", verifying)
	}
	total := verifying.Total
	// One announcing the download, then one per 32 KiB step.
	want := 1 + int(total/progressStep)
	if len(downloading) < want-1 || len(downloading) > want+1 {
		t.Fatalf("%d downloading events for %d bytes, want about %d", len(downloading), total, want)
	}
	for i := 2; i < len(downloading); i++ {
		if step := downloading[i].Bytes - downloading[i-1].Bytes; step < progressStep {
			t.Fatalf("events %d and %d only %d bytes apart", i-1, i, step)
		}
	}
}

// installed serves img, installs it until ready and answers every event published.
func (r *rig) installed(t *testing.T, img []byte) []Status {
	t.Helper()
	if err := r.u.startInstall(r.serve("/progress.img", img)); err != nil {
		t.Fatal(err)
	}
	r.waitState(StateReady)
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Status(nil), r.events...)
}
