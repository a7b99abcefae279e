package signalk

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/board"
	"devhost/host/clock"
	"devhost/host/config"
	"devhost/host/events"
	"devhost/host/health"
	"devhost/host/skstream"
)

// Config reads the sk.* and time.* keys (host/config.Config fits).
type Config interface {
	Int(ns, key string) int
	String(ns, key string) string
	Bool(ns, key string) bool
	OnChange(fn func(ns, key string))
}

// Health is the condition table (host/health.Registry fits).
type Health interface {
	Report(key string, state health.State, message string) error
	ReportFatal(key string, state health.State, message string) error
	AddSink(sink func(health.Condition)) error
}

// Events is the SSE hub (host/events.Hub fits).
type Events interface {
	Publish(name string, data any)
	OnConnect(cb func() []events.Event) bool
}

// WallClock is the device's ranked clock (host/clock.Clock fits).
type WallClock interface {
	Now() (t time.Time, src clock.Source, synced bool)
	Set(src clock.Source, t time.Time) error
	Subscribe(fn func(clock.Source)) (cancel func(), err error)
}

// NetEvent is a default-route edge of the network layer.
type NetEvent int

// The spec's route edges.
const (
	NetUp NetEvent = iota + 1
	NetDown
	NetChanged
)

// Telemetry is the device's health figures for the dev.<hostname>.* paths.
type Telemetry struct {
	Uptime         time.Duration
	Memory         board.Memory
	RSSI           *int
	WiFiReconnects int
	ResetReason    string
}

// Options build a Client. Config, Store and Stream are required; every other member is
// optional (nil leaves that part out).
type Options struct {
	Clock  clockwork.Clock
	Logger *slog.Logger
	Config Config
	Store  Store
	Stream Stream
	// Discovery lists mDNS servers; nil means sk.server_host must be set.
	Discovery Discovery
	// TLS handles https servers; nil means plain http only.
	TLS    TLS
	Health Health
	Events Events
	// Time is the device clock for the time fallback; nil leaves the fallback out.
	Time WallClock
	// Net delivers route edges; NetUp answers the state at start (nil: up).
	Net   <-chan NetEvent
	NetUp func() bool
	// Hostname is the effective net.hostname (dev-<id> when unset): source label and paths.
	Hostname func() string
	// Telemetry feeds the health telemetry; nil publishes none.
	Telemetry func() Telemetry
	// Snapshots adds events to the client's one SSE connect callback (the TLS component's
	// sk_tls snapshot), so the Signal K parts use a single slot of the hub's eight.
	Snapshots func() []events.Event
	// Description goes into the access request; default "devhost <hostname>".
	Description string
	// HTTPTimeout, HTTPBodyCap, HTTPInFlight override the helper's defaults (6 s, 16 KiB, 2).
	HTTPTimeout  time.Duration
	HTTPBodyCap  int
	HTTPInFlight int
}

// Client is the device's Signal K client core.
type Client struct {
	clk    clockwork.Clock
	log    *slog.Logger
	cfg    Config
	st     persist
	stream Stream
	disc   Discovery
	tls    TLS
	hlth   Health
	ev     Events
	wall   WallClock
	net    <-chan NetEvent
	host   func() string
	tele   func() Telemetry
	snaps  func() []events.Event
	http   *httpHelper
	tm     *tokenMachine
	skips  skipList
	kick   chan struct{}

	started atomic.Bool

	mu     sync.Mutex
	server *Server
	target Target
	// stall tracking
	netUp      bool
	netUpSince time.Time
	connected  bool
	everUp     bool
	downSince  time.Time
	stallTimer clockwork.Timer
	stalled    bool
	connects   int
	lastCertSt string
	// refused counts the stream's 401/403 reports and resumed the count the stream was last
	// re-targeted or retried at: while they differ the stream waits for the token machine.
	refused, resumed uint64
	// wsBackoff: the stream's last status was a backoff wait (a failed attempt).
	wsBackoff   bool
	lastPut     *PutRecord
	telemetryCh chan struct{}
	timeKick    chan struct{}
	timeSubOn   atomic.Bool
}

