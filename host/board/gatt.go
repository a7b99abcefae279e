package board

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// The BLE peripheral role of the simulated board: the device serves one GATT service table,
// a simulated central (tests, devctl through the control channel) connects, exchanges the
// MTU, discovers the services, reads (long reads with an offset), writes (long writes as
// prepared writes, then execute) and disconnects. Attribute handles are numbered as a real
// stack lays them out: the service declaration, then per characteristic its declaration,
// its value and its user description descriptor (0x2901).

// GATT limits, as ATT defines them.
const (
	DefaultMTU      = 23
	MaxMTU          = 517
	MaxAttrLen      = 512  // longest attribute value
	MaxPrepareQueue = 4096 // bytes a connection may queue in prepared writes
	MaxConnections  = 3
)

// ATT error codes the central sees.
const (
	ATTInvalidHandle    = 0x01
	ATTReadNotPermitted = 0x02
	ATTWriteNotPermit   = 0x03
	ATTInvalidOffset    = 0x07
	ATTPrepareQueueFull = 0x09
	ATTInvalidLength    = 0x0d
	ATTUnlikely         = 0x0e
)

// ATTError is an ATT error response.
type ATTError struct {
	Code   int
	Handle uint16
}

func (e *ATTError) Error() string {
	return fmt.Sprintf("ATT error %#02x on handle %d", e.Code, e.Handle)
}

// ErrNoPeripheral is a central operation while the device serves no GATT table.
var ErrNoPeripheral = errors.New("board: the device is not a connectable peripheral")

// ErrNoConnection is an operation on a connection that does not exist (or was closed).
var ErrNoConnection = errors.New("board: no such BLE connection")

// GATTChar is one characteristic the device serves. Read and Write are called with the
// connection's id; their error becomes an ATT error for the central: an *ATTError's code, or
// ATTUnlikely.
type GATTChar struct {
	UUID        string
	Description string // user description (0x2901)
	Read        func(conn int) ([]byte, error)
	Write       func(conn int, value []byte) error
	Notify      bool // the device notifies values (gatt_notify.go)
}

// GATTService is the device's service table.
type GATTService struct {
	UUID  string
	Chars []GATTChar
	// Disconnected is told when a central's connection ends.
	Disconnected func(conn int)
	// Connected and MTU, when set, are told of a new connection and of its MTU exchange.
	Connected func(conn int)
	MTU       func(conn, mtu int)
}

// CharInfo is a characteristic as discovery shows it.
type CharInfo struct {
	UUID        string   `json:"uuid"`
	Handle      uint16   `json:"handle"` // the value handle
	Properties  []string `json:"properties"`
	Description string   `json:"description"`
	DescHandle  uint16   `json:"description_handle"`
}

// ServiceInfo is a service as discovery shows it.
type ServiceInfo struct {
	UUID   string     `json:"uuid"`
	Handle uint16     `json:"handle"`
	Chars  []CharInfo `json:"characteristics"`
}

type gattConn struct {
	mtu     int
	queue   map[uint16][]byte // prepared writes per value handle
	queued  int
	reading map[uint16][]byte // the value a long read is paging through

	subscribed map[uint16]bool // notifications enabled per value handle
	notes      []Notification  // notified, not yet collected
}

type gattState struct {
	mu    sync.Mutex
	svc   *GATTService
	conns map[int]*gattConn
	next  int
}

// GATTServe publishes the device's service table (replacing one served before: the
// centrals connected to it are disconnected). Nil withdraws it.
func (s *Sim) GATTServe(svc *GATTService) {
	g := &s.gatt
	g.mu.Lock()
	old, conns := g.svc, g.conns
	g.svc, g.conns = svc, map[int]*gattConn{}
	g.mu.Unlock()
	if old != nil && old.Disconnected != nil {
		for id := range conns {
			old.Disconnected(id)
		}
	}
}

// valueHandle is the value handle of characteristic i: declaration at 1, then three
// handles per characteristic (declaration, value, user description).
func valueHandle(i int) uint16 { return uint16(1 + 3*i + 2) }

