package board

import (
	"errors"
	"fmt"
	"net/http"
	"sync"

	"devhost/host/api"
)

// GPIOPins is the number of pins of the simulated board (0..GPIOPins-1), as on an ESP32-S3.
const GPIOPins = 49

// ErrNoPin is a pin number the board does not have.
var ErrNoPin = errors.New("board: no such GPIO pin")

// ErrPinFault is a pin whose driver reports a fault (a short, a blown output stage).
var ErrPinFault = errors.New("board: GPIO pin fault")

// PinState is one pin as the control channel shows it.
type PinState struct {
	Pin   int  `json:"pin"`
	High  bool `json:"high"`
	Fault bool `json:"fault"`
}

// PinUpdate drives a pin from the outside world: Level sets the input level (watchers see
// the edge), Fault makes the pin fail every write until cleared.
type PinUpdate struct {
	Pin   int   `json:"pin"`
	High  *bool `json:"high,omitempty"`
	Fault *bool `json:"fault,omitempty"`
}

// gpio is the simulated pin bank. Its lock is its own: watchers are called without it, so
// a watcher may read pins.
type gpio struct {
	mu       sync.Mutex
	high     [GPIOPins]bool
	fault    [GPIOPins]bool
	watchers [GPIOPins]Callbacks[func(int, bool)]
}

func checkPin(pin int) error {
	if pin < 0 || pin >= GPIOPins {
		return fmt.Errorf("%w: %d (the board has 0..%d)", ErrNoPin, pin, GPIOPins-1)
	}
	return nil
}

// GPIORead answers a pin's level.
func (s *Sim) GPIORead(pin int) (bool, error) {
	if err := checkPin(pin); err != nil {
		return false, err
	}
	s.gpio.mu.Lock()
	defer s.gpio.mu.Unlock()
	return s.gpio.high[pin], nil
}

// GPIOWrite drives a pin; a faulted pin refuses.
func (s *Sim) GPIOWrite(pin int, high bool) error {
	if err := checkPin(pin); err != nil {
		return err
	}
	s.gpio.mu.Lock()
	if s.gpio.fault[pin] {
		s.gpio.mu.Unlock()
		return fmt.Errorf("%w: pin %d", ErrPinFault, pin)
	}
	s.gpio.high[pin] = high
	s.gpio.mu.Unlock()
	return nil
}

// GPIOWatch calls fn on every level change the outside world makes on pin.
func (s *Sim) GPIOWatch(pin int, fn func(pin int, high bool)) (cancel func(), err error) {
	if err := checkPin(pin); err != nil {
		return nil, err
	}
	return Subscribe(&s.gpio.mu, &s.gpio.watchers[pin], fn), nil
}

// SetPin applies an update from the control channel.
func (s *Sim) SetPin(u PinUpdate) (PinState, error) {
	if err := checkPin(u.Pin); err != nil {
		return PinState{}, api.Errorf(http.StatusBadRequest, api.CodeValidation, "%v", err)
	}
	s.gpio.mu.Lock()
	var notify []func(int, bool)
	if u.Fault != nil {
		s.gpio.fault[u.Pin] = *u.Fault
	}
	if u.High != nil && *u.High != s.gpio.high[u.Pin] {
		s.gpio.high[u.Pin] = *u.High
		notify = s.gpio.watchers[u.Pin].List()
	}
	st := PinState{Pin: u.Pin, High: s.gpio.high[u.Pin], Fault: s.gpio.fault[u.Pin]}
	s.gpio.mu.Unlock()
	for _, fn := range notify {
		fn(u.Pin, st.High)
	}
	return st, nil
}

// Pins lists the pins that are high or faulted.
func (s *Sim) Pins() []PinState {
	s.gpio.mu.Lock()
	defer s.gpio.mu.Unlock()
	out := []PinState{}
	for i := range GPIOPins {
		if s.gpio.high[i] || s.gpio.fault[i] {
			out = append(out, PinState{Pin: i, High: s.gpio.high[i], Fault: s.gpio.fault[i]})
		}
	}
	return out
}

func (s *Sim) putGPIO(u PinUpdate) error {
	_, err := s.SetPin(u)
	return err
}
