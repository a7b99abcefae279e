// Package httpd is the device's HTTP server: one httprouter for the core API under /api/v1, a
// dynamic table for application endpoints, the static UI for everything else, and the single
// middleware chain every API request passes in this order: size and time limits, authentication
// (before any handler and before the body is read), the pending-restart refusal, the JSON
// content-type check. Every error it produces is the spec's JSON `{error}` body.
//
// Limits chosen where the spec is silent: the request line and headers are capped at 8 KiB (431
// `headers_too_large`), a body must arrive within 5 s of the request (408 `timeout`), a
// state-changing request that takes a body must say how long it is (411 `length_required` for
// chunked uploads and for a request with neither length nor body), and at most 32 connections
// are open at once (conn.go). Answers net/http writes itself are JSON too (conn.go).
package httpd

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"devhost/host/api"
	"devhost/host/foreground"
)

// Prefix is the API's versioned path prefix.
const Prefix = "/api/v1"

// Defaults of the limits in Options.
const (
	DefaultMaxBody     = 16 << 10 // HTTPD_MAX_BODY
	DefaultMaxHeader   = 8 << 10
	DefaultBodyTimeout = 5 * time.Second
	DefaultWriteTimout = 30 * time.Second
	DefaultMaxConns    = 32
)

// Authenticator is the central credential check (package auth implements it). Check returns an
// error for a refused request; WriteError answers it with the headers that belong to it
// (WWW-Authenticate on a 401, Retry-After on a 429).
type Authenticator interface {
	Check(r *http.Request) error
	WriteError(w http.ResponseWriter, err error)
}

// Scoper is implemented by an Authenticator whose credentials can be revoked while a request
// runs (a key change, a dropped session). Stream routes run under the context Scope returns,
// so an open stream ends with the credential that opened it.
type Scoper interface {
	Scope(ctx context.Context, r *http.Request) (context.Context, context.CancelFunc)
}

// Options configures a Server. Zero values take the defaults above.
type Options struct {
	Logger      *slog.Logger
	Auth        Authenticator // nil: every request is allowed
	UI          http.Handler  // serves every path outside /api/; nil answers 404 not_found
	MaxBody     int64
	MaxHeader   int // the request line and headers, in bytes
	BodyTimeout time.Duration
	// MaxConns caps the connections open at once over every listener Serve is given.
	MaxConns int
	// AllowedHosts returns the names accepted in the Host header besides IP literals and
	// localhost (host.go); nil accepts every Host.
	AllowedHosts func() []string
	// AnyHost exempts requests from the Host check (the setup portal network).
	AnyHost func(r *http.Request) bool
}

// Server is the device's HTTP face. Core routes are added with Handle before Serve; application
// routes may come and go at any time with AddApp and RemoveApp.
type Server struct {
	opts       Options
	log        *slog.Logger
	core       *httprouter.Router
	coreRoutes map[string]api.Route // "METHOD path" → route, for conflict checks

	appMu     sync.Mutex
	appRoutes map[string][]api.Route // owner → routes
	app       atomic.Pointer[httprouter.Router]

	restarting atomic.Bool
	conns      *connPool
}

var _ api.Registrar = (*Server)(nil)

// New builds a server with no routes.
func New(opts Options) *Server {
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	opts.MaxBody = cmp.Or(opts.MaxBody, DefaultMaxBody)
	opts.MaxHeader = cmp.Or(opts.MaxHeader, DefaultMaxHeader)
	opts.BodyTimeout = cmp.Or(opts.BodyTimeout, DefaultBodyTimeout)
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	s := &Server{opts: opts, log: opts.Logger, coreRoutes: map[string]api.Route{}, appRoutes: map[string][]api.Route{},
		conns: newConnPool(opts.MaxConns, opts.MaxHeader)}
	s.core = newRouter()
	s.core.NotFound = http.HandlerFunc(s.notFound)
	s.app.Store(newRouter())
	if err := s.Handle(s.openAPIRoute()); err != nil { // an empty router takes any route
		s.log.Error("openapi route", "err", err)
	}
	return s
}

func newRouter() *httprouter.Router {
	r := httprouter.New()
	// The spec wants 404 `not_found` for unknown API paths, never a redirect.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleOPTIONS = false
	r.HandleMethodNotAllowed = true
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// httprouter lists OPTIONS in Allow even with HandleOPTIONS off; the device answers
		// OPTIONS with this same 405, so it must not be offered.
		var allow []string
		for _, m := range strings.Split(w.Header().Get("Allow"), ", ") {
			if m != "" && m != http.MethodOptions {
				allow = append(allow, m)
			}
		}
		w.Header().Set("Allow", strings.Join(allow, ", "))
		api.WriteError(w, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed)
	})
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		api.WriteError(w, http.StatusNotFound, api.CodeNotFound)
	})
	return r
}

