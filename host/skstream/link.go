package skstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jonboulle/clockwork"
)

// link is the connection to the server: the target, the dial in progress, the session once
// the hello arrived, and the backoff between attempts. run is its manager goroutine; kick
// wakes it. Guarded by Stream.mu.
type link struct {
	target     *Target
	targetGen  uint64
	netUp      bool
	unauth     bool
	certErr    bool
	sess       *session
	dialing    *attempt
	connected  bool
	round      int
	nextDial   time.Time
	workedOnce bool
	downSince  time.Time
	lastErr    string
	hello      Hello
	kick       chan struct{}
}

// SetTarget points the stream at a server, or at none with nil (the socket closes, buffering
// goes on). It always closes the current socket and dials the new target at once; it also
// lifts the stop after a 401, 403 or certificate error.
func (s *Stream) SetTarget(t *Target) {
	if t != nil {
		c := *t
		t = &c
	}
	s.relink("target changed", func() {
		s.target = t
		s.targetGen++
		s.unauth, s.certErr = false, false
		s.dialNowLocked()
	})
}

// Retry lifts a stop after a 401, 403 or certificate error and ends any backoff wait: the
// current target is dialed at once. A live connection is left alone.
func (s *Stream) Retry() {
	s.relink("", func() {
		s.unauth, s.certErr = false, false
		s.dialNowLocked()
	})
}

// Connected reports whether the stream has consumed the hello of a live connection.
func (s *Stream) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connected
}

// NetworkUp is the device's network-up notification: dial at once.
func (s *Stream) NetworkUp() {
	s.relink("", func() {
		s.netUp = true
		s.dialNowLocked()
	})
}

// NetworkDown is the network-down notification: close the socket, stop dialing, keep buffering.
func (s *Stream) NetworkDown() {
	s.relink("network down", func() { s.netUp = false })
}

// NetworkChanged is the CHANGED edge (route moved or address changed): the socket is bound to
// the old route, so close it and dial again at once.
func (s *Stream) NetworkChanged() {
	s.relink("network changed", func() {
		s.netUp = true
		s.dialNowLocked()
	})
}

// relink is how the link's inputs change: change runs under the lock; when closeWhy is not ""
// the dial in progress and the live socket are ended deliberately (not a failure that backs
// off); then the manager wakes to act on the new state at once.
func (s *Stream) relink(closeWhy string, change func()) {
	s.mu.Lock()
	change()
	var end *session
	if closeWhy != "" {
		end = s.dropLinkLocked()
	}
	s.mu.Unlock()
	if end != nil {
		end.end(deliberate(closeWhy))
	}
	s.kickManager()
	s.noteStatus()
}

// dialNowLocked ends any backoff: the next dial is due at once.
func (s *Stream) dialNowLocked() {
	s.round, s.nextDial = 0, time.Time{}
}

// dropLinkLocked aborts a dial in progress and returns the session to end (outside the lock).
func (s *Stream) dropLinkLocked() *session {
	if s.dialing != nil {
		s.dialing.abort()
	}
	return s.sess
}

type closeReason struct{ msg string }

func (c closeReason) Error() string { return c.msg }

func deliberate(msg string) error { return closeReason{msg} }

func isDeliberate(err error) bool {
	var c closeReason
	return errors.As(err, &c)
}

// backoff is the WiFi curve: 1 s × 2^round capped at max, ±25 % jitter (j in [-1, 1]).
func backoff(round int, maxDelay time.Duration, j float64) time.Duration {
	d := maxDelay
	if round < 31 {
		if b := time.Second << round; b < d {
			d = b
		}
	}
	j = math.Max(-1, math.Min(1, j))
	return d + time.Duration(float64(d)*0.25*j)
}

func (s *Stream) failLocked(err error) {
	s.lastErr = err.Error()
	d := backoff(s.round, time.Duration(s.set.BackoffMaxS)*time.Second, s.jitter())
	s.round++
	s.nextDial = s.clk.Now().Add(d)
	s.log.Warn("signal k stream: attempt failed", "err", err, "retry_in", d.String())
}

func (s *Stream) run() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		state := s.stateLocked()
		wait := s.clk.Until(s.nextDial)
		s.mu.Unlock()
		switch state {
		case StateConnecting:
			s.connect()
			continue
		case StateBackoff:
			t := s.clk.NewTimer(wait)
			select {
			case <-s.ctx.Done():
				t.Stop()
				return
			case <-s.kick:
			case <-t.Chan():
			}
			t.Stop()
		default:
			select {
			case <-s.ctx.Done():
				return
			case <-s.kick:
			}
		}
	}
}

