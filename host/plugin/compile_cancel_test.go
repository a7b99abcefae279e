package plugin

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"devhost/abi"
)

// A compilation cannot be interrupted (wazero's compiler takes no cancellation), and a first
// compilation takes seconds on a small board. Neither the device's shutdown nor an operator's
// stop waits for one, nor for a start queued behind it: both return while the compilation
// still runs, and what it made is closed once it ends, nothing kept.
func TestShutdownAndStopDoNotWaitForACompilation(t *testing.T) {
	for _, how := range []string{"shutdown", "stop"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.CacheDir = "" })
			h.run()
			key := loadKey(t, "publisher")
			ids := []string{"good", "other"}
			for _, id := range ids {
				h.install(pack(t, manifest(id, abi.CapHTTP), key), nil)
				h.waitState(id, StateRunning)
			}
			h.stop()
			h.boot()
			// The first compilation blocks until released; the other plugin's start waits
			// behind it for the compiling slot.
			compiling, release, abandoned := make(chan struct{}), make(chan struct{}), make(chan struct{})
			var first sync.Once
			h.m.eng.compileHook = func() { first.Do(func() { close(compiling) }); <-release }
			h.m.eng.abandonHook = func() { close(abandoned) }
			h.run()
			<-compiling

			returned := make(chan struct{})
			go func() {
				defer close(returned)
				if how == "shutdown" {
					h.stop()
					return
				}
				for _, id := range ids {
					if code, body := h.do(http.MethodPost, "/plugins/"+id+"/stop", nil); code != http.StatusOK {
						t.Errorf("stop %s: %d %s", id, code, body)
					}
				}
				for _, id := range ids {
					h.waitState(id, StateStopped)
				}
			}()
			select {
			case <-returned:
			case <-time.After(hangGuard):
				t.Fatalf("the %s waited for the compilation", how)
			}
			h.m.eng.compileHook = nil
			close(release)
			// The abandoned compilation ends and closes what it made: the engine keeps
			// nothing, and the compiling slot is free for the next start.
			select {
			case <-abandoned:
			case <-time.After(hangGuard):
				t.Fatal("the abandoned compilation's result was not closed")
			}
			h.m.eng.compiling <- struct{}{}
			h.m.eng.mu.Lock()
			kept := len(h.m.eng.compiled)
			h.m.eng.mu.Unlock()
			<-h.m.eng.compiling
			if kept != 0 {
				t.Fatalf("%d compiled modules kept after an abandoned compilation", kept)
			}
			if how == "stop" {
				h.m.eng.abandonHook = nil
				if code, body := h.do(http.MethodPost, "/plugins/good/start", nil); code != http.StatusOK {
					t.Fatalf("start: %d %s", code, body)
				}
				h.waitState("good", StateRunning)
			}
		})
	}
}
