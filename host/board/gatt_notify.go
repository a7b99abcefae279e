package board

import (
	"fmt"
	"slices"
)

// Notifications: a central subscribes to a characteristic that has the notify property (a
// write of its client characteristic configuration, as a real central does) and the device
// notifies values; each connection keeps the last MaxNotifications until the central
// collects them. A notification carries at most MTU-3 bytes, as ATT does.

// MaxNotifications bounds what one connection keeps uncollected (the oldest go first).
const MaxNotifications = 64

// Notification is one value the device notified.
type Notification struct {
	Handle uint16 `json:"handle"`
	Value  []byte `json:"value"`
}

// CentralSubscribe enables or disables notifications of a characteristic on a connection.
func (s *Sim) CentralSubscribe(id int, handle uint16, enable bool) error {
	g := &s.gatt
	g.mu.Lock()
	defer g.mu.Unlock()
	c, err := g.conn(id)
	if err != nil {
		return err
	}
	ch, ok := g.char(handle)
	if !ok {
		return &ATTError{Code: ATTInvalidHandle, Handle: handle}
	}
	if !ch.Notify {
		return &ATTError{Code: ATTWriteNotPermit, Handle: handle}
	}
	if c.subscribed == nil {
		c.subscribed = map[uint16]bool{}
	}
	c.subscribed[handle] = enable
	return nil
}

// GATTNotify sends a value of the characteristic with that value handle to every
// subscribed connection; it returns how many received it.
func (s *Sim) GATTNotify(handle uint16, value []byte) (int, error) {
	g := &s.gatt
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.svc == nil {
		return 0, ErrNoPeripheral
	}
	if ch, ok := g.char(handle); !ok || !ch.Notify {
		return 0, fmt.Errorf("board: handle %d is not a notifying characteristic", handle)
	}
	n := 0
	for _, c := range g.conns {
		if !c.subscribed[handle] {
			continue
		}
		v := slices.Clone(value[:min(len(value), c.mtu-3)])
		c.notes = append(c.notes, Notification{Handle: handle, Value: v})
		if len(c.notes) > MaxNotifications {
			c.notes = c.notes[len(c.notes)-MaxNotifications:]
		}
		n++
	}
	return n, nil
}

// CentralNotifications collects the connection's notifications, oldest first.
func (s *Sim) CentralNotifications(id int) ([]Notification, error) {
	g := &s.gatt
	g.mu.Lock()
	defer g.mu.Unlock()
	c, err := g.conn(id)
	if err != nil {
		return nil, err
	}
	out := c.notes
	c.notes = nil
	return out, nil
}
