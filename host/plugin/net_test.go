package plugin

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"devhost/abi"
)

// netHarness is one plugin session whose host functions the test calls directly, with the
// inbox read as the worker would.
type netHarness struct {
	t *testing.T
	p *plugin
	s *session
}

func newNetHarness(t *testing.T, grants ...string) *netHarness {
	m := fuzzManager(t)
	p := m.newPlugin(record{ID: "nt", Wanted: WantRunning})
	p.man = manifest("nt", abi.CapNetClient)
	inst := &instance{alloc: &allocator{}, memory: &linearMem{buf: make([]byte, 128<<10)}}
	h := &netHarness{t: t, p: p, s: newSession(p, inst, p.inbox.open(), grants)}
	t.Cleanup(func() {
		h.s.end()
		p.inbox.close()
	})
	return h
}

func (h *netHarness) call(fn hostFunc, in []byte) (int32, error) {
	copy(h.s.inst.memory.buf, in)
	return abi.Result(h.s.invoke(abi.CapNetClient, fn, []uint64{0, uint64(len(in))}))
}

func (h *netHarness) open(o abi.NetOpen) (uint32, error) {
	id, err := h.call(fnNetOpen, abi.AppendNetOpen(nil, o))
	return uint32(id), err
}

func (h *netHarness) send(id uint32, b []byte) (int32, error) {
	return h.call(fnNetSend, abi.AppendNetData(nil, abi.NetData{ID: id, Data: b}))
}

// next waits for the next net event, delivering it (its done runs) unless hold is set.
func (h *netHarness) next(hold bool) (queued, bool) {
	h.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		h.p.inbox.mu.Lock()
		n := len(h.p.inbox.q)
		h.p.inbox.mu.Unlock()
		if n > 0 {
			break
		}
		select {
		case <-h.p.inbox.kick:
		case <-deadline:
			return queued{}, false
		}
	}
	h.p.inbox.mu.Lock()
	e := h.p.inbox.q[0]
	h.p.inbox.q = h.p.inbox.q[1:]
	h.p.inbox.bytes -= len(e.payload)
	h.p.inbox.mu.Unlock()
	if !hold && e.done != nil {
		e.done()
	}
	return e, true
}

func (h *netHarness) state(want abi.NetStateKind) abi.NetState {
	h.t.Helper()
	e, ok := h.next(false)
	if !ok || e.kind != abi.EvNetState {
		h.t.Fatalf("want a net_state event, got %v %v", e.kind, ok)
	}
	st, err := abi.DecodeNetState(e.payload)
	if err != nil || st.State != want {
		h.t.Fatalf("state %+v %v, want %v", st, err, want)
	}
	return st
}

func listenTCP(t *testing.T) (net.Listener, uint32) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, uint32(ln.Addr().(*net.TCPAddr).Port)
}

func TestNetTCP(t *testing.T) {
	h := newNetHarness(t, "net.client")
	ln, port := listenTCP(t)
	id, err := h.open(abi.NetOpen{Proto: abi.NetTCP, Host: "127.0.0.1", Port: port})
	if err != nil || id == 0 {
		t.Fatalf("open: %d %v", id, err)
	}
	// Nothing to send on before the connection is made.
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	h.state(abi.NetOpened)

	// Both ways.
	if n, err := h.send(id, []byte("A000000.000 64FF3 1F20D 0102\r\n")); err != nil || n != 30 {
		t.Fatalf("send: %d %v", n, err)
	}
	got := make([]byte, 30)
	if _, err := io.ReadFull(peer, got); err != nil || string(got) != "A000000.000 64FF3 1F20D 0102\r\n" {
		t.Fatalf("peer read %q %v", got, err)
	}

	// Backpressure: the peer writes four times what the host queues for the plugin; while the
	// plugin takes nothing, the host holds at most MaxNetInflight bytes.
	total := 4 * abi.MaxNetInflight
	go func() {
		_, _ = peer.Write(bytes.Repeat([]byte("x"), total))
	}()
	var held []queued
	size := 0
	for size < abi.MaxNetInflight-abi.MaxNetChunk {
		e, ok := h.next(true)
		if !ok || e.kind != abi.EvNetData {
			t.Fatalf("data event: %v %v", e.kind, ok)
		}
		d, _ := abi.DecodeNetData(e.payload)
		size += len(d.Data)
		held = append(held, e)
	}
	h.p.inbox.mu.Lock()
	queuedBytes := h.p.inbox.bytes
	h.p.inbox.mu.Unlock()
	if size+queuedBytes > abi.MaxNetInflight+64 {
		t.Fatalf("%d bytes held and %d queued while the plugin took nothing", size, queuedBytes)
	}
	for _, e := range held {
		e.done()
	}
	for size < total {
		e, ok := h.next(false)
		if !ok {
			t.Fatalf("stalled after %d of %d bytes", size, total)
		}
		d, _ := abi.DecodeNetData(e.payload)
		size += len(d.Data)
	}

	// The peer drops the connection: a closed event with the reason, the id is gone.
	peer.Close()
	if st := h.state(abi.NetClosed); st.ID != id || st.Reason != "closed by the peer" {
		t.Fatalf("closed %+v", st)
	}
	if _, err := h.send(id, []byte("x")); !errors.Is(err, abi.ErrNotFound) {
		t.Fatalf("send after close: %v", err)
	}
	if _, err := h.call(fnNetClose, nil); err == nil {
		t.Fatal("close of id 0")
	}
}

