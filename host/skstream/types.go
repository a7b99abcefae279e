package skstream

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/sk"
)

// Limits of the spec's Limits table (Signal K row) and of the wire documents.
const (
	MaxSubscriptions = 48
	MaxPutsInFlight  = 8
	PutTimeout       = 10 * time.Second
	// MaxFrameBytes is the largest inbound frame that is parsed; larger ones are dropped.
	MaxFrameBytes = 16 * 1024
	// MaxMessageBytes bounds one outbound delta message: a batch closes early rather than grow
	// past it, and a single value that cannot fit is refused.
	MaxMessageBytes = 16 * 1024
	// MaxPathLen bounds a Signal K path given to this package.
	MaxPathLen = 256
	// MaxMetaDeclarations bounds DeclareMeta.
	MaxMetaDeclarations = 128
	// SubscriberQueue is how many values wait for one slow subscriber before the oldest is dropped.
	SubscriberQueue = 256
	// InboundPutQueue is how many inbound PUT requests wait for the handler worker.
	InboundPutQueue = 16
	// SubscribePeriodMS and SubscribeMinPeriodMS go into every subscribe row. Both are 0: with
	// policy instant every change is delivered; signalk-server reads a non-zero period as
	// policy fixed and a non-zero minPeriod as a debounce that drops values.
	SubscribePeriodMS    = 0
	SubscribeMinPeriodMS = 0
)

// Errors returned by the Stream. Callers compare with errors.Is.
var (
	// ErrInvalidState: the call needs a started stream (publish, raw) or a connected one (PUT,
	// flush).
	ErrInvalidState = errors.New("skstream: invalid state")
	// ErrTimeout: a flush deadline passed with data still waiting.
	ErrTimeout = errors.New("skstream: timeout")
	// ErrInvalidArgument: a path, pattern, value or frame this package refuses.
	ErrInvalidArgument = errors.New("skstream: invalid argument")
	// ErrLimit: a fixed limit (48 subscriptions, 8 PUTs in flight, meta declarations) is full.
	ErrLimit = errors.New("skstream: limit reached")
	// ErrClosed: the stream was closed.
	ErrClosed = errors.New("skstream: closed")
)

// Settings are the sk.* keys (and the WiFi backoff cap) the stream follows. They can change at
// run time through SetSettings.
type Settings struct {
	BatchMS     int  // sk.batch_ms; 0 sends every value as its own message
	BufferMsgs  int  // sk.buffer_msgs
	BufferKB    int  // sk.buffer_kb
	DrainPerS   int  // sk.drain_per_s
	WSEnabled   bool // sk.ws_enabled
	Timestamps  bool // sk.timestamps
	BackoffMaxS int  // wifi.backoff_max_s: the cap of the retry curve
}

// DefaultSettings are the defaults of the configuration keys.
func DefaultSettings() Settings {
	return Settings{BatchMS: 100, BufferMsgs: 128, BufferKB: 32, DrainPerS: 20, WSEnabled: true,
		Timestamps: true, BackoffMaxS: 300}
}

// Target is the server end of the stream.
type Target struct {
	// URL names the server: `ws://host:port` or `wss://host:port` (http and https are read as
	// ws and wss; a missing port is 80 or 443). Path and query are set by the stream:
	// /signalk/v1/stream?subscribe=none, plus sendMeta=all while subscriptions exist.
	URL string
	// Token is sent as `Authorization: Bearer <token>`; empty sends no Authorization header
	// (a server with security off).
	Token string
	// TLSConfig is used for wss; DialTLS, when set, makes the whole TLS connection itself
	// (TLSConfig is then ignored), e.g. the device's trust manager.
	TLSConfig *tls.Config
	DialTLS   func(ctx context.Context, network, addr string) (net.Conn, error)
	// Proven is called with the connection whenever the server answered the upgrade with any
	// HTTP status (101 or a refusal), so a first-use TLS capture can be committed.
	Proven func(conn net.Conn)
}

// HTTPFunc performs one request to the current Signal K server. path is absolute on the server
// (`/signalk/v1/api/...`); body is nil for GET. Any HTTP status is a successful call (err nil).
type HTTPFunc func(ctx context.Context, method, path string, body []byte) (status int, respBody []byte, err error)

// Hello is the server's first frame.
type Hello struct {
	Name      string   `json:"name"`
	Version   string   `json:"version"`
	Self      string   `json:"self"`
	Roles     []string `json:"roles"`
	Timestamp string   `json:"timestamp"`
}

