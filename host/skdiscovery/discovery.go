// Package skdiscovery finds Signal K servers on the local network: it browses
// `_signalk-http._tcp` and `_signalk-https._tcp` by mDNS every sk.discover_s and at
// network-up, keeps up to 12 servers with their TXT records, and reports the list after every
// pass. It owns only the list: server choice, the five-minute skip of unreachable servers, the
// GET /sk/servers document and the `sk_servers` event belong to host/signalk, which reads
// Servers and listens to Config.OnChange.
//
// A pass waits for the mDNS responder to be on the network, then listens for Window (3 s by
// default) while the browser queries; a pass without a link queries nothing and changes
// nothing.
//
// Choices where the spec is silent:
//   - One entry per advertisement: a server advertising both service types is listed twice,
//     once per scheme (the scheme comes from the service type: http or https).
//   - "Entries missing from one query survive two intervals": an entry missing from a pass
//     stays through the next two intervals and is dropped by the third consecutive pass that
//     misses it. A pass without a link is not counted. An entry whose goodbye (TTL 0) arrives
//     during a pass is dropped at once: the server said it left.
//   - With 12 entries, a newcomer takes the place of the entry missing longest (oldest last
//     sighting); when every entry was seen in this pass, the newcomer is not listed.
//   - `roles` is the TXT value split at commas ("master, main" → ["master","main"]).
//   - Servers are listed sorted by self, scheme, host, port and instance.
//   - The change callback runs after every pass that queried the network, changed or not, so
//     the `sk_servers` event follows every pass as the spec wants.
package skdiscovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/mdns"
)

// Limits and service types of the spec.
const (
	MaxServers    = 12
	DefaultWindow = 3 * time.Second
	ServiceHTTP   = "_signalk-http._tcp"
	ServiceHTTPS  = "_signalk-https._tcp"
	missLimit     = 3 // the pass that misses an entry for the third time in a row drops it
)

// Browser is the mDNS side discovery needs; *mdns.Responder is one.
type Browser interface {
	WaitReady(ctx context.Context) error
	Browse(ctx context.Context, service string, fn func(mdns.Event)) error
}

// Config configures a Discoverer.
type Config struct {
	Browser Browser
	// Interval is sk.discover_s, read before every wait; zero or less disables the periodic
	// passes (network-up still runs one).
	Interval func() time.Duration
	// LinkUp reports whether the device has a network route.
	LinkUp func() bool
	// Window is how long a pass listens (DefaultWindow when zero).
	Window time.Duration
	// OnChange is called after every pass that queried, with the servers then known.
	OnChange func([]Server)
	Clock    clockwork.Clock
	Logger   *slog.Logger
}

// Server is one discovered advertisement.
type Server struct {
	Self      string
	Roles     []string
	SWName    string
	SWVers    string
	Scheme    string // "http" or "https", from the service type
	Host      string // SRV target, e.g. "boat.local"
	Port      int
	Addrs     []netip.Addr
	Instance  string
	TXT       map[string]string
	FirstSeen time.Time
	LastSeen  time.Time
}

// HasRole reports whether the server advertises the role (e.g. "master").
func (s Server) HasRole(role string) bool {
	return slices.ContainsFunc(s.Roles, func(r string) bool { return strings.EqualFold(r, role) })
}

// HostPort is the advertised host and port, "boat.local:3000".
func (s Server) HostPort() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// Dial is the address to connect to: the first IPv4 address (else the first address) with
// the port, or HostPort when no address is known.
func (s Server) Dial() string {
	for _, a := range s.Addrs {
		if a.Is4() {
			return netip.AddrPortFrom(a, uint16(s.Port)).String()
		}
	}
	if len(s.Addrs) > 0 {
		return netip.AddrPortFrom(s.Addrs[0], uint16(s.Port)).String()
	}
	return s.HostPort()
}

type entry struct {
	srv    Server
	misses int
}

// Discoverer runs the discovery passes and keeps their results.
type Discoverer struct {
	cfg   Config
	clock clockwork.Clock
	log   *slog.Logger
	up    chan struct{}

	mu      sync.Mutex
	entries map[string]*entry // by scheme and lower-case instance
}