func TestNetTCPRefusedAndClosedByPlugin(t *testing.T) {
	h := newNetHarness(t, "net.client")
	ln, port := listenTCP(t)
	ln.Close()
	id, err := h.open(abi.NetOpen{Proto: abi.NetTCP, Host: "127.0.0.1", Port: port})
	if err != nil {
		t.Fatal(err)
	}
	if st := h.state(abi.NetClosed); st.ID != id || st.Reason != "connection refused" {
		t.Fatalf("refused: %+v", st)
	}

	ln2, port2 := listenTCP(t)
	id2, err := h.open(abi.NetOpen{Proto: abi.NetTCP, Host: "127.0.0.1", Port: port2})
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln2.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	h.state(abi.NetOpened)
	if rc := h.s.invoke(abi.CapNetClient, fnNetClose, []uint64{uint64(id2)}); rc != 0 {
		t.Fatalf("close: %d", rc)
	}
	// The host closed the connection: the peer reads EOF, and the plugin hears nothing more.
	if _, err := peer.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("peer read after close: %v", err)
	}
	h.s.endNet()
	h.p.inbox.mu.Lock()
	left := len(h.p.inbox.q)
	h.p.inbox.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d events after the plugin closed the socket", left)
	}
}

func TestNetUDP(t *testing.T) {
	h := newNetHarness(t, "net.client")
	// The peer the plugin sends to.
	peer, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	peerPort := uint32(peer.LocalAddr().(*net.UDPAddr).Port)
	id, err := h.open(abi.NetOpen{Proto: abi.NetUDP, Host: "127.0.0.1", Port: peerPort})
	if err != nil {
		t.Fatal(err)
	}
	h.state(abi.NetOpened)
	n := h.s.net.get(id)
	local := n.pc.LocalAddr().(*net.UDPAddr).Port
	// A datagram to the bound port arrives as one event.
	c, err := net.Dial("udp", "127.0.0.1:"+strconv.Itoa(local))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("00:00:01.000 R 09F8027F 00 FC FF FF 00 00 FF FF\r\n")); err != nil {
		t.Fatal(err)
	}
	e, ok := h.next(false)
	d, _ := abi.DecodeNetData(e.payload)
	if !ok || e.kind != abi.EvNetData || d.ID != id || string(d.Data) != "00:00:01.000 R 09F8027F 00 FC FF FF 00 00 FF FF\r\n" {
		t.Fatalf("datagram %v %+v", e.kind, d)
	}
	// And one the plugin sends reaches the destination.
	if _, err := h.send(id, []byte("09F8027F 00 FC\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	_ = peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	k, _, err := peer.ReadFrom(buf)
	if err != nil || string(buf[:k]) != "09F8027F 00 FC\r\n" {
		t.Fatalf("peer got %q %v", buf[:k], err)
	}
	// The port is taken while the socket lives.
	if _, err := h.open(abi.NetOpen{Proto: abi.NetUDP, LocalPort: uint32(local)}); !errors.Is(err, abi.ErrConflict) && local >= abi.MinNetPort {
		t.Fatalf("second bind: %v", err)
	}
	// A receive-only socket cannot send.
	ro, err := h.open(abi.NetOpen{Proto: abi.NetUDP})
	if err != nil {
		t.Fatal(err)
	}
	h.state(abi.NetOpened)
	if _, err := h.send(ro, []byte("x")); !errors.Is(err, abi.ErrState) {
		t.Fatalf("send on a receive-only socket: %v", err)
	}
	// The instance ends: every socket is closed and the port free again.
	h.s.endNet()
	again, err := net.ListenPacket("udp", ":"+strconv.Itoa(local))
	if err != nil {
		t.Fatalf("port still bound after the instance ended: %v", err)
	}
	again.Close()
}

func TestNetLimitsAndPermission(t *testing.T) {
	h := newNetHarness(t, "log")
	if _, err := h.open(abi.NetOpen{Proto: abi.NetUDP}); !errors.Is(err, abi.ErrPermission) {
		t.Fatalf("without net.client: %v", err)
	}
	h = newNetHarness(t, "net.client")
	if _, err := h.open(abi.NetOpen{Proto: abi.NetTCP, Host: "127.0.0.1"}); !errors.Is(err, abi.ErrInvalid) {
		t.Fatalf("no port: %v", err)
	}
	for i := 0; i < abi.MaxSockets; i++ {
		if _, err := h.open(abi.NetOpen{Proto: abi.NetUDP}); err != nil {
			t.Fatalf("socket %d: %v", i, err)
		}
	}
	if _, err := h.open(abi.NetOpen{Proto: abi.NetUDP}); !errors.Is(err, abi.ErrLimit) {
		t.Fatalf("socket %d: %v", abi.MaxSockets+1, err)
	}
	if _, err := h.send(99, []byte("x")); !errors.Is(err, abi.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
}
