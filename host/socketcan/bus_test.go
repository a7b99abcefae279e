package socketcan

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.einride.tech/can"
	"go.einride.tech/can/pkg/socketcan"

	"devhost/host/board"
)

// hangGuard bounds a wait for something that should happen at once; never a measured timing.
const hangGuard = 10 * time.Second

// pipeDialer hands out the bus's ends of net.Pipe pairs and keeps the peer ends, which stand
// for the kernel: they carry the same 16-byte frames.
type pipeDialer struct {
	fail  chan error    // when not empty, the next dial fails with this
	peers chan net.Conn // the peer end of every successful dial
}

func newPipeDialer() *pipeDialer {
	return &pipeDialer{fail: make(chan error, 8), peers: make(chan net.Conn, 8)}
}

func (p *pipeDialer) dial(context.Context, string) (net.Conn, error) {
	select {
	case err := <-p.fail:
		return nil, err
	default:
	}
	bus, peer := net.Pipe()
	p.peers <- peer
	return bus, nil
}

func (p *pipeDialer) peer(t *testing.T) net.Conn {
	t.Helper()
	c := within(t, p.peers, "the bus opening the interface")
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// within answers the next value from ch, failing the test when none comes.
func within[T any](t *testing.T, ch <-chan T, what string) (v T) {
	t.Helper()
	timer := time.NewTimer(hangGuard)
	defer timer.Stop()
	select {
	case v = <-ch:
	case <-timer.C:
		t.Fatalf("waited in vain for %s", what)
	}
	return v
}

// runBus runs a bus until the test ends.
func runBus(t *testing.T, opts Options) *Bus {
	t.Helper()
	if opts.Iface == "" {
		opts.Iface = "vcan0"
	}
	b := New(opts)
	done := make(chan error, 1)
	go func() { done <- b.Run(t.Context()) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return b
}

// rawFrame is a frame in the kernel's struct can_frame layout.
func rawFrame(idFlags uint32, dlc byte, data ...byte) []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint32(b, idFlags)
	b[4] = dlc
	copy(b[8:], data)
	return b
}

func TestSendLayout(t *testing.T) {
	tests := []struct {
		name string
		f    board.CANFrame
		want []byte
	}{
		{"standard", board.CANFrame{ID: 0x123, Data: []byte{1, 2, 3}}, rawFrame(0x123, 3, 1, 2, 3)},
		{"standard, largest id, empty", board.CANFrame{ID: 0x7ff, Data: nil}, rawFrame(0x7ff, 0)},
		{"extended, 8 bytes", board.CANFrame{ID: 0x09f80123, Extended: true, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
			rawFrame(0x80000000|0x09f80123, 8, 1, 2, 3, 4, 5, 6, 7, 8)},
		{"extended, largest id", board.CANFrame{ID: 1<<29 - 1, Extended: true, Data: []byte{0xff}}, rawFrame(0x80000000|(1<<29-1), 1, 0xff)},
		{"remote standard", board.CANFrame{ID: 0x10, Remote: true}, rawFrame(0x40000000|0x10, 0)},
		{"remote extended", board.CANFrame{ID: 0x18eaff00, Extended: true, Remote: true}, rawFrame(0xc0000000|0x18eaff00, 0)},
	}
	d := newPipeDialer()
	b := runBus(t, Options{Dial: d.dial})
	peer := d.peer(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := make([]byte, 16)
			read := make(chan error, 1)
			go func() {
				_, err := peer.Read(got)
				read <- err
			}()
			if err := b.CANSend(tc.f); err != nil {
				t.Fatalf("CANSend: %v", err)
			}
			if err := <-read; err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("wrote % x, want % x", got, tc.want)
			}
		})
	}
	if s := b.Stats(); s.FramesOut != uint64(len(tests)) || s.Errors != 0 {
		t.Errorf("stats %+v: want %d frames out, no errors", s, len(tests))
	}
}