// New checks the configuration.
func New(cfg Config) (*Discoverer, error) {
	if cfg.Browser == nil || cfg.Interval == nil || cfg.LinkUp == nil {
		return nil, errors.New("skdiscovery: Browser, Interval and LinkUp are required")
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Discoverer{
		cfg:     cfg,
		clock:   cfg.Clock,
		log:     cfg.Logger,
		up:      make(chan struct{}, 1),
		entries: map[string]*entry{},
	}, nil
}

// NetworkUp asks for a pass now (the network came up). It never blocks; calls during a pass
// give one more pass after it.
func (d *Discoverer) NetworkUp() {
	select {
	case d.up <- struct{}{}:
	default:
	}
}

// Run makes a pass at once, then one every Interval and one after every NetworkUp, until
// ctx ends.
func (d *Discoverer) Run(ctx context.Context) error {
	for {
		d.pass(ctx)
		var tick <-chan time.Time
		var timer clockwork.Timer
		if iv := d.cfg.Interval(); iv > 0 {
			timer = d.clock.NewTimer(iv)
			tick = timer.Chan()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case <-tick:
		case <-d.up:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// sighting is what a pass learned about one advertisement.
type sighting struct {
	ev     mdns.Event
	scheme string
	at     time.Time
	gone   bool
}

func (d *Discoverer) pass(ctx context.Context) {
	if !d.cfg.LinkUp() {
		d.log.Debug("skdiscovery: no link, pass skipped")
		return
	}
	if err := d.cfg.Browser.WaitReady(ctx); err != nil {
		return
	}
	pctx, cancel := clockwork.WithTimeout(ctx, d.clock, d.cfg.Window)
	defer cancel()
	var mu sync.Mutex
	seen := map[string]*sighting{}
	var wg sync.WaitGroup
	for _, svc := range []struct{ name, scheme string }{{ServiceHTTP, "http"}, {ServiceHTTPS, "https"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := d.cfg.Browser.Browse(pctx, svc.name, func(ev mdns.Event) {
				mu.Lock()
				defer mu.Unlock()
				seen[key(svc.scheme, ev.Instance)] = &sighting{ev: ev, scheme: svc.scheme, at: d.clock.Now(), gone: ev.Type == mdns.Removed}
			})
			if err != nil {
				d.log.Warn("skdiscovery: browse failed", "service", svc.name, "err", err)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	servers := d.apply(seen)
	d.log.Debug("skdiscovery: pass done", "servers", len(servers))
	if d.cfg.OnChange != nil {
		d.cfg.OnChange(servers)
	}
}

func key(scheme, instance string) string { return scheme + "|" + strings.ToLower(instance) }

// apply merges one pass's sightings and returns the servers now known.
func (d *Discoverer) apply(seen map[string]*sighting) []Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, e := range d.entries {
		s, ok := seen[k]
		switch {
		case ok && s.gone:
			delete(d.entries, k)
		case ok:
			e.srv = serverFrom(s, e.srv.FirstSeen)
			e.misses = 0
		default:
			if e.misses++; e.misses >= missLimit {
				delete(d.entries, k)
			}
		}
	}
	var fresh []string
	for k, s := range seen {
		if _, known := d.entries[k]; !known && !s.gone {
			fresh = append(fresh, k)
		}
	}
	slices.Sort(fresh)
	for _, k := range fresh {
		if len(d.entries) >= MaxServers && !d.evictLocked() {
			d.log.Info("skdiscovery: server list full, not listing", "instance", seen[k].ev.Instance, "scheme", seen[k].scheme)
			continue
		}
		d.entries[k] = &entry{srv: serverFrom(seen[k], seen[k].at)}
	}
	return d.serversLocked()
}

// evictLocked drops the entry missing longest, if any entry is missing.
func (d *Discoverer) evictLocked() bool {
	var victim string
	for k, e := range d.entries {
		if e.misses == 0 {
			continue
		}
		if victim == "" || e.srv.LastSeen.Before(d.entries[victim].srv.LastSeen) ||
			e.srv.LastSeen.Equal(d.entries[victim].srv.LastSeen) && k < victim {
			victim = k
		}
	}
	if victim == "" {
		return false
	}
	delete(d.entries, victim)
	return true
}

func serverFrom(s *sighting, first time.Time) Server {
	txt := s.ev.TXT
	var roles []string
	for _, r := range strings.Split(txt["roles"], ",") {
		if r = strings.TrimSpace(r); r != "" {
			roles = append(roles, r)
		}
	}
	return Server{
		Self:      txt["self"],
		Roles:     roles,
		SWName:    txt["swname"],
		SWVers:    txt["swvers"],
		Scheme:    s.scheme,
		Host:      s.ev.Host,
		Port:      s.ev.Port,
		Addrs:     slices.Clone(s.ev.Addrs),
		Instance:  s.ev.Instance,
		TXT:       txt,
		FirstSeen: first,
		LastSeen:  s.at,
	}
}

// Servers lists the known servers, sorted by self, scheme, host, port and instance.
func (d *Discoverer) Servers() []Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.serversLocked()
}

func (d *Discoverer) serversLocked() []Server {
	out := make([]Server, 0, len(d.entries))
	for _, e := range d.entries {
		s := e.srv
		s.Roles = slices.Clone(s.Roles)
		s.Addrs = slices.Clone(s.Addrs)
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Server) int {
		return cmpFirst(strings.Compare(a.Self, b.Self), strings.Compare(a.Scheme, b.Scheme),
			strings.Compare(a.Host, b.Host), a.Port-b.Port, strings.Compare(a.Instance, b.Instance))
	})
	return out
}

func cmpFirst(cs ...int) int {
	for _, c := range cs {
		if c != 0 {
			return c
		}
	}
	return 0
}

// String describes the server for logs.
func (s Server) String() string {
	return fmt.Sprintf("%s://%s (%s, self %q)", s.Scheme, s.HostPort(), s.Instance, s.Self)
}