// CharHandle is the value handle of the service's characteristic i (what GATTNotify takes).
func CharHandle(i int) uint16 { return valueHandle(i) }

// attErr is the ATT error a Read or Write callback's error becomes.
func attErr(err error, handle uint16) *ATTError {
	var a *ATTError
	if errors.As(err, &a) {
		return &ATTError{Code: a.Code, Handle: handle}
	}
	return &ATTError{Code: ATTUnlikely, Handle: handle}
}

func (g *gattState) char(h uint16) (*GATTChar, bool) {
	if g.svc == nil || h < 3 || (h-3)%3 != 0 {
		return nil, false
	}
	i := int(h-3) / 3
	if i >= len(g.svc.Chars) {
		return nil, false
	}
	return &g.svc.Chars[i], true
}

func (g *gattState) conn(id int) (*gattConn, error) {
	if g.svc == nil {
		return nil, ErrNoPeripheral
	}
	c, ok := g.conns[id]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrNoConnection, id)
	}
	return c, nil
}

// lockConn locks g and finds connection id. On success the caller holds g.mu and releases it;
// on an error g.mu is already released.
func (g *gattState) lockConn(id int) (*gattConn, error) {
	g.mu.Lock()
	c, err := g.conn(id)
	if err != nil {
		g.mu.Unlock()
		return nil, err
	}
	return c, nil
}

// CentralConnect connects a simulated central; it returns the connection id.
func (s *Sim) CentralConnect() (int, error) {
	g := &s.gatt
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.svc == nil {
		return 0, ErrNoPeripheral
	}
	if len(g.conns) >= MaxConnections {
		return 0, fmt.Errorf("board: %d BLE connections already", MaxConnections)
	}
	g.next++
	g.conns[g.next] = &gattConn{mtu: DefaultMTU, queue: map[uint16][]byte{}, reading: map[uint16][]byte{}}
	if g.svc.Connected != nil {
		g.svc.Connected(g.next)
	}
	return g.next, nil
}

// CentralMTU is the MTU exchange: the connection's MTU becomes the smaller of the two.
func (s *Sim) CentralMTU(id, mtu int) (int, error) {
	g := &s.gatt
	g.mu.Lock()
	defer g.mu.Unlock()
	c, err := g.conn(id)
	if err != nil {
		return 0, err
	}
	if mtu < DefaultMTU {
		return 0, fmt.Errorf("board: MTU %d below the ATT minimum %d", mtu, DefaultMTU)
	}
	c.mtu = min(mtu, MaxMTU)
	if g.svc.MTU != nil {
		g.svc.MTU(id, c.mtu)
	}
	return c.mtu, nil
}

// CentralDiscover lists the service table.
func (s *Sim) CentralDiscover(id int) ([]ServiceInfo, error) {
	g := &s.gatt
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, err := g.conn(id); err != nil {
		return nil, err
	}
	svc := ServiceInfo{UUID: g.svc.UUID, Handle: 1}
	for i, ch := range g.svc.Chars {
		var props []string
		if ch.Read != nil {
			props = append(props, "read")
		}
		if ch.Write != nil {
			props = append(props, "write")
		}
		if ch.Notify {
			props = append(props, "notify")
		}
		vh := valueHandle(i)
		svc.Chars = append(svc.Chars, CharInfo{UUID: ch.UUID, Handle: vh, Properties: props, Description: ch.Description, DescHandle: vh + 1})
	}
	return []ServiceInfo{svc}, nil
}

