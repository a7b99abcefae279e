package plugin

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"devhost/abi"
)

// netSock is one socket a plugin instance opened with net_open (capability net.client). The
// session owns it: its goroutines (the TCP dial and reader, the TCP writer, the UDP reader)
// are counted in the session's netWG, and session.end cancels every socket and waits for
// them. Received bytes reach the plugin through its inbox, at most abi.MaxNetInflight per
// socket at a time: the reader waits for the plugin's batches to take what it queued
// before it reads more (backpressure), so a slow plugin never makes the host buffer more.
type netSock struct {
	id     uint32
	proto  abi.NetProto
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	inflight int           // received bytes queued for the plugin
	released chan struct{} // signalled when queued bytes were delivered
	conn     net.Conn      // TCP, once connected
	pc       net.PacketConn
	dest     net.Addr // UDP destination, once resolved
	out      [][]byte // TCP bytes waiting for the writer
	outBytes int
	wake     chan struct{} // signals the TCP writer
	byPlugin bool          // closed by net_close: no closed event
}

// netTable is the session's sockets, reached from the worker (host functions) and from the
// sockets' goroutines (which remove a socket that closed).
type netTable struct {
	mu   sync.Mutex
	next uint32
	m    map[uint32]*netSock
	wg   sync.WaitGroup
}

func (t *netTable) get(id uint32) *netSock {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

// remove takes a socket out of the table; it reports whether it was there.
func (t *netTable) remove(n *netSock) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[n.id] != n {
		return false
	}
	delete(t.m, n.id)
	return true
}

// endNet closes every socket of the instance and waits for their goroutines: they die with
// it, and no event of theirs is queued afterwards.
func (s *session) endNet() {
	t := &s.net
	t.mu.Lock()
	for id, n := range t.m {
		n.mu.Lock()
		n.byPlugin = true
		n.mu.Unlock()
		n.cancel()
		delete(t.m, id)
	}
	t.mu.Unlock()
	t.wg.Wait()
}

func fnNetOpen(s *session, st []uint64) int32 {
	o, rc := decodeArg(s, st, abi.DecodeNetOpen)
	if rc != 0 {
		return rc
	}
	t := &s.net
	t.mu.Lock()
	if len(t.m) >= abi.MaxSockets {
		t.mu.Unlock()
		return int32(abi.ErrLimit)
	}
	t.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	n := &netSock{proto: o.Proto, ctx: ctx, cancel: cancel, released: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
	if o.Proto == abi.NetUDP {
		// Every address: a gateway's broadcasts to the port arrive too.
		var lc net.ListenConfig
		pc, err := lc.ListenPacket(ctx, "udp", ":"+strconv.Itoa(int(o.LocalPort)))
		if err != nil {
			cancel()
			s.p.log.Warn("net_open: udp bind", "port", o.LocalPort, "err", err)
			if errors.Is(err, syscall.EADDRINUSE) {
				return int32(abi.ErrConflict)
			}
			return int32(abi.ErrIO)
		}
		n.pc = pc
	}
	t.mu.Lock()
	t.next++
	n.id = t.next
	if t.m == nil {
		t.m = map[uint32]*netSock{}
	}
	t.m[n.id] = n
	t.wg.Add(1)
	t.mu.Unlock()
	addr := net.JoinHostPort(o.Host, strconv.Itoa(int(o.Port)))
	if o.Proto == abi.NetTCP {
		go s.runTCP(n, addr)
	} else {
		go s.runUDP(n, o.Host != "", addr)
	}
	return int32(n.id)
}

func fnNetSend(s *session, st []uint64) int32 {
	d, rc := decodeArgMax(s, st, abi.MaxNetDatagram, abi.DecodeNetData)
	if rc != 0 {
		return rc
	}
	n := s.net.get(d.ID)
	if n == nil {
		return int32(abi.ErrNotFound)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proto == abi.NetUDP {
		if n.dest == nil {
			return int32(abi.ErrState)
		}
		// A datagram leaves at once or not at all; the deadline only guards a stuck stack.
		_ = n.pc.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := n.pc.WriteTo(d.Data, n.dest); err != nil {
			s.p.log.Warn("net_send: udp", "err", err)
			return int32(abi.ErrIO)
		}
		return int32(len(d.Data))
	}
	switch {
	case n.conn == nil:
		return int32(abi.ErrState)
	case n.outBytes+len(d.Data) > abi.MaxNetSendBuf:
		return int32(abi.ErrBusy)
	}
	n.out = append(n.out, append([]byte(nil), d.Data...))
	n.outBytes += len(d.Data)
	signal(n.wake)
	return int32(len(d.Data))
}

func fnNetClose(s *session, st []uint64) int32 {
	n := s.net.get(p32(st, 0))
	if n == nil || !s.net.remove(n) {
		return int32(abi.ErrNotFound)
	}
	n.mu.Lock()
	n.byPlugin = true
	n.mu.Unlock()
	n.cancel()
	return 0
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// closeWith closes c as soon as ctx ends. The function it returns, deferred by the socket's
// goroutine, closes c if that has not happened yet and otherwise waits for the close to
// finish: a session's end waits for those goroutines, so the port is free once it returns
// (a close left running in context.AfterFunc's own goroutine could still hold it).
func closeWith(ctx context.Context, c io.Closer) func() {
	done := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		c.Close()
		close(done)
	})
	return func() {
		if stop() {
			c.Close()
			return
		}
		<-done
	}
}

// runTCP dials, tells the plugin the outcome, then reads until the connection ends.
func (s *session) runTCP(n *netSock, addr string) {
	defer s.net.wg.Done()
	d := net.Dialer{Timeout: abi.NetDialMs * time.Millisecond}
	conn, err := d.DialContext(n.ctx, "tcp", addr)
	if err != nil {
		s.closeNet(n, err)
		return
	}
	n.mu.Lock()
	n.conn = conn
	n.mu.Unlock()
	defer closeWith(n.ctx, conn)()
	if !s.netEvent(n, abi.EvNetState, abi.AppendNetState(nil, abi.NetState{ID: n.id, State: abi.NetOpened}), 0) {
		s.closeNet(n, errInboxFull)
		return
	}
	s.net.wg.Add(1)
	go s.writeTCP(n, conn)
	buf := make([]byte, abi.MaxNetChunk)
	for {
		k, err := conn.Read(buf)
		if k > 0 && !s.netData(n, buf[:k]) {
			return
		}
		if err != nil {
			s.closeNet(n, err)
			return
		}
	}
}

// writeTCP writes what net_send queued, in order. A failed write closes the connection; the
// reader then reports it.
func (s *session) writeTCP(n *netSock, conn net.Conn) {
	defer s.net.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.wake:
		}
		n.mu.Lock()
		out := n.out
		n.out, n.outBytes = nil, 0
		n.mu.Unlock()
		for _, b := range out {
			if _, err := conn.Write(b); err != nil {
				conn.Close()
				return
			}
		}
	}
}

