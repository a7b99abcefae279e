package device

import (
	"errors"
	"fmt"
	"testing"

	"devhost/abi"
	"devhost/host/mdns"
)

// Plugins' services go to the responder's application slots, its refusals come back as the
// ABI's error codes.
func TestAppServicesErrors(t *testing.T) {
	r, err := mdns.New(mdns.Config{Hostname: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Advertise(mdns.DeviceInfo{Port: 80, Version: "1", App: "devhost", Platform: "go", Target: "esp32", ID: "1a2b"}); err != nil {
		t.Fatal(err)
	}
	a := appServices{r}
	for i := 0; i < mdns.DefaultSlots; i++ {
		if err := a.Register(abi.MDNSService{Instance: fmt.Sprint("app", i), Type: "_app", Proto: "_tcp", Port: 1}); err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
	}
	for _, c := range []struct {
		name string
		err  error
		want abi.Errno
	}{
		{"seventh slot", a.Register(abi.MDNSService{Instance: "app9", Type: "_app", Proto: "_tcp", Port: 1}), abi.ErrLimit},
		{"the device's own name", a.Register(abi.MDNSService{Type: "_http", Proto: "_tcp", Port: 1}), abi.ErrConflict},
		{"invalid TXT", a.UpdateTXT("app0", "_app", "_tcp", []string{"=x"}), abi.ErrInvalid},
		{"unknown service", a.Unregister("nope", "_app", "_tcp"), abi.ErrNotFound},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if err := a.Unregister("app0", "_app", "_tcp"); err != nil {
		t.Fatal(err)
	}
	if err := a.Register(abi.MDNSService{Instance: "app9", Type: "_app", Proto: "_tcp", Port: 1}); err != nil {
		t.Fatalf("a freed slot: %v", err)
	}
}
