package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"devhost/host/plugin/trust"
)

func TestPluginsSettled(t *testing.T) {
	for _, tc := range []struct {
		name, body, summary string
		want, err           bool
	}{
		{"none installed", `{"plugins":[]}`, "none", true, false},
		{"running", `{"plugins":[{"id":"n2k","state":"running"}]}`, "n2k=running", true, false},
		{"stopped and failed", `{"plugins":[{"id":"a","state":"stopped"},{"id":"b","state":"failed"}]}`, "a=stopped b=failed", true, false},
		{"one loading", `{"plugins":[{"id":"a","state":"running"},{"id":"b","state":"loading"}]}`, "a=running b=loading", false, false},
		{"bundles still offered", `{"plugins":[],"bundled_pending":true}`, "bundled pending", false, false},
		{"offered", `{"plugins":[{"id":"n2k","state":"running"}],"bundled_pending":false}`, "n2k=running", true, false},
		{"no list", `{}`, "", false, true},
		{"no state", `{"plugins":[{"id":"a"}]}`, "", false, true},
		{"not JSON", `<html>`, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, summary, err := pluginsSettled([]byte(tc.body))
			if (err != nil) != tc.err || got != tc.want || summary != tc.summary {
				t.Errorf("pluginsSettled(%s) = %v, %q, %v; want %v, %q, error %v", tc.body, got, summary, err, tc.want, tc.summary, tc.err)
			}
		})
	}
}

// The wait polls until the plugin's loading is over and gives up on a bad answer.
func TestWaitPluginsSettled(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != pluginsPath || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		state := "loading"
		if calls.Add(1) >= 3 {
			state = "running"
		}
		_, _ = w.Write([]byte(`{"plugins":[{"id":"n2k","state":"` + state + `"}]}`))
	}))
	defer srv.Close()
	summary, err := waitPluginsSettled(context.Background(), srv.Client(), srv.URL, "k", time.Millisecond)
	if err != nil || summary != "n2k=running" {
		t.Fatalf("wait: %q, %v", summary, err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d polls, want 3", n)
	}
	if _, err := waitPluginsSettled(context.Background(), srv.Client(), srv.URL, "wrong", time.Millisecond); err == nil {
		t.Error("a 404 was taken for settled plugins")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls.Store(-1000)
	if _, err := waitPluginsSettled(ctx, srv.Client(), srv.URL, "k", time.Millisecond); err == nil {
		t.Error("a cancelled wait returned no error")
	}
}

// The device trusts the user's development key when there is one (the bundles `make build`
// signed run, as on `make run`), and a key folder of the run's own otherwise.
func TestDeviceKeyDir(t *testing.T) {
	tmp := t.TempDir()
	user := filepath.Join(t.TempDir(), "keys")
	t.Setenv("DEVHOST_KEYS", user)
	if dir, shared := deviceKeyDir(tmp); shared || dir != filepath.Join(tmp, "keys") {
		t.Errorf("without a user key: %s, shared %v", dir, shared)
	}
	if _, _, err := trust.LoadOrCreateDevKey(user); err != nil {
		t.Fatal(err)
	}
	if dir, shared := deviceKeyDir(tmp); !shared || dir != user {
		t.Errorf("with a user key: %s, shared %v", dir, shared)
	}
}
