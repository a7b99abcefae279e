package sktls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"devhost/host/api"
	"devhost/host/config"
	"devhost/host/events"

	"github.com/jonboulle/clockwork"
)

// Store keys of the TLS device state (not configuration: never exported).
const (
	KeyPrefix   = "state/sk/tls/"
	PinPrefix   = KeyPrefix + "pin/" // + host:port, one anchor per server
	OperatorKey = KeyPrefix + "ca"   // PEM set by PUT /sk/tls/ca
)

// MaxPins is how many servers keep a first-use pin; committing one more forgets the oldest.
const MaxPins = 8

// HandshakeTimeout bounds one handshake, so a silent server cannot hold the device-wide slot.
const HandshakeTimeout = 10 * time.Second

// maxHosts bounds the per-server run-time state kept for the /sk/tls document.
const maxHosts = 16

// Document states of the current server.
const (
	StateNone     = "none"     // no handshake judged since the last anchor change (or plain http)
	StatePending  = "pending"  // first-use capture accepted, waiting for the connection to prove itself
	StateTrusted  = "trusted"  // the last handshake matched the anchors in force
	StateMismatch = "mismatch" // the last handshake was refused (token state cert_error)
)

// EventName is the SSE event carrying the /sk/tls document.
const EventName = "sk_tls"

// Store is the device state store (*store.Store fits).
type Store interface {
	Get(key string) (string, bool, error)
	Set(key, value string) error
	Apply(sets map[string]string, deletes []string) error
	Scan(prefix string, fn func(k, v string) bool) error
}

// Config reads the sk.* keys (*config.Config fits).
type Config interface {
	String(ns, key string) string
	Blob(ns, key string) []byte
	OnChange(fn func(ns, key string))
}

// Options configure a Manager.
type Options struct {
	Store  Store  // required
	Config Config // required
	Clock  clockwork.Clock
	Logger *slog.Logger
	// Gate is the device-wide handshake gate; nil builds a private one without memory checks.
	Gate *Gate
	// Publish sends an SSE event (the hub's Publish); nil drops events.
	Publish func(name string, data any)
	// OnRetry asks the Signal K client to retry at once (DELETE /sk/tls, a new CA, a trust
	// mode change).
	OnRetry func()
	// Roots are the public roots of `bundle`; nil means the system pool.
	Roots *x509.CertPool
	// HandshakeTimeout and ProbeTimeout override the defaults (tests).
	HandshakeTimeout time.Duration
	ProbeTimeout     time.Duration
}

// Manager owns the Signal K client's TLS trust: anchors, verification, captures, the scheme
// probe and the /sk/tls endpoints.
type Manager struct {
	st           Store
	cfg          Config
	clock        clockwork.Clock
	log          *slog.Logger
	gate         *Gate
	publish      func(string, any)
	onRetry      func()
	roots        *x509.CertPool
	hsTimeout    time.Duration
	probeTimeout time.Duration

	mu       sync.Mutex
	pins     map[string]*anchor
	broken   map[string]error // stored pins that cannot be read
	operator []*x509.Certificate
	cfgRaw   []byte
	cfgCAs   []*x509.Certificate
	cfgErr   error
	current  string
	hosts    map[string]*hostState

	probeMu  sync.Mutex
	probed   map[string]Endpoint
	probeGen uint64
}

type hostState struct {
	presented []*x509.Certificate
	seenAt    time.Time
	state     string
	err       string
	pending   map[string]pendingCapture // by leaf fingerprint
}

type pendingCapture struct {
	a        *anchor
	replaces *anchor // the pin in force when the capture was judged
}

