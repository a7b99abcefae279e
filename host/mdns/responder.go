package mdns

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Config configures a Responder.
type Config struct {
	// Hostname is the host label; the responder answers for `<Hostname>.local`.
	Hostname string
	// Interfaces names the interfaces to work on; empty means every interface that is up,
	// multicast-capable, not loopback and has an IPv4 address.
	Interfaces []string
	// Slots is the number of application service slots (1..16, 0 means 6).
	Slots  int
	Clock  clockwork.Clock
	Logger *slog.Logger
}

// Responder is the device's mDNS responder and browser.
type Responder struct {
	cfg   Config
	clock clockwork.Clock
	log   *slog.Logger
	open  func() (netLink, error)
	rand  func(max time.Duration) time.Duration

	mu        sync.Mutex
	closed    bool
	done      chan struct{}
	link      netLink
	ready     chan struct{} // closed while a link is up
	host      *entry
	services  []*entry
	sessions  map[*session]struct{}
	conflicts []time.Time
	wg        sync.WaitGroup
}

// New validates the configuration and returns a responder that is not on the network yet.
func New(cfg Config) (*Responder, error) {
	if err := ValidHostname(cfg.Hostname); err != nil {
		return nil, err
	}
	cfg.Slots = cmp.Or(cfg.Slots, DefaultSlots)
	if cfg.Slots < 1 || cfg.Slots > MaxSlots {
		return nil, fmt.Errorf("%w: %d service slots, must be 1..%d", ErrInvalid, cfg.Slots, MaxSlots)
	}
	cfg.Clock = cmp.Or(cfg.Clock, clockwork.NewRealClock())
	cfg.Logger = cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	r := &Responder{
		cfg:      cfg,
		clock:    cfg.Clock,
		log:      cfg.Logger,
		rand:     func(max time.Duration) time.Duration { return rand.N(max) },
		done:     make(chan struct{}),
		ready:    make(chan struct{}),
		host:     &entry{host: true, base: cfg.Hostname, n: 1},
		sessions: map[*session]struct{}{},
	}
	names := slices.Clone(cfg.Interfaces)
	r.open = func() (netLink, error) { return openRealLink(names, r.log) }
	return r, nil
}

// Start puts the responder on the network: it probes its names and announces them. Without
// a usable interface it returns ErrNoInterface; NetworkChanged tries again.
func (r *Responder) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.link != nil {
		return nil
	}
	return r.openLocked()
}

// NetworkChanged re-opens the network side (interfaces, addresses), then probes and
// announces every name again (RFC 6762 §8.3). Call it at network-up and when the route
// changes.
func (r *Responder) NetworkChanged() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.dropLinkLocked()
	return r.openLocked()
}

// NetworkDown takes the responder off the network without goodbyes (the link is gone);
// registrations are kept for the next NetworkChanged.
func (r *Responder) NetworkDown() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropLinkLocked()
}

func (r *Responder) openLocked() error {
	l, err := r.open()
	if err != nil {
		return err
	}
	r.link = l
	close(r.ready)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		l.Run(func(b []byte, src *net.UDPAddr, ifIndex int) { r.handle(l, b, src, ifIndex) })
	}()
	r.startProbe(r.host, r.probeDelay())
	for _, e := range r.services {
		r.startProbe(e, r.probeDelay())
	}
	for s := range r.sessions {
		s.kickLocked()
	}
	return nil
}

func (r *Responder) dropLinkLocked() {
	if r.link == nil {
		return
	}
	r.link.Close()
	r.link = nil
	r.ready = make(chan struct{})
	for _, e := range r.all() {
		r.stop(e)
		e.state = stateIdle
	}
}

// Close sends goodbyes for every announced record and leaves the network. Browses end.
func (r *Responder) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	if r.link != nil {
		for _, e := range r.services {
			r.goodbye(e)
		}
		r.goodbye(r.host)
		r.link.Close()
		r.link = nil
	}
	for _, e := range r.all() {
		r.stop(e)
	}
	close(r.done)
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

// WaitReady blocks until the responder is on the network, ctx ends (its error is returned)
// or the responder closes (ErrClosed).
func (r *Responder) WaitReady(ctx context.Context) error {
	r.mu.Lock()
	ready := r.ready
	r.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-r.done:
		return ErrClosed
	}
}

// Hostname is the host label in use: the configured one, or its renamed form after a
// conflict.
func (r *Responder) Hostname() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.host.label()
}
