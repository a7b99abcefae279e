// Package skdiscovery finds Signal K servers on the local network: it browses
// `_signalk-http._tcp` and `_signalk-https._tcp` by mDNS every sk.discover_s and at
// network-up, keeps up to 12 servers with their TXT records, and keeps the skip list of
// unreachable servers that server choice consults. It serves the GET /sk/servers document and
// reports after every pass (the `sk_servers` event).
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
//   - The skip list holds keys (a self URN, or host:port, or address:port) until a time; a
//     server matches by its self, host:port or any address:port. At most 32 keys are kept;
//     beyond that the one expiring first is forgotten.
//   - `roles` is the TXT value split at commas ("master, main" → ["master","main"]).
//   - The /sk/servers document is a JSON array sorted by self, scheme, host and port; each
//     entry has self, roles, swname, swvers, host (the SRV target without the trailing dot),
//     port, scheme, addresses, instance (the mDNS instance name), last_seen_s (seconds since
//     the last sighting) and skipped_s (seconds of skip left, only while skipped).
//   - The change callback runs after every pass that queried the network, changed or not, as
//     the spec's `sk_servers` event wants.
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
	SkipDuration  = 5 * time.Minute // how long an unreachable discovered server is skipped
	DefaultWindow = 3 * time.Second
	ServiceHTTP   = "_signalk-http._tcp"
	ServiceHTTPS  = "_signalk-https._tcp"
	missLimit     = 3 // the pass that misses an entry for the third time in a row drops it
	maxSkips      = 32
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
	// SkippedUntil is when the skip ends; zero when not skipped.
	SkippedUntil time.Time
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

// keys are the skip-list keys that match the server.
func (s Server) keys() []string {
	out := []string{s.HostPort()}
	if s.Self != "" {
		out = append(out, s.Self)
	}
	for _, a := range s.Addrs {
		out = append(out, netip.AddrPortFrom(a, uint16(s.Port)).String())
	}
	return out
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
	skips   map[string]time.Time
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
		skips:   map[string]time.Time{},
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

// Servers lists the known servers, sorted by self, scheme, host and port, with their skip
// state.
func (d *Discoverer) Servers() []Server {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.serversLocked()
}

func (d *Discoverer) serversLocked() []Server {
	now := d.clock.Now()
	d.pruneSkipsLocked(now)
	out := make([]Server, 0, len(d.entries))
	for _, e := range d.entries {
		s := e.srv
		s.Roles = slices.Clone(s.Roles)
		s.Addrs = slices.Clone(s.Addrs)
		s.SkippedUntil = d.skippedUntilLocked(s)
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

// Skip skips a server (named by its self URN, host:port or address:port) until the time;
// server choice passes over a skipped server. A time in the past clears the key.
func (d *Discoverer) Skip(key string, until time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	d.pruneSkipsLocked(now)
	if !until.After(now) {
		delete(d.skips, key)
		return
	}
	if _, ok := d.skips[key]; !ok && len(d.skips) >= maxSkips {
		var first string
		for k, t := range d.skips {
			if first == "" || t.Before(d.skips[first]) || t.Equal(d.skips[first]) && k < first {
				first = k
			}
		}
		delete(d.skips, first)
	}
	d.skips[key] = until
}

// Skipped reports until when a key (self, host:port or address:port) is skipped.
func (d *Discoverer) Skipped(key string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pruneSkipsLocked(d.clock.Now())
	t, ok := d.skips[key]
	return t, ok
}

func (d *Discoverer) pruneSkipsLocked(now time.Time) {
	for k, t := range d.skips {
		if !t.After(now) {
			delete(d.skips, k)
		}
	}
}

func (d *Discoverer) skippedUntilLocked(s Server) time.Time {
	var until time.Time
	for _, k := range s.keys() {
		if t, ok := d.skips[k]; ok && t.After(until) {
			until = t
		}
	}
	return until
}

// ServerDoc is one entry of the GET /sk/servers document.
type ServerDoc struct {
	Self      string   `json:"self"`
	Roles     []string `json:"roles"`
	SWName    string   `json:"swname"`
	SWVers    string   `json:"swvers"`
	Host      string   `json:"host"`
	Port      int      `json:"port"`
	Scheme    string   `json:"scheme"`
	Addresses []string `json:"addresses"`
	Instance  string   `json:"instance"`
	LastSeenS int64    `json:"last_seen_s"`
	SkippedS  *int64   `json:"skipped_s,omitempty"`
}

// Document is the GET /sk/servers body: a JSON array (never null).
func (d *Discoverer) Document() []ServerDoc {
	return DocumentOf(d.Servers(), d.clock.Now())
}

// DocumentOf renders servers as the GET /sk/servers body at the given time.
func DocumentOf(servers []Server, now time.Time) []ServerDoc {
	out := make([]ServerDoc, 0, len(servers))
	for _, s := range servers {
		doc := ServerDoc{
			Self: s.Self, Roles: s.Roles, SWName: s.SWName, SWVers: s.SWVers,
			Host: s.Host, Port: s.Port, Scheme: s.Scheme, Instance: s.Instance,
			Addresses: make([]string, 0, len(s.Addrs)),
			LastSeenS: int64(now.Sub(s.LastSeen) / time.Second),
		}
		if doc.Roles == nil {
			doc.Roles = []string{}
		}
		for _, a := range s.Addrs {
			doc.Addresses = append(doc.Addresses, a.String())
		}
		if left := s.SkippedUntil.Sub(now); left > 0 {
			secs := int64((left + time.Second - 1) / time.Second)
			doc.SkippedS = &secs
		}
		out = append(out, doc)
	}
	return out
}

// String describes the server for logs.
func (s Server) String() string {
	return fmt.Sprintf("%s://%s (%s, self %q)", s.Scheme, s.HostPort(), s.Instance, s.Self)
}