// New loads the stored anchors and builds a manager.
func New(o Options) (*Manager, error) {
	if o.Store == nil || o.Config == nil {
		return nil, errors.New("sktls: Store and Config are required")
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Gate == nil {
		o.Gate = NewGate(GateOptions{Clock: o.Clock, Logger: o.Logger})
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = HandshakeTimeout
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = ProbeTimeout
	}
	m := &Manager{
		st: o.Store, cfg: o.Config, clock: o.Clock, log: o.Logger, gate: o.Gate,
		publish: o.Publish, onRetry: o.OnRetry, roots: o.Roots,
		hsTimeout: o.HandshakeTimeout, probeTimeout: o.ProbeTimeout,
		pins: map[string]*anchor{}, broken: map[string]error{},
		hosts: map[string]*hostState{}, probed: map[string]Endpoint{},
	}
	if err := m.load(); err != nil {
		return nil, err
	}
	o.Config.OnChange(m.configChanged)
	return m, nil
}

func (m *Manager) load() error {
	err := m.st.Scan(PinPrefix, func(k, v string) bool {
		addr := strings.TrimPrefix(k, PinPrefix)
		a, err := decodeAnchor(v)
		if err != nil {
			// Never silently re-pin: a pin that cannot be read refuses the server until the
			// operator trusts it again with DELETE /sk/tls.
			m.broken[addr] = err
			m.log.Error("stored TLS pin unreadable", "server", addr, "err", err)
			return true
		}
		m.pins[addr] = a
		return true
	})
	if err != nil {
		return fmt.Errorf("sktls: load pins: %w", err)
	}
	raw, ok, err := m.st.Get(OperatorKey)
	if err != nil {
		return fmt.Errorf("sktls: load CA: %w", err)
	}
	if ok {
		certs, err := ParseCertificatesPEM([]byte(raw))
		if err != nil {
			m.log.Error("stored CA unreadable; ignored", "err", err)
		} else {
			m.operator = certs
		}
	}
	return nil
}

// Gate is the handshake gate the manager dials through.
func (m *Manager) Gate() *Gate { return m.gate }

// normAddr is the key of a server: lower-case host, canonical IP, with its port.
func normAddr(addr string) string {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return canonName(addr)
	}
	return net.JoinHostPort(canonName(h), p)
}

// ClientConfig is the TLS configuration for a connection to addr (host:port). Go's own
// verification is replaced by the device's trust rules in VerifyConnection, so the name check
// runs only in `bundle`. A caller handshaking with it must hold Gate().Acquire around the
// handshake; DialTLSContext does both.
func (m *Manager) ClientConfig(addr string) *tls.Config {
	key := normAddr(addr)
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification is done by VerifyConnection below, with the anchors of sk.tls_trust.
		InsecureSkipVerify: true,
		VerifyConnection:   func(cs tls.ConnectionState) error { return m.verify(key, cs) },
	}
	if h := hostOf(addr); net.ParseIP(h) == nil {
		cfg.ServerName = h
	}
	return cfg
}

// DialTLSContext dials addr and runs the TLS handshake inside the device-wide gate. It fits
// http.Transport.DialTLSContext and websocket.Dialer.NetDialTLSContext. A refusal by the
// certificate check is a *CertError inside the returned error. The returned connection proves
// itself: the first HTTP status line the server sends on it (any status, a WebSocket 101
// included) commits a first-use capture, so callers need not call Proven.
func (m *Manager) DialTLSContext(ctx context.Context, network, addr string) (net.Conn, error) {
	m.noteServer(normAddr(addr))
	var d net.Dialer
	raw, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, fmt.Errorf("sktls: dial %s: %w", addr, err)
	}
	tc, err := m.handshake(ctx, raw, m.ClientConfig(addr))
	if err != nil {
		return nil, fmt.Errorf("sktls: %s: %w", addr, err)
	}
	return &provingConn{Conn: tc, m: m, addr: addr}, nil
}

func (m *Manager) handshake(ctx context.Context, raw net.Conn, cfg *tls.Config) (*tls.Conn, error) {
	release, err := m.gate.Acquire(ctx)
	if err != nil {
		_ = raw.Close()
		return nil, err
	}
	defer release()
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := m.clock.AfterFunc(m.hsTimeout, cancel)
	defer timer.Stop()
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = raw.Close()
		if hctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("TLS handshake timed out after %s: %w", m.hsTimeout, err)
		}
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}

// verify is the VerifyConnection of every connection built by ClientConfig.
func (m *Manager) verify(key string, cs tls.ConnectionState) error {
	m.mu.Lock()
	t := m.trustLocked(key)
	m.mu.Unlock()
	v := judge(key, hostOf(key), cs.PeerCertificates, t)

	m.mu.Lock()
	hs := m.hostLocked(key)
	before, beforeLeaf := hs.state, leafFP(hs.presented)
	hs.presented = cs.PeerCertificates
	hs.seenAt = t.now
	switch {
	case v.err != nil:
		hs.state, hs.err = StateMismatch, v.err.Error()
	case v.capture != nil:
		hs.state, hs.err = StatePending, ""
		if len(hs.pending) >= 4 {
			clear(hs.pending) // a server cycling through leaves before any proof: keep the newest only
		}
		hs.pending[fingerprint(cs.PeerCertificates[0])] = pendingCapture{a: v.capture, replaces: t.pin}
	default:
		hs.state, hs.err = StateTrusted, ""
	}
	changed := before != hs.state || beforeLeaf != leafFP(hs.presented)
	m.mu.Unlock()

	if changed {
		m.publishDoc()
	}
	if v.err != nil {
		m.log.Warn("TLS certificate refused", "server", key, "reason", v.err.Reason, "mode", v.err.Mode, "err", v.err.Err)
		return v.err
	}
	return nil
}