func TestSendRefusesWhatTheSimRefuses(t *testing.T) {
	bad := []struct {
		name string
		f    board.CANFrame
	}{
		{"standard id over 11 bits", board.CANFrame{ID: 0x800}},
		{"extended id over 29 bits", board.CANFrame{ID: 1 << 29, Extended: true}},
		{"nine bytes", board.CANFrame{ID: 1, Data: make([]byte, 9)}},
		{"remote with data", board.CANFrame{ID: 1, Remote: true, Data: []byte{1}}},
	}
	sim, err := board.NewSim(board.DefaultFile())
	if err != nil {
		t.Fatal(err)
	}
	b := New(Options{Iface: "vcan0", Dial: newPipeDialer().dial}) // not running: a refusal comes first
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			err := b.CANSend(tc.f)
			if !errors.Is(err, board.ErrFrame) {
				t.Fatalf("CANSend: %v, want board.ErrFrame", err)
			}
			if simErr := sim.CANSend(tc.f); simErr == nil || simErr.Error() != err.Error() {
				t.Errorf("error %q, the simulated bus says %v", err, simErr)
			}
		})
	}
	if err := b.CANSend(board.CANFrame{ID: 1}); !errors.Is(err, ErrClosed) {
		t.Errorf("a good frame on a bus not open: %v, want ErrClosed", err)
	}
}