// Handle adds a core route. A route that conflicts with one already present is refused.
func (s *Server) Handle(rt api.Route) error {
	if err := checkRoute(rt); err != nil {
		return err
	}
	id := rt.Method + " " + rt.Path
	if _, dup := s.coreRoutes[id]; dup {
		return fmt.Errorf("route %s: already registered", id)
	}
	if err := addRoute(s.core, rt, s.chain(rt, !rt.Stream)); err != nil {
		return err
	}
	s.coreRoutes[id] = rt
	return nil
}

// HandleAll adds every route and stops at the first refusal.
func (s *Server) HandleAll(routes []api.Route) error {
	for _, rt := range routes {
		if err := s.Handle(rt); err != nil {
			return err
		}
	}
	return nil
}

// AddApp adds an application's endpoints. They are protected unless marked Public, and may
// never shadow a core route: a path the core router already answers for that method, or one
// another owner holds, is refused and nothing of this call is added.
func (s *Server) AddApp(owner string, routes ...api.Route) error {
	s.appMu.Lock()
	defer s.appMu.Unlock()
	for _, rt := range routes {
		if err := checkRoute(rt); err != nil {
			return err
		}
		probe := samplePath(rt.Path)
		if h, _, _ := s.core.Lookup(rt.Method, probe); h != nil {
			return fmt.Errorf("route %s %s: shadows a core route", rt.Method, rt.Path)
		}
	}
	next := map[string][]api.Route{}
	for o, rs := range s.appRoutes {
		next[o] = rs
	}
	next[owner] = append(append([]api.Route(nil), s.appRoutes[owner]...), routes...)
	r, err := s.buildApp(next)
	if err != nil {
		return err
	}
	s.appRoutes = next
	s.app.Store(r)
	return nil
}

// RemoveApp drops every endpoint an owner added.
func (s *Server) RemoveApp(owner string) {
	s.appMu.Lock()
	defer s.appMu.Unlock()
	if _, ok := s.appRoutes[owner]; !ok {
		return
	}
	next := map[string][]api.Route{}
	for o, rs := range s.appRoutes {
		if o != owner {
			next[o] = rs
		}
	}
	r, err := s.buildApp(next)
	if err != nil { // cannot happen: a subset of a table that built before
		s.log.Error("rebuild application routes", "err", err)
		return
	}
	s.appRoutes = next
	s.app.Store(r)
}

func (s *Server) buildApp(table map[string][]api.Route) (*httprouter.Router, error) {
	r := newRouter()
	for _, rs := range table {
		for _, rt := range rs {
			if err := addRoute(r, rt, s.chain(rt, false)); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

func checkRoute(rt api.Route) error {
	switch rt.Method {
	case http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete:
	default:
		return fmt.Errorf("route %s %s: method not supported", rt.Method, rt.Path)
	}
	if !strings.HasPrefix(rt.Path, "/") || rt.Handler == nil {
		return fmt.Errorf("route %s %q: path must start with / and have a handler", rt.Method, rt.Path)
	}
	return nil
}

// addRoute registers with httprouter, which panics on conflicting wildcards; that becomes an error.
func addRoute(r *httprouter.Router, rt api.Route, h http.Handler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("route %s %s: %v", rt.Method, rt.Path, p)
		}
	}()
	r.Handler(rt.Method, Prefix+rt.Path, h)
	return nil
}

// samplePath turns a pattern into a concrete path for a conflict lookup.
func samplePath(p string) string {
	parts := strings.Split(p, "/")
	for i, s := range parts {
		if strings.HasPrefix(s, ":") || strings.HasPrefix(s, "*") {
			parts[i] = "x"
		}
	}
	return Prefix + strings.Join(parts, "/")
}

// SetRestarting arms the refusal of writes while a reboot or factory reset is pending.
func (s *Server) SetRestarting() { s.restarting.Store(true) }

// ServeHTTP routes a request: API paths to the core router (then application routes), the rest
// to the UI.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.hostAllowed(r) {
		writeMisdirected(w, r.Host)
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/api/") && r.URL.Path != "/api" {
		if s.opts.UI == nil {
			api.WriteError(w, http.StatusNotFound, api.CodeNotFound)
			return
		}
		s.opts.UI.ServeHTTP(w, r)
		return
	}
	s.core.ServeHTTP(w, r)
}

// notFound is the core router's miss: application routes get their turn.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.app.Load().ServeHTTP(w, r)
}