// CentralRead reads a value from offset (a read blob for offset > 0): at most MTU-1 bytes.
// Offset 0 asks the device for the value; later offsets page through that same value.
func (s *Sim) CentralRead(id int, handle uint16, offset int) ([]byte, error) {
	g := &s.gatt
	c, err := g.lockConn(id)
	if err != nil {
		return nil, err
	}
	if ch, ok := g.char(handle - 1); ok && handle >= 4 {
		// The user description descriptor.
		g.mu.Unlock()
		return page([]byte(ch.Description), offset, c.mtu, handle)
	}
	ch, ok := g.char(handle)
	if !ok {
		g.mu.Unlock()
		return nil, &ATTError{Code: ATTInvalidHandle, Handle: handle}
	}
	if ch.Read == nil {
		g.mu.Unlock()
		return nil, &ATTError{Code: ATTReadNotPermitted, Handle: handle}
	}
	v, held := c.reading[handle]
	read := ch.Read
	mtu := c.mtu
	g.mu.Unlock()
	if offset == 0 || !held {
		if v, err = read(id); err != nil {
			return nil, attErr(err, handle)
		}
		g.mu.Lock()
		if c, err := g.conn(id); err == nil {
			c.reading[handle] = v
		}
		g.mu.Unlock()
	}
	return page(v, offset, mtu, handle)
}

func page(v []byte, offset, mtu int, handle uint16) ([]byte, error) {
	if offset < 0 || offset > len(v) {
		return nil, &ATTError{Code: ATTInvalidOffset, Handle: handle}
	}
	return slices.Clone(v[offset:min(len(v), offset+mtu-1)]), nil
}

// CentralWrite writes a value. A plain write carries at most MTU-3 bytes; a prepared write
// (prepare true) queues MTU-5 bytes at offset, in order, until CentralExecute.
func (s *Sim) CentralWrite(id int, handle uint16, offset int, value []byte, prepare bool) error {
	g := &s.gatt
	c, err := g.lockConn(id)
	if err != nil {
		return err
	}
	ch, ok := g.char(handle)
	switch {
	case !ok:
		err = &ATTError{Code: ATTInvalidHandle, Handle: handle}
	case ch.Write == nil:
		err = &ATTError{Code: ATTWriteNotPermit, Handle: handle}
	case prepare && len(value) > c.mtu-5:
		err = &ATTError{Code: ATTInvalidLength, Handle: handle}
	case prepare && offset != len(c.queue[handle]):
		// Out of order: the queue is dropped, as a stack does on an error.
		c.queue, c.queued = map[uint16][]byte{}, 0
		err = &ATTError{Code: ATTInvalidOffset, Handle: handle}
	case prepare && (c.queued+len(value) > MaxPrepareQueue || offset+len(value) > MaxAttrLen):
		c.queue, c.queued = map[uint16][]byte{}, 0
		err = &ATTError{Code: ATTPrepareQueueFull, Handle: handle}
	case prepare:
		c.queue[handle] = append(c.queue[handle], value...)
		c.queued += len(value)
	case offset != 0 || len(value) > c.mtu-3:
		err = &ATTError{Code: ATTInvalidLength, Handle: handle}
	}
	if err != nil || prepare {
		g.mu.Unlock()
		return err
	}
	write := ch.Write
	g.mu.Unlock()
	if err := write(id, slices.Clone(value)); err != nil {
		return attErr(err, handle)
	}
	return nil
}

// CentralExecute executes (commit) or cancels the connection's prepared writes.
func (s *Sim) CentralExecute(id int, commit bool) error {
	g := &s.gatt
	c, err := g.lockConn(id)
	if err != nil {
		return err
	}
	queue := c.queue
	c.queue, c.queued = map[uint16][]byte{}, 0
	type w struct {
		h  uint16
		fn func(int, []byte) error
		v  []byte
	}
	var writes []w
	if commit {
		for h, v := range queue {
			if ch, ok := g.char(h); ok {
				writes = append(writes, w{h, ch.Write, v})
			}
		}
	}
	g.mu.Unlock()
	slices.SortFunc(writes, func(a, b w) int { return int(a.h) - int(b.h) })
	for _, x := range writes {
		if err := x.fn(id, x.v); err != nil {
			return attErr(err, x.h)
		}
	}
	return nil
}

// CentralDisconnect ends a connection; the device is told.
func (s *Sim) CentralDisconnect(id int) error {
	g := &s.gatt
	if _, err := g.lockConn(id); err != nil {
		return err
	}
	delete(g.conns, id)
	svc := g.svc
	g.mu.Unlock()
	if svc.Disconnected != nil {
		svc.Disconnected(id)
	}
	return nil
}
