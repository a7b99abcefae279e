package signalk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"devhost/host/sk"
	"devhost/host/skdiscovery"
	"devhost/host/skstream"
	"devhost/host/sktls"
)

// TLSFrom adapts the TLS trust manager to the client.
func TLSFrom(m *sktls.Manager) TLS { return tlsAdapter{m} }

type tlsAdapter struct{ *sktls.Manager }

func (a tlsAdapter) IsCertError(err error) bool { return sktls.IsCertError(err) }

func (a tlsAdapter) Resolve(ctx context.Context, host string, port int, advertised string) (string, int, bool, error) {
	e, err := a.Manager.Resolve(ctx, host, port, advertised)
	if err != nil {
		return "", 0, false, err
	}
	return e.Scheme, e.Port, e.Guess, nil
}

// StreamFrom adapts the delta stream to the client. Wire the stream's callbacks to the
// client: OnStatus → StreamStatus, OnUnauthorized → StreamUnauthorized, OnCertError →
// StreamCertError, HTTP → Client.HTTP.
func StreamFrom(s *skstream.Stream) Stream { return streamAdapter{s} }

type streamAdapter struct{ s *skstream.Stream }

// flushDefault bounds a Flush whose context has no deadline.
const flushDefault = 30 * time.Second

func (a streamAdapter) SetTarget(t Target) {
	if t.Host == "" {
		a.s.SetTarget(nil)
		return
	}
	scheme := "ws"
	if t.TLS {
		scheme = "wss"
	}
	a.s.SetTarget(&skstream.Target{URL: scheme + "://" + net.JoinHostPort(t.Host, strconv.Itoa(t.Port)),
		DialTLS: t.DialTLS, Token: t.Token, Proven: t.Proven})
}

func (a streamAdapter) Status() any     { return a.s.Status() }
func (a streamAdapter) Connected() bool { return a.s.Connected() }

func (a streamAdapter) Publish(values ...sk.Value) error {
	return mapStreamErr(a.s.PublishValues(values...))
}

func (a streamAdapter) PublishContext(context string, values ...sk.Value) error {
	return mapStreamErr(a.s.PublishContext(context, values...))
}

func (a streamAdapter) PublishSource(src sk.Source, context string, values ...sk.Value) error {
	return mapStreamErr(a.s.PublishSource(src, context, values...))
}

func (a streamAdapter) DeclareMeta(path string, meta json.RawMessage, period time.Duration) error {
	return mapStreamErr(a.s.DeclareMeta(path, meta, period))
}

func (a streamAdapter) Retry() { a.s.Retry() }

// Subscribe keeps the meta entries the stream delivers from the client's subscribers.
func (a streamAdapter) Subscribe(pattern string, fn func(sk.Delta)) (func(), error) {
	cancel, err := a.s.Subscribe(pattern, func(d sk.Delta) {
		if d.Meta {
			return
		}
		fn(d)
	})
	return cancel, mapStreamErr(err)
}

// HandlePut hands current to the stream, which publishes the state at registration, on every
// connect and after each successful PUT. A nil current must stay a nil func: the stream refuses
// a getter on a family.
func (a streamAdapter) HandlePut(pattern string, h sk.PutHandler, current func() any) (func(), error) {
	cancel, err := a.s.HandlePut(skstream.PutPath{Path: pattern, Handle: h, Current: current})
	return cancel, mapStreamErr(err)
}

func (a streamAdapter) Put(path string, value json.RawMessage, answer func(sk.PutAnswer)) error {
	_, err := a.s.Put(path, value, answer)
	return mapStreamErr(err)
}

func (a streamAdapter) Flush(ctx context.Context) error {
	d := flushDefault
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
	}
	return mapStreamErr(a.s.Flush(ctx, d))
}

// ErrTimeout: a flush deadline passed with data still waiting.
var ErrTimeout = errors.New("signalk: timeout")

func mapStreamErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, skstream.ErrInvalidState):
		return fmt.Errorf("%w: %w", ErrInvalidState, err)
	case errors.Is(err, skstream.ErrLimit):
		return fmt.Errorf("%w: %w", ErrBusy, err)
	case errors.Is(err, skstream.ErrTimeout):
		return fmt.Errorf("%w: %w", ErrTimeout, err)
	case errors.Is(err, skstream.ErrInvalidArgument):
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return err
}

// DiscoveryAdapter adapts the mDNS discoverer. Create it first, give Notify to the
// discoverer as its OnChange, then set D.
type DiscoveryAdapter struct {
	D  *skdiscovery.Discoverer
	ch chan struct{}
}

// NewDiscoveryAdapter makes an adapter whose D is set later.
func NewDiscoveryAdapter() *DiscoveryAdapter {
	return &DiscoveryAdapter{ch: make(chan struct{}, 1)}
}

// Notify is the discoverer's OnChange.
func (a *DiscoveryAdapter) Notify([]skdiscovery.Server) {
	select {
	case a.ch <- struct{}{}:
	default:
	}
}

// Changed signals after every pass.
func (a *DiscoveryAdapter) Changed() <-chan struct{} { return a.ch }

// Servers lists the discovered servers; the host is the advertised address (IPv4 first), so
// no .local name has to be resolved to connect.
func (a *DiscoveryAdapter) Servers() []Server {
	if a.D == nil {
		return nil
	}
	list := a.D.Servers()
	out := make([]Server, 0, len(list))
	for _, s := range list {
		host, ps, err := net.SplitHostPort(s.Dial())
		port, _ := strconv.Atoi(ps)
		if err != nil || port <= 0 {
			continue
		}
		out = append(out, Server{Self: s.Self, Host: host, Port: port, Scheme: s.Scheme, Roles: s.Roles,
			SWName: s.SWName, SWVers: s.SWVers, TXT: s.TXT, LastSeen: s.LastSeen})
	}
	return out
}
