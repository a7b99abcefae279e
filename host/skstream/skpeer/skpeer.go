// Package skpeer is a scripted Signal K server for tests: it accepts the device's WebSocket on
// /signalk/v1/stream, sends a hello, queues every frame the device writes, and lets the test
// send frames and wait for what the device should write (a frame, a delta value, a PUT
// answer), or for nothing at all.
//
// A Server either listens on its own loopback port (Start) or is mounted by a test that already
// scripts the REST side of a server (New, then ServeHTTP on the stream route).
package skpeer

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// StreamPath is where a Signal K server serves the delta stream.
const StreamPath = "/signalk/v1/stream"

// Hello is the hello signalk-server 2.32 sends when a stream opens.
const Hello = `{"name":"signalk-server","version":"2.32.0","self":"vessels.urn:mrn:signalk:uuid:00000000-0000-4000-8000-000000000001","roles":["master","main"],"timestamp":"2024-01-01T00:00:00.000Z"}`

const (
	// wait bounds every hand-off from the device; nothing here waits for a spec timer.
	wait = 5 * time.Second
	// quiet is how long "nothing arrives" is watched: long enough for a wrongly sent frame or
	// dial to show up on loopback, short enough to use often.
	quiet = 50 * time.Millisecond
	// Queues are deep so a device that floods the server never blocks on a test that reads
	// late.
	frameQueue = 4096
	connQueue  = 16
)

// Options shape a Server from Start.
type Options struct {
	// TLS serves https/wss with httptest's self-signed certificate (see ClientTLS).
	TLS bool
	// Before sees every request first, whatever its path; when it returns true it has answered
	// the request itself (a refusal, a page that is not a stream) and nothing else happens.
	Before func(w http.ResponseWriter, r *http.Request) bool
}

// Server is the server side of the device's stream connections. URL, Addr, HostPort, ClientTLS
// and Close need the listener of a Server from Start.
type Server struct {
	srv   *httptest.Server // nil when the test mounts the Server itself
	up    websocket.Upgrader
	conns chan *Conn

	mu    sync.Mutex
	hello func(ws *websocket.Conn)
	stall bool
	open  []*Conn
	done  chan struct{} // closed at cleanup: every reader and pending hand-off ends
	wg    sync.WaitGroup
}

// New returns a Server without a listener; the test routes the stream request to ServeHTTP.
// Connections still open when tb ends are closed, and their readers waited for.
func New(tb testing.TB) *Server {
	s := newServer()
	tb.Cleanup(s.shutdown)
	return s
}

func newServer() *Server {
	return &Server{conns: make(chan *Conn, connQueue), done: make(chan struct{})}
}

// Start returns a Server listening on loopback: the stream path upgrades, every other path is
// 404, after o.Before has had its say.
func Start(tb testing.TB, o Options) *Server {
	tb.Helper()
	s := newServer()
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.Before != nil && o.Before(w, r) {
			return
		}
		if r.URL.Path != StreamPath {
			http.NotFound(w, r)
			return
		}
		s.ServeHTTP(w, r)
	}))
	if o.TLS {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	tb.Cleanup(s.srv.Close)
	// Runs before the listener's Close, which waits for handlers that shutdown releases.
	tb.Cleanup(s.shutdown)
	return s
}

// SetHello replaces what later connections are sent right after the upgrade (nil: Hello), to
// script a bad, late or missing hello.
func (s *Server) SetHello(fn func(ws *websocket.Conn)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hello = fn
}

// SetStall makes later connections never read after the hello, so the device's socket fills.
func (s *Server) SetStall(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stall = on
}

// ServeHTTP upgrades r, sends the hello and hands the connection to Accept.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	hello, stall := s.hello, s.stall
	s.mu.Unlock()
	ws, err := s.up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered the device already
	}
	c := &Conn{WS: ws, Req: r, frames: make(chan []byte, frameQueue), closed: make(chan struct{})}
	if !s.track(c) {
		_ = ws.Close()
		return
	}
	if hello != nil {
		hello(ws)
	} else {
		_ = ws.WriteMessage(websocket.TextMessage, []byte(Hello))
	}
	go s.read(c, stall)
	select {
	case s.conns <- c:
	case <-s.done:
	}
}

// track registers c for shutdown; false once the test has ended.
func (s *Server) track(c *Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.done:
		return false
	default:
	}
	s.open = append(s.open, c)
	s.wg.Add(1)
	return true
}

// read queues what the device writes until the socket fails or the test ends.
func (s *Server) read(c *Conn, stall bool) {
	defer s.wg.Done()
	defer close(c.closed)
	if stall {
		select {
		case <-c.Req.Context().Done():
		case <-s.done:
		}
		return
	}
	for {
		_, b, err := c.WS.ReadMessage()
		if err != nil {
			return
		}
		select {
		case c.frames <- b:
		case <-s.done:
			return
		}
	}
}

func (s *Server) shutdown() {
	s.mu.Lock()
	close(s.done)
	open := s.open
	s.mu.Unlock()
	for _, c := range open {
		_ = c.WS.Close()
	}
	s.wg.Wait()
}

// URL is the server's base URL for a stream target (ws://, or wss:// with TLS).
func (s *Server) URL() string {
	if s.srv.TLS != nil {
		return "wss://" + s.Addr()
	}
	return "ws://" + s.Addr()
}

// Addr is the listener's host:port.
func (s *Server) Addr() string { return s.srv.Listener.Addr().String() }

