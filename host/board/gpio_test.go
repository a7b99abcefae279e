package board

import (
	"errors"
	"testing"
)

func TestGPIO(t *testing.T) {
	s, err := NewSim(DefaultFile())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GPIORead(GPIOPins); !errors.Is(err, ErrNoPin) {
		t.Fatalf("read of a missing pin: %v", err)
	}
	if err := s.GPIOWrite(-1, true); !errors.Is(err, ErrNoPin) {
		t.Fatalf("write of a missing pin: %v", err)
	}
	if err := s.GPIOWrite(4, true); err != nil {
		t.Fatal(err)
	}
	if high, _ := s.GPIORead(4); !high {
		t.Fatal("written level not read back")
	}
	yes, no := true, false
	if _, err := s.SetPin(PinUpdate{Pin: 4, Fault: &yes}); err != nil {
		t.Fatal(err)
	}
	if err := s.GPIOWrite(4, false); !errors.Is(err, ErrPinFault) {
		t.Fatalf("write to a faulted pin: %v", err)
	}
	if _, err := s.SetPin(PinUpdate{Pin: 4, Fault: &no}); err != nil {
		t.Fatal(err)
	}
	if err := s.GPIOWrite(4, false); err != nil {
		t.Fatalf("write after the fault cleared: %v", err)
	}
	var edges []bool
	cancel, err := s.GPIOWatch(7, func(pin int, high bool) {
		if pin != 7 {
			t.Errorf("edge on pin %d", pin)
		}
		edges = append(edges, high)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []*bool{&yes, &yes, &no} { // the repeated level is no edge
		if _, err := s.SetPin(PinUpdate{Pin: 7, High: v}); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	_, _ = s.SetPin(PinUpdate{Pin: 7, High: &yes})
	if len(edges) != 2 || !edges[0] || edges[1] {
		t.Fatalf("edges %v, want [true false] and none after cancel", edges)
	}
	if _, err := s.SetPin(PinUpdate{Pin: 99}); err == nil {
		t.Fatal("control update of a missing pin accepted")
	}
	if st := s.State(); len(st.GPIO) != 1 || st.GPIO[0].Pin != 7 {
		t.Fatalf("state gpio %v", st.GPIO)
	}
}