// attempt is one dial in progress; abort closes its socket so the handshake ends at once.
type attempt struct {
	mu      sync.Mutex
	cancel  context.CancelFunc
	conn    net.Conn
	aborted bool
}

func (a *attempt) abort() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.aborted = true
	a.cancel()
	if a.conn != nil {
		a.conn.Close()
	}
}

func (a *attempt) track(c net.Conn, err error) (net.Conn, error) {
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.aborted {
		c.Close()
		return nil, errors.New("dial aborted")
	}
	a.conn = c
	return c, nil
}

func (a *attempt) connection() net.Conn {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conn
}

func (a *attempt) wasAborted() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.aborted
}

// streamURL turns the target's server URL into the stream address.
func streamURL(target string, sendMeta bool) (u string, tls bool, err error) {
	p, err := url.Parse(target)
	if err != nil {
		return "", false, fmt.Errorf("target URL: %w", err)
	}
	port := "80"
	switch p.Scheme {
	case "ws", "http":
		p.Scheme = "ws"
	case "wss", "https":
		p.Scheme, port, tls = "wss", "443", true
	default:
		return "", false, fmt.Errorf("target URL %q: scheme must be ws or wss", target)
	}
	if p.Hostname() == "" {
		return "", false, fmt.Errorf("target URL %q has no host", target)
	}
	if p.Port() != "" {
		port = p.Port()
	}
	out := url.URL{Scheme: p.Scheme, Host: net.JoinHostPort(p.Hostname(), port),
		Path: "/signalk/v1/stream", RawQuery: "subscribe=none"}
	if sendMeta {
		out.RawQuery += "&sendMeta=all"
	}
	return out.String(), tls, nil
}

// connect dials once, waits for the hello, then serves the connection until it ends.
func (s *Stream) connect() {
	dctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	a := &attempt{cancel: cancel}
	s.mu.Lock()
	if s.target == nil {
		s.mu.Unlock()
		return
	}
	t, gen := *s.target, s.targetGen
	withMeta := len(s.subs) > 0
	u, isTLS, err := streamURL(t.URL, withMeta)
	if err != nil {
		s.failLocked(err)
		s.mu.Unlock()
		s.noteStatus()
		return
	}
	s.dialing = a
	s.mu.Unlock()
	s.noteStatus()

	d := &websocket.Dialer{
		HandshakeTimeout: s.opts.HandshakeTimeout,
		TLSClientConfig:  t.TLSConfig,
		ReadBufferSize:   4096,
		// A delta message (at most MaxMessageBytes) fits the write buffer whole, so it goes
		// out as one frame in one write call instead of four 4 KiB fragments: fewer system
		// calls here and fewer fragments for the server to join.
		WriteBufferSize: MaxMessageBytes,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var nd net.Dialer
			return a.track(nd.DialContext(ctx, network, addr))
		},
	}
	if t.DialTLS != nil {
		d.NetDialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return a.track(t.DialTLS(ctx, network, addr))
		}
	}
	hdr := http.Header{}
	if t.Token != "" {
		hdr.Set("Authorization", "Bearer "+t.Token)
	}
	ws, resp, err := d.DialContext(dctx, u, hdr)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if resp != nil && t.Proven != nil {
		if c := a.connection(); c != nil {
			t.Proven(c)
		}
	}

	s.mu.Lock()
	s.dialing = nil
	if err == nil && (a.wasAborted() || gen != s.targetGen || s.closed) {
		err = deliberate("dial superseded")
		ws.Close()
	}
	if err != nil {
		var unauth *Unauthorized
		var certErr error
		switch {
		case a.wasAborted() || isDeliberate(err) || s.closed:
			// A deliberate stop already set what happens next.
		case resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden):
			s.unauth = true
			s.lastErr = fmt.Sprintf("upgrade refused: %d", resp.StatusCode)
			unauth = &Unauthorized{StatusCode: resp.StatusCode, TLS: isTLS, URL: t.URL}
			s.log.Warn("signal k stream: unauthorized", "status", resp.StatusCode)
		case s.opts.IsCertError != nil && s.opts.IsCertError(err):
			s.certErr = true
			s.lastErr = err.Error()
			certErr = err
			s.log.Warn("signal k stream: certificate refused", "err", err)
		case resp != nil:
			s.failLocked(fmt.Errorf("upgrade answered %d: %w", resp.StatusCode, err))
		default:
			s.failLocked(fmt.Errorf("dial: %w", err))
		}
		s.mu.Unlock()
		if unauth != nil && s.opts.OnUnauthorized != nil {
			s.opts.OnUnauthorized(*unauth)
		}
		if certErr != nil && s.opts.OnCertError != nil {
			s.opts.OnCertError(certErr)
		}
		s.noteStatus()
		return
	}
	// No read limit: the read loop streams every frame and keeps at most MaxFrameBytes+1 of
	// it, so a frame of any size costs no more memory than that and is dropped without ending
	// the connection.
	sess := newSession(s.ctx, ws)
	s.sess = sess
	s.mu.Unlock()
	s.serve(sess)
}