// HostPort is the listener's address as sk.server_host and sk.server_port take it.
func (s *Server) HostPort() (string, int) {
	if a, ok := s.srv.Listener.Addr().(*net.TCPAddr); ok {
		return a.IP.String(), a.Port
	}
	return "", 0
}

// ClientTLS is a client configuration that trusts the server's certificate (TLS only).
func (s *Server) ClientTLS() *tls.Config {
	if t, ok := s.srv.Client().Transport.(*http.Transport); ok {
		return t.TLSClientConfig
	}
	return nil
}

// Close stops listening, so later dials are refused.
func (s *Server) Close() { s.srv.Close() }

// Accept waits for the device's next stream connection; it is closed when tb ends.
func (s *Server) Accept(tb testing.TB) *Conn {
	tb.Helper()
	c := within(tb, s.conns, "the device opened no stream connection")
	tb.Cleanup(func() { _ = c.WS.Close() })
	return c
}

// ExpectNoConn fails when the device opens a stream connection in the next moment.
func (s *Server) ExpectNoConn(tb testing.TB) {
	tb.Helper()
	if c, ok := quietFor(s.conns); !ok {
		tb.Fatalf("skpeer: unexpected stream connection %s", c.Req.URL)
	}
}

// Conn is one stream connection as the server sees it.
type Conn struct {
	WS  *websocket.Conn // to close it, write raw or binary frames, or reach the TCP connection
	Req *http.Request   // the upgrade request

	frames chan []byte
	closed chan struct{}
	wmu    sync.Mutex
}

// Frames delivers the device's frames in order, for a test that reads while doing more.
func (c *Conn) Frames() <-chan []byte { return c.frames }

// Closed is closed once the connection stops being read: the socket failed or was closed (a
// stalled connection is never read, so its channel closes as soon as it is handed over).
func (c *Conn) Closed() <-chan struct{} { return c.closed }

// Send writes one text frame to the device.
func (c *Conn) Send(tb testing.TB, frame string) {
	tb.Helper()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.WS.WriteMessage(websocket.TextMessage, []byte(frame)); err != nil {
		tb.Fatalf("skpeer: send %.80q: %v", frame, err)
	}
}

// SendPut sends the server's PUT request id setting path to value (JSON), as a server relays
// it from a client.
func (c *Conn) SendPut(tb testing.TB, id, path, value string) {
	tb.Helper()
	c.Send(tb, `{"requestId":"`+id+`","context":"vessels.self","put":[{"path":"`+path+`","value":`+value+`}]}`)
}

// Next waits for the device's next frame.
func (c *Conn) Next(tb testing.TB) []byte {
	tb.Helper()
	return within(tb, c.frames, "the device sent no frame")
}

// ExpectNone fails when the device sends a frame in the next moment.
func (c *Conn) ExpectNone(tb testing.TB) {
	tb.Helper()
	if b, ok := quietFor(c.frames); !ok {
		tb.Fatalf("skpeer: unexpected frame %s", b)
	}
}

// WaitClosed waits for the connection to end.
func (c *Conn) WaitClosed(tb testing.TB) {
	tb.Helper()
	within(tb, c.closed, "the device did not close the stream")
}

// within receives from ch, failing tb with "<failure> within <wait>" when nothing comes.
func within[T any](tb testing.TB, ch <-chan T, failure string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(wait):
	}
	tb.Fatalf("skpeer: %s within %v", failure, wait)
	var zero T
	return zero
}

// quietFor reports whether ch stays quiet for the next moment, and what it delivered if not.
func quietFor[T any](ch <-chan T) (got T, ok bool) {
	select {
	case got = <-ch:
		return got, false
	case <-time.After(quiet):
		return got, true
	}
}

// Await skips frames until one matches and returns it; what names it in the failure.
func (c *Conn) Await(tb testing.TB, what string, match func(frame []byte) bool) []byte {
	tb.Helper()
	deadline := time.After(wait)
	for {
		select {
		case b := <-c.frames:
			if match(b) {
				return b
			}
		case <-deadline:
			tb.Fatalf("skpeer: no frame with %s within %v", what, wait)
			return nil
		}
	}
}

// Delta is a delta frame of the device as the server reads it.
type Delta struct {
	Context string `json:"context"`
	Updates []struct {
		Timestamp *string `json:"timestamp"`
		Source    struct {
			Label string `json:"label"`
		} `json:"source"`
		Values []struct {
			Path  string          `json:"path"`
			Value json.RawMessage `json:"value"`
		} `json:"values"`
	} `json:"updates"`
}

// AwaitValue waits for a delta carrying path with the value want, compared as JSON text.
func (c *Conn) AwaitValue(tb testing.TB, path, want string) {
	tb.Helper()
	c.Await(tb, path+" = "+want, func(b []byte) bool {
		var d Delta
		if json.Unmarshal(b, &d) != nil {
			return false
		}
		for _, u := range d.Updates {
			for _, v := range u.Values {
				if v.Path == path && string(v.Value) == want {
					return true
				}
			}
		}
		return false
	})
}

// Answer is the device's answer to a PUT request.
type Answer struct {
	RequestID  string `json:"requestId"`
	State      string `json:"state"`
	StatusCode int    `json:"statusCode"`
	Message    string `json:"message"`
}

// AwaitAnswer waits for the device's next answer to the PUT request id.
func (c *Conn) AwaitAnswer(tb testing.TB, id string) Answer {
	tb.Helper()
	var a Answer
	c.Await(tb, fmt.Sprintf("the answer to %q", id), func(b []byte) bool {
		var got Answer
		if json.Unmarshal(b, &got) != nil || got.RequestID != id {
			return false
		}
		a = got
		return true
	})
	return a
}
