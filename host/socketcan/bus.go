// Package socketcan is the board's CAN bus on a Linux SocketCAN interface (can0, or vcan0 in
// tests): the real counterpart of the simulated bus, with the same method set (CANSend,
// CANReceive) and the same refusal of frames the bus cannot carry (board.ErrFrame).
//
// The socket options and the kernel's 16-byte frame layout come from go.einride.tech/can.
// Choices:
//   - One raw socket per bus, opened by Run and reopened after any read failure (the
//     interface going down, being deleted or renamed) with a doubling backoff from MinBackoff
//     to MaxBackoff; the bus never gives up while Run's context lives.
//   - Frames are delivered to every receiver in the reader goroutine, in arrival order, as the
//     simulated bus calls its receivers from the goroutine that injects a frame. Receivers must
//     not block.
//   - Error frames (which the socket only gets when asked, and this bus does not ask) and
//     frames longer than 8 bytes are counted and dropped.
//   - The health condition KeyHealth (warn) says the interface cannot be opened or read, with
//     the reason; it returns to normal when the socket opens again.
//   - A send while the socket is closed fails at once (the plugin sees a hardware fault);
//     sends are not queued for the next connection.
package socketcan

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"go.einride.tech/can"
	"go.einride.tech/can/pkg/socketcan"

	"devhost/host/board"
	"devhost/host/health"
)

// Backoff bounds between two attempts to open the interface.
const (
	MinBackoff = 250 * time.Millisecond
	MaxBackoff = 10 * time.Second
)

// sendTimeout bounds one write: a full transmit queue on a stuck bus fails the send rather
// than holding the plugin's host call.
const sendTimeout = time.Second

// KeyHealth is the health condition of the bus's interface.
const KeyHealth = "canBus"

// Reporter is the health table as this package uses it.
type Reporter interface {
	Report(key, state, message string) error
}

// ErrClosed is a send while the interface's socket is not open.
var ErrClosed = errors.New("socketcan: the bus is not open")

// Dialer opens a connection carrying SocketCAN frames on the named interface.
type Dialer func(ctx context.Context, iface string) (net.Conn, error)

// DialRaw opens a CAN_RAW socket bound to the interface.
//
// An interface that is down is refused here: the kernel binds a raw CAN socket to it and
// leaves an error pending that the first read returns, so the bus would count an open and a
// failure four times a second until its owner brings it up; refused at the dial, it waits out
// the doubling backoff like a missing interface.
func DialRaw(ctx context.Context, iface string) (net.Conn, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, err
	}
	if ifi.Flags&net.FlagUp == 0 {
		return nil, fmt.Errorf("interface %s is down", iface)
	}
	return socketcan.DialContext(ctx, "can", iface)
}

// Options configures a Bus.
type Options struct {
	Iface  string          // the interface name, e.g. can0
	Dial   Dialer          // nil is DialRaw
	Clock  clockwork.Clock // nil is the real clock; times the backoff
	Logger *slog.Logger    // nil discards
	Health Reporter        // nil reports nothing
}

// Stats are the bus's counters since it was made.
type Stats struct {
	Up        bool   `json:"up"`         // the socket is open
	FramesIn  uint64 `json:"frames_in"`  // frames delivered to receivers
	FramesOut uint64 `json:"frames_out"` // frames written
	Errors    uint64 `json:"errors"`     // failed opens, reads and writes, dropped frames
	Opens     uint64 `json:"opens"`      // successful opens, the first one included
	LastError string `json:"last_error,omitempty"`
}

// Bus is a CAN bus on a SocketCAN interface. Its methods may be called from any goroutine;
// Run owns the reader.
type Bus struct {
	opts Options

	mu    sync.Mutex
	conn  net.Conn
	tx    *socketcan.Transmitter
	rx    board.Callbacks[func(board.CANFrame)]
	stats Stats
}