type session struct {
	ws     *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once
	ended  chan struct{}
	reason error
	wake   chan struct{}
	helloC chan Hello
	wg     sync.WaitGroup
}

func newSession(parent context.Context, ws *websocket.Conn) *session {
	ctx, cancel := context.WithCancel(parent)
	return &session{ws: ws, ctx: ctx, cancel: cancel, ended: make(chan struct{}),
		wake: make(chan struct{}, 1), helloC: make(chan Hello, 1)}
}

func (ss *session) end(reason error) {
	ss.once.Do(func() {
		ss.reason = reason
		close(ss.ended)
	})
}

func (s *Stream) serve(sess *session) {
	sess.wg.Add(1)
	go s.readLoop(sess)

	helloT := s.clk.NewTimer(s.opts.HelloTimeout)
	select {
	case h := <-sess.helloC:
		helloT.Stop()
		s.onHello(sess, h)
	case <-helloT.Chan():
		sess.end(fmt.Errorf("no hello within %s", s.opts.HelloTimeout))
	case <-sess.ended:
		helloT.Stop()
	case <-s.ctx.Done():
		helloT.Stop()
		sess.end(deliberate("stream closed"))
	}
	select {
	case <-sess.ended:
	case <-s.ctx.Done():
		sess.end(deliberate("stream closed"))
	}
	if isDeliberate(sess.reason) {
		_ = sess.ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	}
	sess.ws.Close()
	sess.cancel()
	sess.wg.Wait()
	s.onSessionEnd(sess)
}

func (s *Stream) onHello(sess *session, h Hello) {
	s.mu.Lock()
	if s.sess != sess || s.closed {
		s.mu.Unlock()
		return
	}
	s.connected = true
	if s.workedOnce {
		s.reconnects++
	}
	s.workedOnce = true
	s.downSince = time.Time{}
	s.round = 0
	s.lastErr = ""
	s.hello = h
	s.draining = s.ring.delta.len() > 0
	s.nextDrain = s.clk.Now()
	s.sentCover = nil
	s.syncSubsLocked()
	for _, m := range s.metas {
		m.reconciled = false
	}
	s.metaReconciled = 0
	s.broadcastLocked()
	sess.wg.Add(1)
	go s.writeLoop(sess)
	if s.opts.HTTP != nil {
		sess.wg.Add(1)
		go s.metaLoop(sess)
	}
	s.mu.Unlock()
	s.log.Info("signal k stream: connected", "server", h.Name, "version", h.Version, "self", h.Self)
	if s.opts.OnHello != nil {
		s.opts.OnHello(h)
	}
	s.noteStatus()
	s.publishCurrent("")
}

func (s *Stream) onSessionEnd(sess *session) {
	s.mu.Lock()
	if s.sess != sess {
		s.mu.Unlock()
		return
	}
	wasConnected := s.connected
	s.sess = nil
	s.connected = false
	s.ctrl = nil
	s.writing = false
	s.draining = false
	s.sentCover = nil
	s.failPutsLocked("stream closed")
	if wasConnected {
		s.downSince = s.clk.Now()
	}
	if !isDeliberate(sess.reason) && !s.closed {
		s.failLocked(sess.reason)
	}
	s.trimLocked()
	s.broadcastLocked()
	s.mu.Unlock()
	if wasConnected {
		s.log.Info("signal k stream: disconnected", "reason", sess.reason)
	}
	s.noteStatus()
}

func (s *Stream) readLoop(sess *session) {
	defer sess.wg.Done()
	// One buffer for the connection's life: the parsed frame never outlives the next read.
	buf := make([]byte, MaxFrameBytes+1)
	first := true
	for {
		typ, r, err := sess.ws.NextReader()
		if err != nil {
			sess.end(fmt.Errorf("read: %w", err))
			return
		}
		data, size, err := readFrame(r, buf)
		if err != nil {
			sess.end(fmt.Errorf("read: %w", err))
			return
		}
		over := size > MaxFrameBytes
		if first {
			first = false
			var f Frame
			if typ == websocket.TextMessage && !over {
				f, err = ParseFrame(data)
			}
			if typ != websocket.TextMessage || over || err != nil || f.Kind != FrameHello {
				sess.end(fmt.Errorf("malformed hello (%d bytes)", size))
				return
			}
			sess.helloC <- f.Hello
			continue
		}
		s.handleFrame(sess, typ, data, size)
	}
}

