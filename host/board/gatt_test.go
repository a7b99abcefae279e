package board

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// echoService is a service whose one characteristic answers what was last written, per
// connection, reversed (so a read is visibly the device's answer).
type echoService struct {
	mu    sync.Mutex
	last  map[int][]byte
	gone  []int
	fails bool
}

func (e *echoService) service() *GATTService {
	e.last = map[int][]byte{}
	return &GATTService{UUID: "021a9004-0382-4aea-bff4-6b3f1c5adfb4", Chars: []GATTChar{
		{UUID: "021aff53-0382-4aea-bff4-6b3f1c5adfb4", Description: "proto-ver",
			Read: func(int) ([]byte, error) { return []byte("v1.1"), nil }},
		{UUID: "021aff51-0382-4aea-bff4-6b3f1c5adfb4", Description: "prov-session",
			Read: func(conn int) ([]byte, error) {
				e.mu.Lock()
				defer e.mu.Unlock()
				v := bytes.Clone(e.last[conn])
				for i, j := 0, len(v)-1; i < j; i, j = i+1, j-1 {
					v[i], v[j] = v[j], v[i]
				}
				return v, nil
			},
			Write: func(conn int, v []byte) error {
				e.mu.Lock()
				defer e.mu.Unlock()
				if e.fails {
					return errors.New("refused")
				}
				e.last[conn] = v
				return nil
			}},
	}, Disconnected: func(conn int) { e.mu.Lock(); e.gone = append(e.gone, conn); e.mu.Unlock() }}
}

func attCode(err error) int {
	var ae *ATTError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return 0
}

