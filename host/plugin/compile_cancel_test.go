package plugin

import (
	"net/http"
	"testing"
	"time"

	"devhost/abi"
)

// A compilation cannot be interrupted (wazero's compiler takes no cancellation), and a first
// compilation takes seconds on a small board. Neither the device's shutdown nor an operator's
// stop waits for one: both return while the compilation still runs, and what it made is
// closed once it ends, nothing kept.
func TestShutdownAndStopDoNotWaitForACompilation(t *testing.T) {
	for _, how := range []string{"shutdown", "stop"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t, func(o *Options) { o.CacheDir = "" })
			h.run()
			h.install(pack(t, manifest("good", abi.CapHTTP), loadKey(t, "publisher")), nil)
			h.waitState("good", StateRunning)
			h.stop()
			h.boot()
			compiling, release := make(chan struct{}), make(chan struct{})
			h.m.eng.compileHook = func() { close(compiling); <-release }
			h.run()
			<-compiling

			returned := make(chan struct{})
			go func() {
				defer close(returned)
				if how == "shutdown" {
					h.stop()
					return
				}
				if code, body := h.do(http.MethodPost, "/plugins/good/stop", nil); code != http.StatusOK {
					t.Errorf("stop: %d %s", code, body)
				}
				h.waitState("good", StateStopped)
			}()
			select {
			case <-returned:
			case <-time.After(hangGuard):
				t.Fatalf("the %s waited for the compilation", how)
			}
			close(release)
			// The abandoned compilation ends and closes what it made: the engine keeps
			// nothing, and the compiling lock is free for the next start (taking it waits
			// for the compiling goroutine to let it go).
			h.m.eng.compiling.Lock()
			h.m.eng.mu.Lock()
			kept := len(h.m.eng.compiled)
			h.m.eng.mu.Unlock()
			h.m.eng.compiling.Unlock()
			if kept != 0 {
				t.Fatalf("%d compiled modules kept after an abandoned compilation", kept)
			}
			if how == "stop" {
				h.m.eng.compileHook = nil
				if code, body := h.do(http.MethodPost, "/plugins/good/start", nil); code != http.StatusOK {
					t.Fatalf("start: %d %s", code, body)
				}
				h.waitState("good", StateRunning)
			}
		})
	}
}