func leafFP(chain []*x509.Certificate) string {
	if len(chain) == 0 {
		return ""
	}
	return fingerprint(chain[0])
}

func (m *Manager) trustLocked(key string) trust {
	return trust{
		mode:      m.modeLocked(),
		pin:       m.pins[key],
		pinBroken: m.broken[key],
		operator:  m.operator,
		config:    m.configCAsLocked(),
		roots:     m.roots,
		now:       m.clock.Now(),
	}
}

func (m *Manager) modeLocked() string {
	switch s := m.cfg.String(config.NsSK, config.SKTLSTrust); s {
	case ModeCA, ModeBundle:
		return s
	}
	return ModeTOFU
}

// configCAsLocked parses sk.ca_pem when it changed. The configuration checks writes with the
// same rule, but a value stored before that check may not be PEM certificates: it counts as
// no CA and is shown in the document.
func (m *Manager) configCAsLocked() []*x509.Certificate {
	raw := m.cfg.Blob(config.NsSK, config.SKCAPEM)
	if slices.Equal(raw, m.cfgRaw) {
		return m.cfgCAs
	}
	m.cfgRaw = slices.Clone(raw)
	m.cfgCAs, m.cfgErr = nil, nil
	if len(raw) == 0 {
		return nil
	}
	certs, err := ParseCertificatesPEM(raw)
	if err != nil {
		m.cfgErr = fmt.Errorf("sk.ca_pem: %w", err)
		m.log.Warn("sk.ca_pem is not usable", "err", err)
		return nil
	}
	m.cfgCAs = certs
	return certs
}

func (m *Manager) hostLocked(key string) *hostState {
	hs := m.hosts[key]
	if hs == nil {
		if len(m.hosts) >= maxHosts {
			var oldest string
			for k, h := range m.hosts {
				if k != m.current && (oldest == "" || h.seenAt.Before(m.hosts[oldest].seenAt)) {
					oldest = k
				}
			}
			delete(m.hosts, oldest)
		}
		hs = &hostState{state: StateNone, pending: map[string]pendingCapture{}}
		m.hosts[key] = hs
	}
	return hs
}

// Proven commits the first-use capture of the connection whose state is cs, once the caller
// has seen an HTTP status or a WebSocket 101 on it. Connections that matched an existing
// anchor, plain connections (cs nil) and captures already committed are no-ops.
func (m *Manager) Proven(addr string, cs *tls.ConnectionState) error {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return nil
	}
	key := normAddr(addr)
	fp := fingerprint(cs.PeerCertificates[0])
	m.mu.Lock()
	hs := m.hosts[key]
	if hs == nil {
		m.mu.Unlock()
		return nil
	}
	pc, ok := hs.pending[fp]
	if !ok {
		m.mu.Unlock()
		return nil
	}
	delete(hs.pending, fp)
	if m.pins[key] != pc.replaces || m.broken[key] != nil {
		// The anchors changed since this connection was judged (another capture was committed,
		// or the operator acted): its capture no longer speaks for the server.
		m.mu.Unlock()
		m.log.Info("stale TLS capture not committed", "server", key)
		return nil
	}
	a := *pc.a
	a.PinnedAt = m.clock.Now()
	if err := m.storePinLocked(key, &a); err != nil {
		m.mu.Unlock()
		return err
	}
	if hs.state == StatePending && len(hs.pending) == 0 {
		hs.state = StateTrusted
	}
	m.mu.Unlock()
	m.log.Info("TLS anchor pinned", "server", key, "kind", a.Kind, "subject", a.Cert.Subject.String(), "sha256", fingerprint(a.Cert))
	m.publishDoc()
	return nil
}

// storePinLocked writes the pin of key, forgetting the oldest pin beyond MaxPins in the same
// batch.
func (m *Manager) storePinLocked(key string, a *anchor) error {
	enc, err := encodeAnchor(a)
	if err != nil {
		return err
	}
	var drop []string
	if _, had := m.pins[key]; !had && len(m.pins) >= MaxPins {
		var oldest string
		for k, p := range m.pins {
			if oldest == "" || p.PinnedAt.Before(m.pins[oldest].PinnedAt) {
				oldest = k
			}
		}
		drop = append(drop, oldest)
	}
	var dels []string
	for _, k := range drop {
		dels = append(dels, PinPrefix+k)
	}
	if err := m.st.Apply(map[string]string{PinPrefix + key: enc}, dels); err != nil {
		return fmt.Errorf("sktls: store pin of %s: %w", key, err)
	}
	for _, k := range drop {
		delete(m.pins, k)
	}
	m.pins[key] = a
	return nil
}

