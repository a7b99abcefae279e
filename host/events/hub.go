// Package events owns the device's Server-Sent-Events hub: GET /events, the fan-out of every
// component's events to at most three streams, the on-connect snapshots, and the keep-alive
// pings.
//
// A stream starts with `retry: 3000`, then the snapshot events of every registered connect
// callback in registration order (each callback's events in the order it returns them), then
// live events as `event: <name>` and `data: <json>` lines, with a `: ping` comment every 15 s.
//
// Choices where the spec is silent:
//   - A new stream is registered before its snapshots are taken, so an event published while
//     a client connects is never lost: it follows the snapshots (at worst repeating their
//     state).
//   - Publish never waits for a client. Each stream has a buffer of 64 events; a stream whose
//     buffer is full when an event arrives is closed (its response ends) and counted in
//     Stats().Slow. The client reconnects after its retry delay and gets fresh snapshots, so
//     it never silently misses a change. A client stuck in a write is cut off at once.
//   - When a fourth stream connects the oldest one ends (a clean end of the chunked body) and
//     is counted in Stats().Evicted.
//   - Event data is marshalled once per Publish; data that cannot be marshalled and names that
//     are empty or contain a line break are dropped and logged.
//   - After Close every stream has ended and GET /events answers 503 `restarting`.
package events

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/api"
)

// Defaults of the spec's Limits table.
const (
	DefaultMaxStreams          = 3 // HTTPD_SSE_MAX_CLIENTS
	DefaultMaxConnectCallbacks = 8 // HTTPD_SSE_MAX_CONNECT_CBS
	DefaultPing                = 15 * time.Second
	DefaultBuffer              = 64
	// RetryMillis is the reconnect delay sent at the start of every stream.
	RetryMillis = 3000
)

var (
	retryFrame = []byte(fmt.Sprintf("retry: %d\n\n", RetryMillis))
	pingFrame  = []byte(": ping\n\n")
)

// errClosed is returned to a client connecting after Close.
var errClosed = errors.New("event hub closed")

// Options configure a Hub. Zero values take the spec's defaults.
type Options struct {
	Clock               clockwork.Clock
	MaxStreams          int
	MaxConnectCallbacks int
	Ping                time.Duration
	// Buffer is how many events a stream may have waiting before it is closed as slow.
	Buffer int
	Logger *slog.Logger
}

// Event is one named event; Data is marshalled to JSON.
type Event struct {
	Name string
	Data any
}

// Stats count the streams.
type Stats struct {
	Streams int    // open now
	Evicted uint64 // ended because a newer stream needed the slot
	Slow    uint64 // ended because their buffer was full
}

// Hub fans events out to the open streams. It starts no goroutines of its own: each stream
// runs in the HTTP server's goroutine for its request.
type Hub struct {
	clock      clockwork.Clock
	maxStreams int
	maxCBs     int
	ping       time.Duration
	buffer     int
	log        *slog.Logger

	mu        sync.Mutex
	streams   []*stream // oldest first
	callbacks []func() []Event
	closed    bool
	nextID    uint64
	evicted   uint64
	slow      uint64
}

// New builds a hub.
func New(opts Options) *Hub {
	opts.Clock = cmp.Or(opts.Clock, clockwork.NewRealClock())
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.MaxConnectCallbacks <= 0 {
		opts.MaxConnectCallbacks = DefaultMaxConnectCallbacks
	}
	if opts.Ping <= 0 {
		opts.Ping = DefaultPing
	}
	if opts.Buffer <= 0 {
		opts.Buffer = DefaultBuffer
	}
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	return &Hub{
		clock:      opts.Clock,
		maxStreams: opts.MaxStreams,
		maxCBs:     opts.MaxConnectCallbacks,
		ping:       opts.Ping,
		buffer:     opts.Buffer,
		log:        opts.Logger,
	}
}

// OnConnect registers a snapshot callback called for every new stream; it must be safe to
// call from any goroutine and must not block. Beyond the cap the registration is refused
// (false) and the callback is never called.
func (h *Hub) OnConnect(cb func() []Event) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cb == nil || len(h.callbacks) >= h.maxCBs {
		return false
	}
	h.callbacks = append(h.callbacks, cb)
	return true
}

// checkName refuses an event name a stream cannot carry.
func checkName(name string) error {
	if name == "" || strings.ContainsAny(name, "\r\n") {
		return fmt.Errorf("event name %q: empty or has a line break", name)
	}
	return nil
}

// frame encodes one event. json.Marshal output has no raw line breaks, so the data fits one
// `data:` line.
func frame(name string, data any) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	js, err := json.Marshal(data)
	if err != nil {
		return nil, fmt.Errorf("event %q: marshal data: %w", name, err)
	}
	b := make([]byte, 0, len("event: \ndata: \n\n")+len(name)+len(js))
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, js...)
	return append(b, "\n\n"...), nil
}