// runUDP resolves the destination (when there is one), tells the plugin the socket is open,
// then reads datagrams until the socket is closed.
func (s *session) runUDP(n *netSock, withDest bool, addr string) {
	defer s.net.wg.Done()
	defer closeWith(n.ctx, n.pc)()
	if withDest {
		var r net.Resolver
		host, port, _ := net.SplitHostPort(addr)
		ips, err := r.LookupNetIP(n.ctx, "ip", host)
		if err != nil || len(ips) == 0 {
			if err == nil {
				err = errors.New("no address for " + host)
			}
			s.closeNet(n, err)
			return
		}
		p, _ := strconv.Atoi(port)
		n.mu.Lock()
		n.dest = net.UDPAddrFromAddrPort(netip.AddrPortFrom(ips[0], uint16(p)))
		n.mu.Unlock()
	}
	if !s.netEvent(n, abi.EvNetState, abi.AppendNetState(nil, abi.NetState{ID: n.id, State: abi.NetOpened}), 0) {
		s.closeNet(n, errInboxFull)
		return
	}
	buf := make([]byte, abi.MaxNetDatagram)
	for {
		k, _, err := n.pc.ReadFrom(buf)
		if err != nil {
			s.closeNet(n, err)
			return
		}
		if !s.netData(n, buf[:k]) {
			return
		}
	}
}

var errInboxFull = errors.New("the plugin is not taking events")

// netData queues received bytes for the plugin once the socket's share of the inbox has
// room: it waits while abi.MaxNetInflight bytes are queued and not yet delivered. It reports
// false when the socket ended meanwhile (or could not queue, which closes it).
func (s *session) netData(n *netSock, b []byte) bool {
	for {
		n.mu.Lock()
		room := n.inflight+len(b) <= abi.MaxNetInflight
		if room {
			n.inflight += len(b)
		}
		n.mu.Unlock()
		if room {
			break
		}
		select {
		case <-n.released:
		case <-n.ctx.Done():
			return false
		}
	}
	if !s.netEvent(n, abi.EvNetData, abi.AppendNetData(nil, abi.NetData{ID: n.id, Data: b}), len(b)) {
		s.closeNet(n, errInboxFull)
		return false
	}
	return true
}

// netEvent queues one event of the socket; size is what it counts against the socket's
// inflight bytes, given back when the plugin's batch has taken the event.
func (s *session) netEvent(n *netSock, kind abi.EventKind, payload []byte, size int) bool {
	release := func() {
		if size == 0 {
			return
		}
		n.mu.Lock()
		n.inflight -= size
		n.mu.Unlock()
		signal(n.released)
	}
	if n.ctx.Err() != nil {
		release()
		return false
	}
	if !s.p.inbox.push(s.gen, queued{kind: kind, payload: payload, done: release}) {
		release()
		return false
	}
	return true
}

// closeNet ends a socket that failed or that the peer closed and tells the plugin why,
// unless the plugin closed it itself or the instance is ending.
func (s *session) closeNet(n *netSock, err error) {
	removed := s.net.remove(n)
	n.mu.Lock()
	byPlugin := n.byPlugin
	n.mu.Unlock()
	n.cancel()
	if byPlugin || !removed {
		return
	}
	reason := err.Error()
	switch {
	case errors.Is(err, io.EOF):
		reason = "closed by the peer"
	case errors.Is(err, syscall.ECONNREFUSED):
		reason = "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		reason = "connection reset by the peer"
	}
	if len(reason) > abi.MaxNetReason {
		reason = strings.ToValidUTF8(reason[:abi.MaxNetReason-3], "")
	}
	st := abi.AppendNetState(nil, abi.NetState{ID: n.id, State: abi.NetClosed, Reason: reason})
	s.p.inbox.push(s.gen, queued{kind: abi.EvNetState, payload: st})
}