// New builds the client; it loads (or makes) the client id. Nothing runs before Run.
func New(o Options) (*Client, error) {
	if o.Config == nil || o.Store == nil || o.Stream == nil {
		return nil, errors.New("signalk: Config, Store and Stream are required")
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Hostname == nil {
		o.Hostname = func() string { return "devhost" }
	}
	c := &Client{clk: o.Clock, log: o.Logger, cfg: o.Config, st: persist{o.Store}, stream: o.Stream,
		disc: o.Discovery, tls: o.TLS, hlth: o.Health, ev: o.Events, wall: o.Time, net: o.Net,
		host: o.Hostname, tele: o.Telemetry, snaps: o.Snapshots, kick: make(chan struct{}, 1), netUp: true,
		telemetryCh: make(chan struct{}, 1), timeKick: make(chan struct{}, 1)}
	if o.NetUp != nil {
		c.netUp = o.NetUp()
	}
	c.http = newHTTPHelper(o.HTTPTimeout, o.HTTPBodyCap, o.HTTPInFlight, o.TLS)
	id, err := c.st.clientID()
	if err != nil {
		return nil, err
	}
	c.tm = newTokenMachine(c.clk, c.log, c.http, c.st, id)
	c.tm.permissions = func() string {
		if p := c.cfg.String(config.NsSK, config.SKPermissions); p != "" {
			return p
		}
		return "readwrite"
	}
	desc := o.Description
	c.tm.description = func() string {
		if desc != "" {
			return desc
		}
		return "devhost " + c.host()
	}
	c.tm.checkEvery = func() time.Duration {
		s := c.cfg.Int(config.NsSK, config.SKCheckS)
		if s < 60 {
			s = 3600
		}
		return time.Duration(s) * time.Second
	}
	c.tm.changed = c.tokenChanged
	c.tm.unreachable = c.markUnreachable
	c.tm.guessTried = c.guessTried
	return c, nil
}

// ClientID is the device's access-request client id.
func (c *Client) ClientID() string { return c.tm.clientID }

// Run runs the client until ctx ends: server choice, the token machine, health, telemetry and
// the time fallback. The Go API accepts values from the moment Run starts.
func (c *Client) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("signalk: Run called twice")
	}
	c.mu.Lock()
	c.netUpSince = c.clk.Now()
	c.mu.Unlock()
	c.cfg.OnChange(c.configChanged)
	if c.ev != nil {
		c.ev.OnConnect(func() []events.Event {
			evs := []events.Event{{Name: "sk", Data: c.Status()}, {Name: "sk_servers", Data: c.Servers()}}
			if c.snaps != nil {
				evs = append(evs, c.snaps()...)
			}
			return evs
		})
	}
	if c.hlth != nil {
		_ = c.hlth.Report(KeyLinkStalled, health.Normal, "")
		_ = c.hlth.Report(KeyCertificate, health.Normal, "")
		if err := c.hlth.AddSink(c.notify); err != nil {
			c.log.Warn("signalk: no health sink slot; conditions are not sent to Signal K", "err", err)
		}
	}
	var wg sync.WaitGroup
	run := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	run(c.tm.run)
	run(c.runChooser)
	run(c.runNet)
	run(c.runTelemetry)
	run(c.runTime)
	<-ctx.Done()
	wg.Wait()
	c.mu.Lock()
	if c.stallTimer != nil {
		c.stallTimer.Stop()
	}
	c.mu.Unlock()
	return nil
}

func (c *Client) configChanged(ns, key string) {
	switch {
	case ns == config.NsSK && (key == config.SKServerHost || key == config.SKServerPort || key == config.SKServerSelf ||
		key == config.SKServerPin || key == config.SKScheme):
		c.kickChoice()
	case ns == config.NsSK && key == config.SKHealthS:
		select {
		case c.telemetryCh <- struct{}{}:
		default:
		}
	case ns == config.NsSK && key == config.SKStallS:
		c.evalStall()
	case ns == config.NsTime && key == config.TimeSKFallback:
		c.kickTime()
	}
}

// runNet follows the route edges.
func (c *Client) runNet(ctx context.Context) {
	if c.net == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-c.net:
			if !ok {
				return
			}
			c.mu.Lock()
			switch ev {
			case NetUp, NetChanged:
				c.netUp = true
				c.netUpSince = c.clk.Now()
			case NetDown:
				c.netUp = false
			}
			c.mu.Unlock()
			c.evalStall()
			if ev != NetDown {
				// A waiting request, poll or check goes at once; a guessed scheme is re-asked.
				c.tm.retryNow(false)
				c.kickChoice()
			}
		}
	}
}

// tokenChanged runs on the token machine's goroutine after every transition.
func (c *Client) tokenChanged() {
	st := c.tm.Status()
	tok, srv := c.tm.token()
	var t Target
	if srv != nil {
		switch st.State {
		case StateApproved, StateVerifying:
			if tok != "" {
				t = Target{Host: srv.Host, Port: srv.Port, TLS: srv.TLS(), Token: tok}
			}
		case StateOpen:
			t = Target{Host: srv.Host, Port: srv.Port, TLS: srv.TLS()}
		}
		if t.TLS && c.tls != nil {
			t.DialTLS = c.tls.DialTLSContext
			addr := srv.Addr()
			t.Proven = func(conn net.Conn) {
				if sc, ok := conn.(interface{ ConnectionState() tls.ConnectionState }); ok {
					cs := sc.ConnectionState()
					_ = c.tls.Proven(addr, &cs)
				}
			}
		}
	}
	c.mu.Lock()
	old := c.target
	c.target = t
	retarget := old.Host != t.Host || old.Port != t.Port || old.TLS != t.TLS || old.Token != t.Token
	// A stream refused with 401/403 stops until it is told to go on. The token machine
	// (re-)entering APPROVED is that word even when the target is the same (a plaintext 401
	// whose 5 s re-check found the token good), and so is OPEN confirmed by its 60 s re-POST
	// (a server that refused the stream but still answers requests with 404).
	resume := !retarget && t.Host != "" && (st.State == StateApproved || st.State == StateOpen) &&
		c.refused != c.resumed
	if retarget || resume {
		c.resumed = c.refused
	}
	c.mu.Unlock()
	switch {
	case retarget:
		c.stream.SetTarget(t)
	case resume:
		// Lifts the stream's stop after the refusal; a live connection is left alone.
		c.stream.Retry()
	}
	if c.hlth != nil {
		c.mu.Lock()
		was := c.lastCertSt
		c.lastCertSt = st.State
		c.mu.Unlock()
		if st.State == StateCertError {
			_ = c.hlth.Report(KeyCertificate, health.Alarm, certMessage(st.Reason))
		} else if was == StateCertError {
			_ = c.hlth.Report(KeyCertificate, health.Normal, "")
		}
	}
	c.publish("sk", c.Status())
}