func TestGATTPeripheral(t *testing.T) {
	sim, err := NewSim(DefaultFile())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.CentralConnect(); !errors.Is(err, ErrNoPeripheral) {
		t.Fatalf("connect without a peripheral: %v", err)
	}
	e := &echoService{}
	sim.GATTServe(e.service())
	conn, err := sim.CentralConnect()
	if err != nil {
		t.Fatal(err)
	}
	svcs, err := sim.CentralDiscover(conn)
	if err != nil || len(svcs) != 1 || len(svcs[0].Chars) != 2 {
		t.Fatalf("discover %+v %v", svcs, err)
	}
	ver, sess := svcs[0].Chars[0], svcs[0].Chars[1]
	if sess.Description != "prov-session" || len(sess.Properties) != 2 || len(ver.Properties) != 1 {
		t.Fatalf("chars %+v", svcs[0].Chars)
	}
	if d, err := sim.CentralRead(conn, sess.DescHandle, 0); err != nil || string(d) != "prov-session" {
		t.Fatalf("user description %q %v", d, err)
	}
	if err := sim.CentralWrite(conn, ver.Handle, 0, []byte("x"), false); attCode(err) != ATTWriteNotPermit {
		t.Fatalf("write to a read-only char: %v", err)
	}
	if _, err := sim.CentralRead(conn, 99, 0); attCode(err) != ATTInvalidHandle {
		t.Fatalf("read of a bad handle: %v", err)
	}

	// Default MTU 23: a plain write carries 20 bytes.
	if err := sim.CentralWrite(conn, sess.Handle, 0, make([]byte, 21), false); attCode(err) != ATTInvalidLength {
		t.Fatalf("21-byte write at MTU 23: %v", err)
	}
	// A long write: prepared in order, then executed.
	long := bytes.Repeat([]byte("0123456789"), 10)
	for off := 0; off < len(long); off += 18 {
		if err := sim.CentralWrite(conn, sess.Handle, off, long[off:min(len(long), off+18)], true); err != nil {
			t.Fatalf("prepare at %d: %v", off, err)
		}
	}
	if err := sim.CentralExecute(conn, true); err != nil {
		t.Fatal(err)
	}
	// A long read pages through the answer with offsets.
	var got []byte
	for {
		part, err := sim.CentralRead(conn, sess.Handle, len(got))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, part...)
		if len(part) < DefaultMTU-1 {
			break
		}
	}
	if len(got) != len(long) || got[0] != long[len(long)-1] {
		t.Fatalf("long read %q", got)
	}
	// Out of order prepared writes are refused and drop the queue.
	if err := sim.CentralWrite(conn, sess.Handle, 0, []byte("abc"), true); err != nil {
		t.Fatal(err)
	}
	if err := sim.CentralWrite(conn, sess.Handle, 10, []byte("def"), true); attCode(err) != ATTInvalidOffset {
		t.Fatalf("out-of-order prepare: %v", err)
	}
	// Oversized: beyond the longest attribute.
	var lastErr error
	for off := 0; off <= MaxAttrLen && lastErr == nil; off += 18 {
		lastErr = sim.CentralWrite(conn, sess.Handle, off, make([]byte, 18), true)
	}
	if attCode(lastErr) != ATTPrepareQueueFull {
		t.Fatalf("oversized long write: %v", lastErr)
	}
	// MTU exchange.
	if mtu, err := sim.CentralMTU(conn, 600); err != nil || mtu != MaxMTU {
		t.Fatalf("mtu %d %v", mtu, err)
	}
	if _, err := sim.CentralMTU(conn, 10); err == nil {
		t.Fatal("MTU below 23 accepted")
	}
	if err := sim.CentralWrite(conn, sess.Handle, 0, make([]byte, 100), false); err != nil {
		t.Fatalf("100-byte write at MTU 517: %v", err)
	}
	// A device-side refusal is an ATT error.
	e.mu.Lock()
	e.fails = true
	e.mu.Unlock()
	if err := sim.CentralWrite(conn, sess.Handle, 0, []byte("x"), false); attCode(err) != ATTUnlikely {
		t.Fatalf("refused write: %v", err)
	}
	// Disconnect reaches the device; the connection is gone.
	if err := sim.CentralDisconnect(conn); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.CentralRead(conn, sess.Handle, 0); !errors.Is(err, ErrNoConnection) {
		t.Fatalf("read after disconnect: %v", err)
	}
	e.mu.Lock()
	gone := e.gone
	e.mu.Unlock()
	if len(gone) != 1 || gone[0] != conn {
		t.Fatalf("disconnects seen %v", gone)
	}
	// Bounded connections.
	for i := 0; i < MaxConnections; i++ {
		if _, err := sim.CentralConnect(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sim.CentralConnect(); err == nil {
		t.Fatal("connection beyond the limit accepted")
	}
	// Withdrawing the table disconnects everyone.
	sim.GATTServe(nil)
	e.mu.Lock()
	n := len(e.gone)
	e.mu.Unlock()
	if n != 1+MaxConnections {
		t.Fatalf("%d disconnects after withdrawal", n)
	}
}

func TestCentralOverControlChannel(t *testing.T) {
	sim, err := NewSim(DefaultFile())
	if err != nil {
		t.Fatal(err)
	}
	e := &echoService{}
	sim.GATTServe(e.service())
	sock := filepath.Join(t.TempDir(), "board.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Serve(ctx, sock) }()
	t.Cleanup(func() { cancel(); <-done })
	c := Dial(sock)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.State(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("control channel did not come up")
		}
		time.Sleep(5 * time.Millisecond)
	}
	res, err := c.Central(ctx, CentralOp{Op: "connect"})
	if err != nil || res.Conn == 0 {
		t.Fatalf("connect %+v %v", res, err)
	}
	id := res.Conn
	res, err = c.Central(ctx, CentralOp{Op: "discover", Conn: id})
	if err != nil || len(res.Services) != 1 {
		t.Fatalf("discover %+v %v", res, err)
	}
	h := res.Services[0].Chars[1].Handle
	if res, err := c.Central(ctx, CentralOp{Op: "write", Conn: id, Handle: h, Data: []byte("abc")}); err != nil || res.ATTError != 0 {
		t.Fatalf("write %+v %v", res, err)
	}
	if res, err := c.Central(ctx, CentralOp{Op: "read", Conn: id, Handle: h}); err != nil || string(res.Value) != "cba" {
		t.Fatalf("read %+v %v", res, err)
	}
	if res, err := c.Central(ctx, CentralOp{Op: "read", Conn: id, Handle: 200}); err != nil || res.ATTError != ATTInvalidHandle {
		t.Fatalf("bad handle %+v %v", res, err)
	}
	var ce *ControlError
	if _, err := c.Central(ctx, CentralOp{Op: "read", Conn: 999, Handle: h}); !errors.As(err, &ce) || ce.Status != 404 {
		t.Fatalf("unknown connection: %v", err)
	}
	if _, err := c.Central(ctx, CentralOp{Op: "fly"}); !errors.As(err, &ce) || ce.Status != 400 {
		t.Fatalf("unknown op: %v", err)
	}
	// GET is not the central's method.
	rec := httptest.NewRecorder()
	sim.Handler().ServeHTTP(rec, httptest.NewRequest("GET", CentralPath, nil))
	if rec.Code != 405 {
		t.Fatalf("GET %s: %d", CentralPath, rec.Code)
	}
}

func TestGATTNotifications(t *testing.T) {
	sim, err := NewSim(DefaultFile())
	if err != nil {
		t.Fatal(err)
	}
	sim.GATTServe(&GATTService{UUID: "0000180f-0000-1000-8000-00805f9b34fb", Chars: []GATTChar{
		{UUID: "00002a19-0000-1000-8000-00805f9b34fb", Description: "level", Notify: true,
			Read: func(int) ([]byte, error) { return []byte{80}, nil }},
		{UUID: "00002a1a-0000-1000-8000-00805f9b34fb", Description: "quiet", Read: func(int) ([]byte, error) { return nil, nil }},
	}})
	a, _ := sim.CentralConnect()
	b, _ := sim.CentralConnect()
	svcs, _ := sim.CentralDiscover(a)
	level, quiet := svcs[0].Chars[0], svcs[0].Chars[1]
	if !slices.Contains(level.Properties, "notify") || slices.Contains(quiet.Properties, "notify") {
		t.Fatalf("properties %v %v", level.Properties, quiet.Properties)
	}
	if err := sim.CentralSubscribe(a, quiet.Handle, true); attCode(err) != ATTWriteNotPermit {
		t.Fatalf("subscribe to a silent char: %v", err)
	}
	if err := sim.CentralSubscribe(a, level.Handle, true); err != nil {
		t.Fatal(err)
	}
	if n, err := sim.GATTNotify(level.Handle, make([]byte, 40)); err != nil || n != 1 {
		t.Fatalf("notify reached %d, %v", n, err)
	}
	notes, err := sim.CentralNotifications(a)
	if err != nil || len(notes) != 1 || len(notes[0].Value) != DefaultMTU-3 {
		t.Fatalf("a got %+v %v", notes, err)
	}
	if notes, _ := sim.CentralNotifications(b); len(notes) != 0 {
		t.Fatalf("unsubscribed b got %+v", notes)
	}
	for i := 0; i < MaxNotifications+10; i++ {
		if _, err := sim.GATTNotify(level.Handle, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	notes, _ = sim.CentralNotifications(a)
	if len(notes) != MaxNotifications || notes[0].Value[0] != 10 {
		t.Fatalf("kept %d, oldest %v", len(notes), notes[0].Value)
	}
	if err := sim.CentralSubscribe(a, level.Handle, false); err != nil {
		t.Fatal(err)
	}
	if n, _ := sim.GATTNotify(level.Handle, []byte{1}); n != 0 {
		t.Fatalf("notify after unsubscribe reached %d", n)
	}
	if _, err := sim.GATTNotify(quiet.Handle, []byte{1}); err == nil {
		t.Fatal("notify on a silent char accepted")
	}
}