// Unauthorized describes a refused upgrade.
type Unauthorized struct {
	StatusCode int    // 401 or 403
	TLS        bool   // the refusal came over TLS
	URL        string // the target's URL
}

// Options configure a Stream. Zero values take defaults.
type Options struct {
	Clock  clockwork.Clock
	Logger *slog.Logger
	// Hostname gives the source label `dev.<Hostname>`.
	Hostname string
	// WallClock is the device clock; ok false means it is not set (no timestamps then).
	WallClock func() (t time.Time, ok bool)
	// HTTP reaches the server's REST API for metadata reconciliation; nil disables it.
	HTTP     HTTPFunc
	Settings Settings
	// Jitter returns a value in [-1, 1] scaling the ±25 % backoff jitter; nil is uniform random.
	Jitter func() float64

	// OnStatus receives the `ws` status on connect, disconnect, error and drops (the sk_ws
	// event). Called from one goroutine, never concurrently, never under a lock.
	OnStatus func(Status)
	// OnUnauthorized is told about a 401 or 403 on the upgrade. The stream does not dial again
	// until SetTarget or Retry is called.
	OnUnauthorized func(Unauthorized)
	// IsCertError recognises a dial error caused by the certificate check; OnCertError is then
	// told and the stream does not dial again until SetTarget or Retry (the token machine owns
	// the flat 60 s retry). Without IsCertError such errors back off like any other failure.
	IsCertError func(error) bool
	OnCertError func(error)
	// OnHello is told about every hello consumed.
	OnHello func(Hello)

	// Real-time socket limits (the socket's own deadlines cannot follow a fake clock).
	HandshakeTimeout time.Duration // default 10 s
	WriteTimeout     time.Duration // default 10 s
	// HelloTimeout is how long to wait for the hello after the upgrade (clock time, default 10 s).
	HelloTimeout time.Duration
}

// PutPath registers a PUT-able path. Current, when set, returns the path's present state; it
// is published at start, on every connect and after each successful PUT, because the server
// routes a PUT only to a client that has published the path. Returning nil skips publishing.
type PutPath struct {
	Path    string
	Handle  sk.PutHandler
	Current func() any // an sk.Sourced publishes the state under its source
}

// MetaStatus counts declared and reconciled metadata.
type MetaStatus struct {
	Declared   int `json:"declared"`
	Reconciled int `json:"reconciled"`
}

// InStatus counts inbound traffic.
type InStatus struct {
	Subs     int    `json:"subs"`
	Frames   uint64 `json:"frames"`
	Received uint64 `json:"received"`
	Oversize uint64 `json:"oversize"`
	Bad      uint64 `json:"bad"`
	Dropped  uint64 `json:"dropped"`
}

// PutStatus counts outbound PUTs (and inbound ones answered).
type PutStatus struct {
	Pending  int    `json:"pending"`
	OK       uint64 `json:"ok"`
	Failed   uint64 `json:"failed"`
	Inbound  uint64 `json:"inbound"`
	Answered uint64 `json:"answered"`
}

// Status is the `ws` object of GET /sk/status and the data of the sk_ws event.
type Status struct {
	Connected     bool       `json:"connected"`
	State         string     `json:"state"`
	Sent          uint64     `json:"sent"`
	Buffered      int        `json:"buffered"`
	BufferedBytes int        `json:"buffered_bytes"`
	Draining      bool       `json:"draining"` // a backlog is going out at sk.drain_per_s
	Dropped       uint64     `json:"dropped"`
	NextRetryS    int        `json:"next_retry_s"`
	Reconnects    uint64     `json:"reconnects"`
	LastError     string     `json:"last_error,omitempty"`
	Meta          MetaStatus `json:"meta"`
	In            InStatus   `json:"in"`
	Put           PutStatus  `json:"put"`
}

// Stream states reported in Status.State.
const (
	StateStopped      = "stopped"      // before Start or after Close
	StateNoTarget     = "no_target"    // no server chosen
	StateDisabled     = "disabled"     // sk.ws_enabled false
	StateNetworkDown  = "network_down" // the device has no network
	StateUnauthorized = "unauthorized" // 401/403 on connect; waiting for a new target or token
	StateCertError    = "cert_error"   // the certificate check refused the server; waiting
	StateConnecting   = "connecting"   // dialing or waiting for the hello
	StateBackoff      = "backoff"      // waiting for the next attempt
	StateConnected    = "connected"    // hello consumed
)
