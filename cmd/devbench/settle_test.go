package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestPluginsSettled(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want, err  bool
	}{
		{"none installed", `{"plugins":[]}`, true, false},
		{"running", `{"plugins":[{"id":"n2k","state":"running"}]}`, true, false},
		{"stopped and failed", `{"plugins":[{"id":"a","state":"stopped"},{"id":"b","state":"failed"}]}`, true, false},
		{"one loading", `{"plugins":[{"id":"a","state":"running"},{"id":"b","state":"loading"}]}`, false, false},
		{"no list", `{}`, false, true},
		{"no state", `{"plugins":[{"id":"a"}]}`, false, true},
		{"not JSON", `<html>`, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pluginsSettled([]byte(tc.body))
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("pluginsSettled(%s) = %v, %v; want %v, error %v", tc.body, got, err, tc.want, tc.err)
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
	if err := waitPluginsSettled(context.Background(), srv.Client(), srv.URL, "k", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("%d polls, want 3", n)
	}
	if err := waitPluginsSettled(context.Background(), srv.Client(), srv.URL, "wrong", time.Millisecond); err == nil {
		t.Error("a 404 was taken for settled plugins")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls.Store(-1000)
	if err := waitPluginsSettled(ctx, srv.Client(), srv.URL, "k", time.Millisecond); err == nil {
		t.Error("a cancelled wait returned no error")
	}
}