func certMessage(reason string) string {
	m := "server certificate refused: " + reason
	if len(m) > 200 {
		m = m[:200]
	}
	return m
}

func (c *Client) publish(name string, data any) {
	if c.ev != nil {
		c.ev.Publish(name, data)
	}
}

func (c *Client) publishServers() { c.publish("sk_servers", c.Servers()) }

// --- reports from the stream and the TLS component ---

// StreamUnauthorized is the stream's 401/403 on the upgrade (skstream Options.OnUnauthorized).
func (c *Client) StreamUnauthorized() {
	c.mu.Lock()
	t := c.target
	if t.Host != "" {
		c.refused++
	}
	c.mu.Unlock()
	_, srv := c.tm.token()
	if srv == nil || t.Host == "" {
		return
	}
	c.tm.reportUnauthorized(*srv, t.Token)
}

// StreamCertError is a stream connection refused by the certificate check.
func (c *Client) StreamCertError(err error) {
	_, srv := c.tm.token()
	if srv != nil {
		c.tm.reportCertError(*srv, err)
	}
}

// StreamStatus is told about every change of the stream's status (skstream Options.OnStatus):
// it publishes `sk_ws` and follows the link for skLinkStalled and skReconnects. A failed
// attempt on a guessed scheme has the scheme probed again.
func (c *Client) StreamStatus() {
	up := c.stream.Connected()
	ws := c.stream.Status()
	failed := false
	c.mu.Lock()
	if s, ok := ws.(skstream.Status); ok {
		backoff := s.State == skstream.StateBackoff
		failed = backoff && !c.wsBackoff
		c.wsBackoff = backoff
	}
	guess := c.server != nil && c.server.Guess
	if up && !c.connected {
		c.connects++
		c.everUp = true
		tok := c.target.Token
		c.mu.Unlock()
		if _, srv := c.tm.token(); srv != nil {
			c.tm.reportAccepted(*srv, tok)
		}
		c.mu.Lock()
	}
	if !up && c.connected {
		c.downSince = c.clk.Now()
	}
	c.connected = up
	c.mu.Unlock()
	c.evalStall()
	if failed && guess {
		c.guessTried()
	}
	c.publish("sk_ws", ws)
}

// guessTried is told after each attempt on a server whose scheme is a guess: the scheme is
// asked again before the next one (the chooser probes a guess every time it runs).
func (c *Client) guessTried() {
	if c.tls != nil {
		c.kickChoice()
	}
}

// RetryNow makes a cert_error retry at once (after DELETE /sk/tls or a new CA).
func (c *Client) RetryNow() { c.tm.retryNow(true) }

// HTTP makes one call to the current server with the current token (skstream.HTTPFunc):
// 6 s, 16 KiB (a longer answer is an error wrapping ErrTruncated and is not returned), at most
// 2 in flight; any HTTP status is a successful call. A 401/403 answered to a call that sent a
// token goes to the token machine, and so does a certificate refusal.
func (c *Client) HTTP(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	tok, srv := c.tm.token()
	if srv == nil {
		return 0, nil, ErrNoServer
	}
	s := *srv
	resp, err := c.http.do(ctx, s, tok, method, path, body)
	if err != nil && resp == nil {
		if errors.Is(err, errCert) {
			c.tm.reportCertError(s, err)
		}
		return 0, nil, err
	}
	if tok != "" && (resp.Status == http.StatusUnauthorized || resp.Status == http.StatusForbidden) {
		c.tm.reportUnauthorized(s, tok)
	}
	if err != nil {
		return resp.Status, nil, err
	}
	return resp.Status, resp.Body, nil
}

// Server answers the current choice (nil when none).
func (c *Client) Server() *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.server == nil {
		return nil
	}
	s := *c.server
	return &s
}

func (c *Client) hostname() string {
	h := c.host()
	if h == "" {
		h = "devhost"
	}
	return h
}

func checkStarted(c *Client) error {
	if !c.started.Load() {
		return fmt.Errorf("%w: the Signal K client is not started", ErrInvalidState)
	}
	return nil
}
