package signalk

import (
	"context"
	"crypto/tls"
	"devhost/host/sk"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"time"
)

// Limits and timers of the spec (Signal K client behaviour, access token table, Limits row).
const (
	HTTPTimeout     = 6 * time.Second
	HTTPBodyCap     = 16 * 1024
	HTTPInFlight    = 2
	MaxServers      = 12
	SkipUnreachable = 5 * time.Minute

	ErrorBackoffMin = 10 * time.Second
	ErrorBackoffMax = 5 * time.Minute
	FlatRetry       = 60 * time.Second // 400 already requested, OPEN re-POST, cert_error
	PollFirst       = 5 * time.Second
	PollMax         = 60 * time.Second
	PollFactor      = 1.5
	RecheckPlain    = 5 * time.Second // plaintext 401 rule
)

// Errors of the Go API. They wrap nothing; compare with errors.Is.
var (
	// ErrInvalidState: the client is not started, or the stream is down for a PUT or flush.
	ErrInvalidState = errors.New("signalk: invalid state")
	// ErrNoServer: no Signal K server is chosen.
	ErrNoServer = errors.New("signalk: no server")
	// ErrTruncated: the server's answer was larger than the body cap; it was not parsed.
	ErrTruncated = errors.New("signalk: answer larger than 16 KiB")
)

// Server is one Signal K server: discovered (Source "discovered") or set by sk.server_host
// (Source "manual").
type Server struct {
	Self     string            `json:"self"`
	Host     string            `json:"host"`
	Port     int               `json:"port"`
	Scheme   string            `json:"scheme"` // http or https
	Roles    []string          `json:"roles"`
	SWName   string            `json:"swname"`
	SWVers   string            `json:"swvers"`
	TXT      map[string]string `json:"txt,omitempty"`
	LastSeen time.Time         `json:"-"`
	Source   string            `json:"source,omitempty"`
	// Guess marks a scheme that the unauthenticated probe could not establish.
	Guess bool `json:"guess,omitempty"`
}

// Addr is host:port.
func (s Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// TLS reports an https server.
func (s Server) TLS() bool { return s.Scheme == "https" }

func (s Server) base() string { return s.Scheme + "://" + s.Addr() }

func (s Server) hasRole(role string) bool {
	for _, r := range s.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// same reports whether two choices address the same server the same way.
func (s Server) same(o Server) bool {
	return s.Self == o.Self && s.Host == o.Host && s.Port == o.Port && s.Scheme == o.Scheme && s.Source == o.Source
}

// Discovery is the mDNS browser (host/skdiscovery): the servers of the last passes and a
// signal after every pass.
type Discovery interface {
	Servers() []Server
	Changed() <-chan struct{}
}

// TLS is the TLS trust component (host/sktls). Every method may be called from any goroutine.
type TLS interface {
	// DialTLSContext dials and handshakes under the device's trust mode.
	DialTLSContext(ctx context.Context, network, addr string) (net.Conn, error)
	// Proven is told about every HTTP status received over TLS (with the connection's state),
	// so a first-use capture can be committed.
	Proven(addr string, cs *tls.ConnectionState) error
	// IsCertError reports a call refused by the certificate check.
	IsCertError(err error) bool
	// Resolve picks the scheme of a server under sk.scheme (advertised: "http"/"https" from
	// discovery, "" for a manual host). guess is true when the probe got no answer.
	Resolve(ctx context.Context, host string, port int, advertised string) (scheme string, port2 int, guess bool, err error)
	// SetServer tells which server (host:port) is chosen now.
	SetServer(addr string)
}

// Target is where the delta stream should connect; a zero Host means nowhere.
type Target struct {
	Host    string
	Port    int
	TLS     bool
	DialTLS func(ctx context.Context, network, addr string) (net.Conn, error)
	// Token is the Bearer token; "" while the server runs without security (OPEN).
	Token string
	// Proven is called with the connection after the server answered the upgrade, so a
	// first-use TLS capture can be committed.
	Proven func(conn net.Conn)
}

// Stream is the delta stream (host/skstream) as this package drives it.
type Stream interface {
	// SetTarget points the stream at a server (zero Host: none); it must not block.
	SetTarget(t Target)
	// Status is the `ws` object of /sk/status (marshalled as JSON).
	Status() any
	Connected() bool
	Publish(values ...sk.Value) error
	// PublishContext is Publish for another context than vessels.self, one message per
	// context per batch (checked by the caller: abi.ValidContext).
	PublishContext(context string, values ...sk.Value) error
	// PublishSource is PublishContext (context "": vessels.self) with the values' own
	// source, one message per context and source per batch (checked by the caller:
	// abi.Source.Validate).
	PublishSource(src sk.Source, context string, values ...sk.Value) error
	// DeclareMeta declares a path's metadata; a period above zero adds `timeout` = 2.5 × period.
	DeclareMeta(path string, meta json.RawMessage, period time.Duration) error
	Subscribe(pattern string, fn func(sk.Delta)) (cancel func(), err error)
	// HandlePut routes PUTs for pattern to h; a non-nil current (exact paths only) reads the
	// path's state (nil: unknown), published at registration, on connect and after a PUT.
	HandlePut(pattern string, h sk.PutHandler, current func() any) (remove func(), err error)
	// Retry lifts a stop after a 401, 403 or certificate error; a live connection stays.
	Retry()
	Put(path string, value json.RawMessage, answer func(sk.PutAnswer)) error
	Flush(ctx context.Context) error
}