// readFrame reads one frame into buf (MaxFrameBytes+1 long) and returns what it holds and the
// frame's full size. The part of a larger frame that does not fit is read and thrown away, so
// an oversized frame occupies no more memory than buf however long it is.
func readFrame(r io.Reader, buf []byte) (data []byte, size int64, err error) {
	n, err := io.ReadFull(r, buf)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return buf[:n], int64(n), nil
	case err != nil:
		return nil, int64(n), fmt.Errorf("frame body: %w", err)
	}
	rest, err := io.Copy(io.Discard, r)
	if err != nil {
		return nil, int64(n) + rest, fmt.Errorf("oversized frame body: %w", err)
	}
	return buf[:n], int64(n) + rest, nil
}

func (s *Stream) handleFrame(sess *session, typ int, data []byte, size int64) {
	s.mu.Lock()
	s.in.Frames++
	switch {
	case size > MaxFrameBytes:
		s.in.Oversize++
		s.mu.Unlock()
		s.log.Warn("signal k stream: inbound frame over 16 KiB dropped", "bytes", size)
		return
	case typ != websocket.TextMessage:
		s.in.Bad++
		s.mu.Unlock()
		s.log.Warn("signal k stream: binary frame dropped")
		return
	}
	s.mu.Unlock()
	if len(data) > 0 && data[0] == '"' && json.Valid(data) {
		// signalk-server answers a request it dislikes with a bare JSON string.
		s.log.Warn("signal k stream: server notice", "text", string(data[:min(len(data), 200)]))
		return
	}
	f, err := ParseFrame(data)
	if err != nil {
		s.mu.Lock()
		s.in.Bad++
		s.mu.Unlock()
		s.log.Warn("signal k stream: bad frame dropped", "err", err, "head", string(data[:min(len(data), 64)]))
		return
	}
	switch f.Kind {
	case FrameDelta:
		s.dispatch(f)
	case FramePutAnswer:
		s.onPutAnswer(f)
	case FramePutRequest:
		s.onPutRequest(f)
	}
}

// writeLoop sends control frames, then raw frames, then deltas (paced while draining a backlog).
func (s *Stream) writeLoop(sess *session) {
	defer sess.wg.Done()
	const (
		kCtrl = iota
		kRaw
		kDelta
	)
	for {
		s.mu.Lock()
		if s.sess != sess || !s.connected {
			s.mu.Unlock()
			return
		}
		var (
			frame []byte
			m     message
			kind  int
			wait  time.Duration
		)
		now := s.clk.Now()
		switch {
		case len(s.ctrl) > 0:
			frame, kind = s.ctrl[0], kCtrl
			s.ctrl[0] = nil
			s.ctrl = s.ctrl[1:]
		case s.ring.raw.len() > 0:
			m, kind = s.ring.take(true), kRaw
			frame = m.b
		case s.ring.delta.len() > 0:
			if s.draining && now.Before(s.nextDrain) {
				wait = s.nextDrain.Sub(now)
				break
			}
			m, kind = s.ring.take(false), kDelta
			frame = m.b
		}
		if frame == nil {
			s.mu.Unlock()
			var tc <-chan time.Time
			var t clockwork.Timer
			if wait > 0 {
				t = s.clk.NewTimer(wait)
				tc = t.Chan()
			}
			var ended bool
			select {
			case <-sess.wake:
			case <-tc:
			case <-sess.ended:
				ended = true
			}
			if t != nil {
				t.Stop()
			}
			if ended {
				return
			}
			continue
		}
		s.writing = true
		s.mu.Unlock()

		_ = sess.ws.SetWriteDeadline(time.Now().Add(s.opts.WriteTimeout))
		err := sess.ws.WriteMessage(websocket.TextMessage, frame)

		s.mu.Lock()
		s.writing = false
		if err != nil {
			if kind != kCtrl {
				s.ring.putBack(kind == kRaw, m)
			}
			s.broadcastLocked()
			s.mu.Unlock()
			sess.end(fmt.Errorf("write: %w", err))
			return
		}
		if kind != kCtrl {
			s.sent++
		}
		if kind == kDelta {
			// WriteMessage has copied the frame into the connection's own buffer.
			s.recycleLocked(frame)
		}
		if kind == kDelta && s.draining {
			s.nextDrain = s.clk.Now().Add(time.Second / time.Duration(s.set.DrainPerS))
			if s.ring.delta.len() == 0 {
				s.draining = false
			}
		}
		s.broadcastLocked()
		s.mu.Unlock()
	}
}