// Publish sends an event to every open stream without waiting for any of them. With no
// stream open the data is not even marshalled (plugins publish status snapshots every second
// whether or not anyone listens); a bad name is logged either way.
func (h *Hub) Publish(name string, data any) {
	if err := checkName(name); err != nil {
		h.log.Warn("event dropped", "err", err)
		return
	}
	h.mu.Lock()
	idle := len(h.streams) == 0
	h.mu.Unlock()
	if idle {
		return
	}
	f, err := frame(name, data)
	if err != nil {
		h.log.Warn("event dropped", "err", err)
		return
	}
	h.mu.Lock()
	kept := h.streams[:0]
	var slow []*stream
	for _, s := range h.streams {
		select {
		case s.ch <- f:
			kept = append(kept, s)
		default:
			slow = append(slow, s)
		}
	}
	for i := len(kept); i < len(h.streams); i++ {
		h.streams[i] = nil
	}
	h.streams = kept
	h.slow += uint64(len(slow))
	for _, s := range slow {
		s.end()
	}
	h.mu.Unlock()
	for _, s := range slow {
		h.log.Warn("event stream closed: client too slow", "stream", s.id, "event", name)
	}
}

// Stats answers the stream counters.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Stats{Streams: len(h.streams), Evicted: h.evicted, Slow: h.slow}
}

// Close ends every stream and refuses new ones. It does not wait for the handlers to return;
// each returns as soon as its goroutine runs.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	streams := h.streams
	h.streams = nil
	for _, s := range streams {
		s.end()
	}
	h.mu.Unlock()
}

// attach registers a new stream, evicting the oldest when all slots are taken, and answers
// the callbacks to snapshot.
func (h *Hub) attach(deadline func(time.Time)) (*stream, []func() []Event, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, errClosed
	}
	h.nextID++
	s := &stream{id: h.nextID, ch: make(chan []byte, h.buffer), done: make(chan struct{}), deadline: deadline}
	for len(h.streams) >= h.maxStreams {
		old := h.streams[0]
		h.streams[0] = nil
		h.streams = h.streams[1:]
		old.end()
		h.evicted++
		h.log.Info("event stream evicted by a newer one", "stream", old.id)
	}
	h.streams = append(h.streams, s)
	return s, h.callbacks[:len(h.callbacks):len(h.callbacks)], nil
}

// detach removes s if it is still registered.
func (h *Hub) detach(s *stream) {
	h.mu.Lock()
	h.streams = slices.DeleteFunc(h.streams, func(o *stream) bool { return o == s })
	s.end()
	h.mu.Unlock()
}

// stream is one connected client. Lock order: Hub.mu before stream.mu.
type stream struct {
	id   uint64
	ch   chan []byte
	done chan struct{}
	// deadline sets the connection's write deadline; nil in tests without a connection.
	deadline func(time.Time)

	mu      sync.Mutex
	ended   bool
	writing bool
	aborted bool // the write deadline was moved to the past
}

// end closes done. A write in progress may be blocked on a client that stopped reading, so
// its deadline moves to the past and the write fails at once.
func (s *stream) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	close(s.done)
	if s.writing && s.deadline != nil {
		s.deadline(pastDeadline)
		s.aborted = true
	}
}

// beginWrite answers false once the stream has ended; otherwise the caller writes and then
// calls endWrite.
func (s *stream) beginWrite() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.writing = true
	return true
}

// endWrite ends a write. When the write had already gone through as end cut it off, the
// deadline is cleared again so the response still ends cleanly; end never aborts twice.
func (s *stream) endWrite(ok bool) {
	s.mu.Lock()
	s.writing = false
	if ok && s.aborted {
		s.deadline(time.Time{})
		s.aborted = false
	}
	s.mu.Unlock()
}

// Routes answers GET /events (protected, a stream route).
func (h *Hub) Routes() []api.Route {
	return []api.Route{{Method: http.MethodGet, Path: "/events", Handler: h.serve, Stream: true}}
}

// pastDeadline is any instant in the past; as a write deadline it fails pending writes.
var pastDeadline = time.Unix(1, 0)

func (h *Hub) serve(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	s, callbacks, err := h.attach(func(t time.Time) { _ = rc.SetWriteDeadline(t) })
	if err != nil {
		api.WriteErr(w, api.Errorf(http.StatusServiceUnavailable, api.CodeRestarting, "event hub is shutting down"))
		return
	}
	defer h.detach(s)

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)

	write := func(b []byte) bool {
		if !s.beginWrite() {
			return false
		}
		_, err := w.Write(b)
		if err == nil {
			err = rc.Flush()
		}
		s.endWrite(err == nil)
		return err == nil
	}

	b := append([]byte(nil), retryFrame...)
	for _, cb := range callbacks {
		for _, ev := range cb() {
			f, err := frame(ev.Name, ev.Data)
			if err != nil {
				h.log.Warn("snapshot event dropped", "err", err)
				continue
			}
			b = append(b, f...)
		}
	}
	if !write(b) {
		return
	}

	ticker := h.clock.NewTicker(h.ping)
	defer ticker.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		case <-ticker.Chan():
			if !write(pingFrame) {
				return
			}
		case f := <-s.ch:
			// Send whatever else is already waiting in the same chunk.
			b = append(b[:0], f...)
		more:
			for {
				select {
				case f := <-s.ch:
					b = append(b, f...)
				default:
					break more
				}
			}
			if !write(b) {
				return
			}
		}
	}
}
