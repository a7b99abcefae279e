package foreground

import (
	"sync"
	"testing"
)

// Busy follows the requests counted from any goroutine, and turns false once every one
// ended.
func TestBusy(t *testing.T) {
	if Busy() {
		t.Fatal("busy before any request")
	}
	request := func() {
		for range 1000 {
			Begin()
			if !Busy() {
				t.Error("not busy while a request is in flight")
			}
			End()
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(request)
	}
	Begin()
	wg.Wait()
	if !Busy() {
		t.Error("not busy with one request still in flight")
	}
	End()
	if Busy() {
		t.Error("busy after every request ended")
	}
}