// chain wraps a route's handler in the middleware every API request passes. A foreground
// route's requests are counted in flight (package foreground) so that plugin code gives way
// to them: the core routes but their event streams, which stay open for as long as a client
// listens. An application's routes are not: a plugin answers them itself.
func (s *Server) chain(rt api.Route, fg bool) http.Handler {
	write := rt.Method != http.MethodGet
	takesBody := (rt.Method == http.MethodPut || rt.Method == http.MethodPost) && !rt.NoBody
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fg {
			foreground.Begin()
			defer foreground.End()
		}
		defer s.recoverPanic(w, r)
		rc := controller(w)
		if !rt.Stream {
			_ = rc.SetWriteDeadline(time.Now().Add(DefaultWriteTimout))
		}
		// Authentication first, before any handler, any limit and before the body is read:
		// a client without a credential learns nothing but 401 (or the throttle's 429).
		if !rt.Public && s.opts.Auth != nil {
			if err := s.opts.Auth.Check(r); err != nil {
				if r.ContentLength < 0 || r.ContentLength > s.opts.MaxBody {
					closeAfter(w) // an unframed or over-long body is not worth draining
				}
				s.opts.Auth.WriteError(w, err)
				return
			}
			if sc, ok := s.opts.Auth.(Scoper); ok && rt.Stream {
				ctx, cancel := sc.Scope(r.Context(), r)
				defer cancel()
				r = r.WithContext(ctx)
			}
		}
		// Limits, before anything reads the body.
		if takesBody && (r.ContentLength < 0 || r.Header.Get("Content-Length") == "") {
			// Chunked, or neither a length nor a body: the spec's 411.
			closeAfter(w)
			api.WriteErr(w, api.Errorf(http.StatusLengthRequired, api.CodeLengthRequired,
				"send the JSON body with a Content-Length header"))
			return
		}
		if write && r.ContentLength < 0 {
			// A chunked body where none is expected is not worth reading either.
			closeAfter(w)
			api.WriteErr(w, api.Errorf(http.StatusLengthRequired, api.CodeLengthRequired,
				"a body needs a Content-Length header"))
			return
		}
		if r.ContentLength > s.opts.MaxBody {
			closeAfter(w)
			api.WriteError(w, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
			return
		}
		if r.Body != http.NoBody {
			// net/http gives a request without a body NoBody, which has nothing to cap.
			r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
		}
		if r.ContentLength > 0 || r.ContentLength < 0 {
			_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
		}
		if write && s.restarting.Load() {
			api.WriteError(w, http.StatusServiceUnavailable, api.CodeRestarting)
			return
		}
		if write && !isJSON(r.Header.Get("Content-Type")) {
			api.WriteErr(w, api.Errorf(http.StatusUnsupportedMediaType, api.CodeUnsupportedMedia,
				"state-changing requests must carry Content-Type: application/json"))
			return
		}
		if rt.Stream {
			// Streams must outlive the server's idle limits; they end with the client or the hub.
			_ = rc.SetWriteDeadline(time.Time{})
		}
		rt.Handler(w, r)
	})
}

// deadliner is the part of http.ResponseController the chain uses.
type deadliner interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// controller answers w's deadline setters: net/http's own writer has them itself, which spares
// the allocation of a ResponseController on every request; any other writer goes through one.
func controller(w http.ResponseWriter) deadliner {
	if d, ok := w.(deadliner); ok {
		return d
	}
	return http.NewResponseController(w)
}

func (s *Server) recoverPanic(w http.ResponseWriter, r *http.Request) {
	p := recover()
	if p == nil {
		return
	}
	if p == http.ErrAbortHandler {
		panic(p)
	}
	s.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	api.WriteError(w, http.StatusInternalServerError, api.CodeInternal)
}

func isJSON(ct string) bool {
	if ct == "application/json" {
		return true // what clients send; ParseMediaType would allocate a parameter map
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// closeAfter ends the connection after this answer: the rest of an over-long or unframed request
// is not worth reading.
func closeAfter(w http.ResponseWriter) { w.Header().Set("Connection", "close") }

// Serve answers on ln until ctx ends, then shuts down gracefully (streams are cut by their owners
// through ctx). Every listener served (station, portal) shares the connection cap, and net/http's
// own answers on it are JSON.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       60 * time.Second,
		// net/http reads at most MaxHeaderBytes + 4096 bytes of request head.
		MaxHeaderBytes: max(s.opts.MaxHeader-4096, 1),
		ConnState:      s.conns.track,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:    func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(&listener{Listener: ln, pool: s.conns}) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	<-errc
	return nil
}