func TestFromCAN(t *testing.T) {
	tests := []struct {
		name    string
		in      can.Frame
		want    board.CANFrame
		wantErr bool
	}{
		{"standard", can.Frame{ID: 0x123, Length: 2, Data: can.Data{9, 8, 7}}, board.CANFrame{ID: 0x123, Data: []byte{9, 8}}, false},
		{"extended", can.Frame{ID: 0x09f80123, IsExtended: true, Length: 8, Data: can.Data{1, 2, 3, 4, 5, 6, 7, 8}},
			board.CANFrame{ID: 0x09f80123, Extended: true, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}}, false},
		{"remote keeps no data", can.Frame{ID: 0x10, IsRemote: true, Length: 8}, board.CANFrame{ID: 0x10, Remote: true, Data: []byte{}}, false},
		{"length over 8", can.Frame{ID: 1, Length: 9}, board.CANFrame{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fromCAN(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				if !errors.Is(err, board.ErrFrame) {
					t.Errorf("err %v, want board.ErrFrame", err)
				}
				return
			}
			if got.ID != tc.want.ID || got.Extended != tc.want.Extended || got.Remote != tc.want.Remote || !slices.Equal(got.Data, tc.want.Data) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// collector is a receiver that hands frames to the test.
type collector chan board.CANFrame

func (c collector) fn(f board.CANFrame) { c <- f }

func (c collector) next(t *testing.T) board.CANFrame {
	t.Helper()
	return within(t, c, "a frame")
}

func TestReceiveFansOut(t *testing.T) {
	d := newPipeDialer()
	b := runBus(t, Options{Dial: d.dial})
	peer := d.peer(t)
	tx := socketcan.NewTransmitter(peer)
	a, c := make(collector, 8), make(collector, 8)
	cancelA, err := b.CANReceive(a.fn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.CANReceive(c.fn); err != nil {
		t.Fatal(err)
	}
	send := func(f can.Frame) {
		t.Helper()
		if err := tx.TransmitFrame(context.Background(), f); err != nil {
			t.Fatal(err)
		}
	}
	send(can.Frame{ID: 0x09f80123, IsExtended: true, Length: 3, Data: can.Data{1, 2, 3}})
	for _, col := range []collector{a, c} {
		f := col.next(t)
		if f.ID != 0x09f80123 || !f.Extended || !slices.Equal(f.Data, []byte{1, 2, 3}) {
			t.Errorf("received %+v", f)
		}
	}
	cancelA()
	// A frame the bus cannot carry (length 9) is counted and skipped; the next one arrives.
	if _, err := peer.Write(rawFrame(0x55, 9, 1, 2, 3, 4, 5, 6, 7, 8)); err != nil {
		t.Fatal(err)
	}
	send(can.Frame{ID: 0x7, Length: 1, Data: can.Data{42}})
	if f := c.next(t); f.ID != 0x7 || f.Extended || !slices.Equal(f.Data, []byte{42}) {
		t.Errorf("received %+v after the bad frame", f)
	}
	select {
	case f := <-a:
		t.Errorf("a cancelled receiver got %+v", f)
	default:
	}
	if s := b.Stats(); s.FramesIn != 2 || s.Errors != 1 || !s.Up {
		t.Errorf("stats %+v: want 2 frames in, 1 error, up", s)
	}
}

func TestReceiversGetTheirOwnData(t *testing.T) {
	d := newPipeDialer()
	b := runBus(t, Options{Dial: d.dial})
	peer := d.peer(t)
	var mu sync.Mutex
	var got [][]byte
	done := make(chan struct{}, 2)
	for range 2 {
		if _, err := b.CANReceive(func(f board.CANFrame) {
			mu.Lock()
			got = append(got, f.Data)
			mu.Unlock()
			f.Data[0] = 0xee // a receiver scribbling on its frame
			done <- struct{}{}
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := peer.Write(rawFrame(0x1, 1, 5)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		within(t, done, "both receivers")
	}
	mu.Lock()
	defer mu.Unlock()
	if got[0][0] != 0xee || got[1][0] != 0xee || &got[0][0] == &got[1][0] {
		t.Errorf("receivers share the frame's data")
	}
}

// conditions records the health reports of the bus.
type conditions struct {
	mu   sync.Mutex
	last [2]string // state, message
	n    int
}

func (c *conditions) Report(key, state, message string) error {
	if key != KeyHealth {
		return errors.New("unexpected key " + key)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = [2]string{state, message}
	c.n++
	return nil
}

func (c *conditions) get() (state, message string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last[0], c.last[1], c.n
}

func TestReopensWithBackoff(t *testing.T) {
	clk := clockwork.NewFakeClock()
	d := newPipeDialer()
	d.fail <- errors.New("no such device")
	d.fail <- errors.New("no such device")
	var health conditions
	b := runBus(t, Options{Dial: d.dial, Clock: clk, Health: &health})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	// Two failed opens, each waiting out its backoff (250 ms, then 500 ms) on the fake clock.
	for _, wait := range []time.Duration{MinBackoff, 2 * MinBackoff} {
		if err := clk.BlockUntilContext(ctx, 1); err != nil {
			t.Fatalf("no backoff timer: %v", err)
		}
		if s := b.Stats(); s.Up {
			t.Fatalf("up before the interface opened: %+v", s)
		}
		if state, msg, _ := health.get(); state != "warn" || !strings.HasSuffix(msg, "vcan0: no such device; opening it again") {
			t.Errorf("health %s %q while the interface cannot be opened", state, msg)
		}
		clk.Advance(wait - time.Nanosecond)
		select {
		case <-d.peers:
			t.Fatal("reopened before the backoff ended")
		default:
		}
		clk.Advance(time.Nanosecond)
	}
	peer := d.peer(t)
	col := make(collector, 1)
	if _, err := b.CANReceive(col.fn); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Write(rawFrame(0x3, 0)); err != nil {
		t.Fatal(err)
	}
	col.next(t)
	if s := b.Stats(); !s.Up || s.Opens != 1 || s.Errors != 2 {
		t.Errorf("stats %+v: want up, 1 open, 2 errors", s)
	}
	if state, msg, n := health.get(); state != "normal" || msg != "" || n != 3 {
		t.Errorf("health %s %q after %d reports, want normal after 3", state, msg, n)
	}

	// The interface goes away: the read fails, the bus reports down and opens again after
	// the first backoff (reset by the successful open).
	_ = peer.Close()
	if err := clk.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("no backoff timer after the read failed: %v", err)
	}
	if s := b.Stats(); s.Up || s.Errors != 3 || s.LastError == "" {
		t.Errorf("stats %+v: want down with a third error", s)
	}
	if state, msg, _ := health.get(); state != "warn" || !strings.Contains(msg, "read") {
		t.Errorf("health %s %q after the read failed", state, msg)
	}
	if err := b.CANSend(board.CANFrame{ID: 1}); !errors.Is(err, ErrClosed) {
		t.Errorf("send while down: %v, want ErrClosed", err)
	}
	clk.Advance(MinBackoff)
	peer = d.peer(t)
	if _, err := peer.Write(rawFrame(0x4, 0)); err != nil {
		t.Fatal(err)
	}
	if f := col.next(t); f.ID != 0x4 {
		t.Errorf("after reopening got %+v", f)
	}
	if s := b.Stats(); !s.Up || s.Opens != 2 {
		t.Errorf("stats %+v: want up after 2 opens", s)
	}
}
