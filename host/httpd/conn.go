package httpd

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"devhost/host/api"
)

// Below the handlers: net/http answers a request it cannot parse (a malformed request line or
// header line, headers over MaxHeaderBytes, an unsupported protocol version, conflicting
// Content-Length headers, an unknown transfer coding) by itself, before any handler runs, in
// plain text written straight to the connection. Every connection the server accepts is
// wrapped in a conn whose Write recognises exactly those answers and sends the spec's JSON
// error body with the same status instead. The head is read by net/http's own bounded reader
// (MaxHeader bytes), so nothing here buffers a request.
//
// The recognised shape is what net/http writes in one call on a parse failure:
//
//	HTTP/1.1 <status line>\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n<text>
//
// An ordinary response can never look like that: net/http writes its header fields sorted
// (Connection before Content-Type) and always with a Date, through its buffered writer.
// TestGoPlainErrorsBecomeJSON pins the shape against the Go release in use.
const (
	plainPrefix  = "HTTP/1.1 "
	plainHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
)

// Codes for statuses only net/http produces; the spec's table has no row for them.
const (
	CodeHTTPVersion    = "http_version_not_supported"
	CodeNotImplemented = "not_implemented"
	CodeTooManyConns   = "too_many_connections"
)

// plainToJSON turns one of net/http's own plain-text answers into the device's JSON answer.
// ok is false for anything else.
func plainToJSON(p []byte, maxHeader int) (out []byte, ok bool) {
	if !bytes.HasPrefix(p, []byte(plainPrefix)) {
		return nil, false
	}
	i := bytes.Index(p, []byte(plainHeaders))
	if i < 0 {
		return nil, false
	}
	line := string(p[len(plainPrefix):i])
	if len(line) < 3 || strings.ContainsAny(line, "\r\n") {
		return nil, false
	}
	status, err := strconv.Atoi(line[:3])
	if err != nil || status < 400 || status > 599 {
		return nil, false
	}
	e := &api.Error{Status: status, Code: api.CodeBadRequest}
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		e.Code = api.CodeHeadersTooLarge
		e.Message = fmt.Sprintf("the request line and headers exceed %d bytes", maxHeader)
	case http.StatusHTTPVersionNotSupported:
		e.Code = CodeHTTPVersion
		e.Message = "only HTTP/1.0 and HTTP/1.1 are served"
	case http.StatusNotImplemented:
		e.Code = CodeNotImplemented
		e.Message = "unsupported Transfer-Encoding; send the body with a Content-Length"
	default:
		// net/http's detail ("malformed Host header", ...) never echoes the request.
		e.Message = "malformed request"
		if _, detail, found := strings.Cut(line, ": "); found {
			e.Message += ": " + detail
		}
	}
	return rawError(e), true
}

// rawError is a complete HTTP/1.1 response carrying e, ending the connection.
func rawError(e *api.Error) []byte {
	body := api.ErrorBody(e)
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		e.Status, http.StatusText(e.Status), len(body), body)
}

// conn is an accepted connection: it rewrites net/http's plain-text answers and carries what
// the connection cap needs.
type conn struct {
	net.Conn
	pool      *connPool
	maxHeader int

	// Guarded by pool.mu.
	state http.ConnState
	since uint64 // pool tick when the conn last became idle (or was accepted)
	gone  bool
}

func (c *conn) Write(p []byte) (int, error) {
	// net/http's own answers are a single short write; responses are not worth scanning.
	if len(p) > maxPlainAnswer {
		return c.Conn.Write(p)
	}
	if out, ok := plainToJSON(p, c.maxHeader); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *conn) Close() error {
	c.pool.forget(c)
	return c.Conn.Close()
}

// connPool caps the connections open at once across every listener the server serves. A
// small device has a handful of sockets; a flood of slow or idle connections must not take
// them (or the memory behind them) from the clients that are talking. When a connection
// arrives at the cap, the one idle longest (accepted but no request yet, or kept alive
// between requests) is closed to make room; when every connection is busy with a request
// the newcomer is answered 503 and closed.
type connPool struct {
	max       int
	maxHeader int

	mu   sync.Mutex
	tick uint64
	live map[*conn]struct{}
}

func newConnPool(max, maxHeader int) *connPool {
	return &connPool{max: max, maxHeader: maxHeader, live: map[*conn]struct{}{}}
}

// admit registers a fresh connection. It returns false (the connection already answered and
// closed) when the pool is full of busy connections.
func (p *connPool) admit(nc net.Conn) (*conn, bool) {
	c := &conn{Conn: nc, pool: p, maxHeader: p.maxHeader, state: http.StateNew}
	p.mu.Lock()
	var victim *conn
	if len(p.live) >= p.max {
		for o := range p.live {
			if o.state != http.StateNew && o.state != http.StateIdle {
				continue
			}
			if victim == nil || o.since < victim.since {
				victim = o
			}
		}
		if victim == nil {
			p.mu.Unlock()
			_ = nc.SetWriteDeadline(deadlineSoon())
			_, _ = nc.Write(rawError(&api.Error{Status: http.StatusServiceUnavailable, Code: CodeTooManyConns,
				Message: fmt.Sprintf("all %d connections are busy; try again", p.max)}))
			_ = nc.Close()
			return nil, false
		}
		victim.gone = true
		delete(p.live, victim)
	}
	p.tick++
	c.since = p.tick
	p.live[c] = struct{}{}
	p.mu.Unlock()
	if victim != nil {
		_ = victim.Conn.Close()
	}
	return c, true
}

// track is the http.Server's ConnState hook.
func (p *connPool) track(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	switch st {
	case http.StateClosed, http.StateHijacked:
		p.forget(c)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c.gone {
		return
	}
	c.state = st
	if st == http.StateIdle {
		p.tick++
		c.since = p.tick
	}
}

func (p *connPool) forget(c *conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.gone = true
	delete(p.live, c)
}

// open is the number of connections counted against the cap.
func (p *connPool) open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.live)
}

// listener wraps every accepted connection of ln.
type listener struct {
	net.Listener
	pool *connPool
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if c, ok := l.pool.admit(nc); ok {
			return c, nil
		}
	}
}

// deadlineSoon bounds the write of a refusal to a client that may not read it.
func deadlineSoon() time.Time { return time.Now().Add(time.Second) }

// maxPlainAnswer is longer than any answer net/http writes itself.
const maxPlainAnswer = 512

// ReadFrom keeps the kernel's file-to-socket copy for response bodies (the UI's files); net/http
// never writes its own answers this way.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// CloseWrite lets net/http half-close after an early answer (431) so the client reads it
// before the connection is reset.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