// ProvenConn is Proven for a connection whose TLS state it can read (a *tls.Conn, or a
// connection returned by DialTLSContext).
func (m *Manager) ProvenConn(addr string, c net.Conn) error {
	sc, ok := c.(interface{ ConnectionState() tls.ConnectionState })
	if !ok {
		return nil
	}
	cs := sc.ConnectionState()
	return m.Proven(addr, &cs)
}

// SetServer names the server the Signal K client uses now; GET and DELETE /sk/tls speak about
// it. Dialling a server through DialTLSContext names it too.
func (m *Manager) SetServer(addr string) { m.noteServer(normAddr(addr)) }

func (m *Manager) noteServer(key string) {
	m.mu.Lock()
	changed := m.current != key
	m.current = key
	m.mu.Unlock()
	if changed {
		m.publishDoc()
	}
}

// Forget is DELETE /sk/tls: it forgets the current server's pin (every pin when no server has
// been used yet), then asks for a retry at once. The CAs of PUT /sk/tls/ca and sk.ca_pem stay:
// they are the operator's deliberate trust, which `ca` mode depends on, not a first-use capture.
func (m *Manager) Forget() error {
	m.mu.Lock()
	var dels []string
	if m.current != "" {
		dels = append(dels, PinPrefix+m.current)
	} else {
		for k := range m.pins {
			dels = append(dels, PinPrefix+k)
		}
		for k := range m.broken {
			dels = append(dels, PinPrefix+k)
		}
	}
	if err := m.st.Apply(nil, dels); err != nil {
		m.mu.Unlock()
		return fmt.Errorf("sktls: forget anchors: %w", err)
	}
	m.resetJudgementsLocked()
	for _, k := range dels {
		addr := strings.TrimPrefix(k, PinPrefix)
		delete(m.pins, addr)
		delete(m.broken, addr)
		// A trusted state earned against the forgotten pin no longer says anything: the next
		// handshake is judged afresh.
		if hs := m.hosts[addr]; hs != nil {
			hs.state, hs.err = StateNone, ""
		}
	}
	m.mu.Unlock()
	m.log.Info("TLS pins forgotten", "pins", len(dels))
	m.anchorsChanged()
	return nil
}

// SetCA is PUT /sk/tls/ca: it validates pemText and stores it as the operator's CA at once.
// The returned error is an *api.Error 400 for invalid PEM.
func (m *Manager) SetCA(pemText []byte) error {
	certs, err := ParseCertificatesPEM(pemText)
	if err != nil {
		return api.Validation("pem", "invalid PEM: %v", err)
	}
	m.mu.Lock()
	if err := m.st.Set(OperatorKey, encodePEM(certs)); err != nil {
		m.mu.Unlock()
		return fmt.Errorf("sktls: store CA: %w", err)
	}
	m.operator = certs
	m.resetJudgementsLocked()
	m.mu.Unlock()
	m.log.Info("TLS CA anchored", "subject", certs[0].Subject.String(), "certificates", len(certs))
	m.anchorsChanged()
	return nil
}

// resetJudgementsLocked drops refusals and waiting captures made under the old anchors.
func (m *Manager) resetJudgementsLocked() {
	for _, hs := range m.hosts {
		clear(hs.pending)
		if hs.state != StateTrusted {
			hs.state, hs.err = StateNone, ""
		}
	}
}

func (m *Manager) anchorsChanged() {
	m.publishDoc()
	if m.onRetry != nil {
		m.onRetry()
	}
}

func (m *Manager) configChanged(ns, key string) {
	if ns != config.NsSK {
		return
	}
	switch key {
	case config.SKTLSTrust, config.SKCAPEM:
		m.mu.Lock()
		m.resetJudgementsLocked()
		m.mu.Unlock()
		m.anchorsChanged()
	case config.SKScheme, config.SKServerHost, config.SKServerPort:
		m.ForgetScheme()
	}
}

func (m *Manager) publishDoc() {
	if m.publish != nil {
		m.publish(EventName, m.Document())
	}
}

// SnapshotEvent is the `sk_tls` event for a new SSE stream.
func (m *Manager) SnapshotEvent() events.Event {
	return events.Event{Name: EventName, Data: m.Document()}
}