// New makes the bus; Run opens it.
func New(opts Options) *Bus {
	if opts.Dial == nil {
		opts.Dial = DialRaw
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Bus{opts: opts}
}

// Stats answers the counters.
func (b *Bus) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// Run opens the interface, reads it and reopens it after a failure, until ctx ends; it
// closes the socket before returning nil.
func (b *Bus) Run(ctx context.Context) error {
	backoff := MinBackoff
	for ctx.Err() == nil {
		conn, err := b.opts.Dial(ctx, b.opts.Iface)
		if err == nil {
			backoff = MinBackoff
			err = b.serve(ctx, conn)
		}
		if ctx.Err() != nil {
			break
		}
		err = fmt.Errorf("can %s: %w", b.opts.Iface, err)
		b.fail(err)
		b.opts.Logger.Warn("CAN interface down; reopening", "iface", b.opts.Iface, "err", err, "in", backoff)
		// The delay stays out of the condition: it changes at every retry, and each change
		// would be a health event.
		b.report(health.Warn, err.Error()+"; opening it again")
		wait := b.opts.Clock.NewTimer(backoff)
		select {
		case <-ctx.Done():
			wait.Stop()
		case <-wait.Chan():
		}
		backoff = min(2*backoff, MaxBackoff)
	}
	return nil
}

// serve reads conn until it fails or ctx ends, delivering frames; it closes conn.
func (b *Bus) serve(ctx context.Context, conn net.Conn) error {
	b.mu.Lock()
	b.conn, b.tx = conn, socketcan.NewTransmitter(conn)
	b.stats.Up = true
	b.stats.Opens++
	b.mu.Unlock()
	b.opts.Logger.Info("CAN interface open", "iface", b.opts.Iface)
	b.report(health.Normal, "")
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer func() {
		stop()
		b.mu.Lock()
		b.conn, b.tx = nil, nil
		b.stats.Up = false
		b.mu.Unlock()
		_ = conn.Close()
	}()
	r := socketcan.NewReceiver(conn)
	for r.Receive() {
		if r.HasErrorFrame() {
			b.fail(fmt.Errorf("can %s: error frame %v", b.opts.Iface, r.ErrorFrame()))
			continue
		}
		f, err := fromCAN(r.Frame())
		if err != nil {
			b.fail(fmt.Errorf("can %s: %w", b.opts.Iface, err))
			continue
		}
		b.deliver(f)
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("read: %w", err)
	}
	return errors.New("read: end of stream")
}

// deliver calls every receiver with its own copy of f.
func (b *Bus) deliver(f board.CANFrame) {
	b.mu.Lock()
	b.stats.FramesIn++
	fns := b.rx.List()
	b.mu.Unlock()
	for _, fn := range fns {
		fn(board.CANFrame{ID: f.ID, Extended: f.Extended, Remote: f.Remote, Data: slices.Clone(f.Data)})
	}
}

// report sets the health condition within the table's message limit (the errors here are
// one line of ASCII).
func (b *Bus) report(state health.State, msg string) {
	if b.opts.Health == nil {
		return
	}
	if len(msg) > health.MaxMessageLen {
		msg = msg[:health.MaxMessageLen]
	}
	if err := b.opts.Health.Report(KeyHealth, string(state), msg); err != nil {
		b.opts.Logger.Warn("health report", "key", KeyHealth, "err", err)
	}
}

// fail counts an error.
func (b *Bus) fail(err error) {
	b.mu.Lock()
	b.stats.Errors++
	b.stats.LastError = err.Error()
	b.mu.Unlock()
}

// CANSend writes a frame on the bus. A frame the bus cannot carry wraps board.ErrFrame, as
// on the simulated bus.
func (b *Bus) CANSend(f board.CANFrame) error {
	cf, err := toCAN(f)
	if err != nil {
		return err
	}
	b.mu.Lock()
	tx := b.tx
	b.mu.Unlock()
	if tx == nil {
		return fmt.Errorf("can %s: %w", b.opts.Iface, ErrClosed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
	defer cancel()
	if err := tx.TransmitFrame(ctx, cf); err != nil {
		err = fmt.Errorf("can %s: %w", b.opts.Iface, err)
		b.fail(err)
		return err
	}
	b.mu.Lock()
	b.stats.FramesOut++
	b.mu.Unlock()
	return nil
}

// CANReceive calls fn with every frame read from the bus until cancel is called.
func (b *Bus) CANReceive(fn func(board.CANFrame)) (cancel func(), err error) {
	return board.Subscribe(&b.mu, &b.rx, fn), nil
}

// toCAN converts a frame to the library's, refusing what the bus cannot carry.
func toCAN(f board.CANFrame) (can.Frame, error) {
	if err := f.Check(); err != nil {
		return can.Frame{}, err
	}
	cf := can.Frame{ID: f.ID, Length: uint8(len(f.Data)), IsExtended: f.Extended, IsRemote: f.Remote}
	copy(cf.Data[:], f.Data)
	return cf, nil
}

// fromCAN converts a received frame. A remote frame carries its requested length but no data.
func fromCAN(cf can.Frame) (board.CANFrame, error) {
	if cf.Length > can.MaxDataLength {
		return board.CANFrame{}, fmt.Errorf("%w: id %#x with length %d", board.ErrFrame, cf.ID, cf.Length)
	}
	// cf is a copy already, and deliver gives every receiver a copy of its own.
	f := board.CANFrame{ID: cf.ID, Extended: cf.IsExtended, Remote: cf.IsRemote, Data: []byte{}}
	if !cf.IsRemote {
		f.Data = cf.Data[:cf.Length]
	}
	return f, nil
}
