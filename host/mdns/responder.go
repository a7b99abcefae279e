package mdns

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"golang.org/x/net/dns/dnsmessage"
)

// Timings of RFC 6762 §8.
const (
	probeWait      = 250 * time.Millisecond // before the first probe (random up to), and between probes
	probeCount     = 3
	announceCount  = 2
	announceGap    = time.Second
	lostTieWait    = time.Second      // after losing a simultaneous-probe tie-break
	conflictWindow = 10 * time.Second // 15 conflicts in this window slow probing down
	conflictLimit  = 15
	conflictPause  = 5 * time.Second
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

type entryState int

const (
	stateIdle entryState = iota // no network
	stateProbing
	stateAnnouncing
	stateAnnounced
)

func (s entryState) String() string {
	return [...]string{"idle", "probing", "announcing", "announced"}[s]
}

// entry is one name the responder owns: the host or a service instance.
type entry struct {
	host    bool
	key     serviceKey
	svc     Service // Instance holds the base name
	app     bool
	base    string
	n       int // 1 for the base name, then the rename counter
	prevTXT []string
	state   entryState
	step    int
	timer   clockwork.Timer
	gen     uint64
	removed bool
	// lastMcast is when the entry's records last went out by multicast.
	lastMcast time.Time
	// sent: the records under the current name were announced and not said goodbye to, so
	// other hosts may hold them (also while the name is probed again after a network
	// change).
	sent bool
}

func (e *entry) label() string { return renamed(e.base, e.n, e.host) }

func (e *entry) active() bool { return e.state == stateAnnouncing || e.state == stateAnnounced }

func (e *entry) typeFQDN() string { return e.svc.Type + "." + e.svc.Proto + "." + domain }

func (e *entry) instanceFQDN() string { return e.label() + "." + e.typeFQDN() }

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
	if cfg.Slots == 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.Slots < 1 || cfg.Slots > MaxSlots {
		return nil, fmt.Errorf("%w: %d service slots, must be 1..%d", ErrInvalid, cfg.Slots, MaxSlots)
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
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

// SetHostname changes the host label: goodbye for the old name, then probing and announcing
// the new one (and the services, whose SRV records point at it). Services registered without
// an instance name follow the host name: goodbye for the old instance, then probing and
// announcing under the new one.
func (r *Responder) SetHostname(h string) error {
	if err := ValidHostname(h); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if h == r.host.base && r.host.n == 1 {
		return nil
	}
	r.goodbye(r.host)
	if r.link != nil {
		r.link.StopHost()
	}
	r.host.base, r.host.n = h, 1
	if r.link != nil {
		r.startProbe(r.host, r.probeDelay())
	}
	for _, e := range r.services {
		if e.key.instance != "" {
			continue
		}
		r.goodbye(e)
		r.stop(e)
		e.base, e.n, e.svc.Instance = h, 1, h
		e.state = stateIdle
		if r.link != nil {
			r.startProbe(e, r.probeDelay())
		}
	}
	return nil
}

// Register adds one of the device's own services (not counted in the application slots).
func (r *Responder) Register(s Service) error { return r.register(s, false) }

// RegisterApp adds an application service, which takes one of the Slots; with all slots used
// it returns ErrNoSlot.
func (r *Responder) RegisterApp(s Service) error { return r.register(s, true) }

func (r *Responder) register(s Service, app bool) error {
	if err := s.validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	key := keyOf(s.Instance, s.Type, s.Proto)
	base := s.Instance
	if base == "" {
		base = r.host.base
	}
	apps := 0
	for _, e := range r.services {
		if e.key == key || strings.EqualFold(e.base, base) && strings.EqualFold(e.typeFQDN(), s.Type+"."+s.Proto+"."+domain) {
			return fmt.Errorf("%w: %s.%s.%s", ErrExists, base, s.Type, s.Proto)
		}
		if e.app {
			apps++
		}
	}
	if app && apps >= r.cfg.Slots {
		return fmt.Errorf("%w (%d in use)", ErrNoSlot, apps)
	}
	svc := s
	svc.Instance = base
	svc.TXT = slices.Clone(s.TXT)
	e := &entry{key: key, svc: svc, app: app, base: base, n: 1}
	r.services = append(r.services, e)
	if r.link != nil {
		r.startProbe(e, r.probeDelay())
	}
	return nil
}

// Unregister removes a service, named as it was registered, and sends its goodbye.
func (r *Responder) Unregister(instance, typ, proto string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	i := slices.IndexFunc(r.services, func(e *entry) bool { return e.key == keyOf(instance, typ, proto) })
	if i < 0 {
		return fmt.Errorf("%w: %q %s.%s", ErrNotFound, instance, typ, proto)
	}
	e := r.services[i]
	r.goodbye(e)
	r.stop(e)
	e.removed = true
	r.services = slices.Delete(r.services, i, i+1)
	return nil
}

// UpdateTXT replaces a service's TXT items and announces them again (RFC 6762 §8.4).
func (r *Responder) UpdateTXT(instance, typ, proto string, txt []string) error {
	if err := validTXT(txt); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	i := slices.IndexFunc(r.services, func(e *entry) bool { return e.key == keyOf(instance, typ, proto) })
	if i < 0 {
		return fmt.Errorf("%w: %q %s.%s", ErrNotFound, instance, typ, proto)
	}
	e := r.services[i]
	if slices.Equal(e.svc.TXT, txt) {
		return nil
	}
	e.prevTXT = e.svc.TXT
	e.svc.TXT = slices.Clone(txt)
	if e.active() {
		r.startAnnounce(e, 0)
	}
	return nil
}

// ServiceStatus is a registered service as it is advertised now.
type ServiceStatus struct {
	Service           // Instance is the name in use
	Registered string `json:"registered"` // the instance as registered ("" for the hostname)
	App        bool   `json:"app"`
	State      string `json:"state"` // idle, probing, announcing, announced
}

// Services lists the registered services in registration order.
func (r *Responder) Services() []ServiceStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ServiceStatus, 0, len(r.services))
	for _, e := range r.services {
		svc := e.svc
		svc.Instance = e.label()
		svc.TXT = slices.Clone(e.svc.TXT)
		out = append(out, ServiceStatus{Service: svc, Registered: e.key.instance, App: e.app, State: e.state.String()})
	}
	return out
}

func (r *Responder) all() []*entry {
	return append([]*entry{r.host}, r.services...)
}

func (r *Responder) stop(e *entry) {
	e.gen++
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
}

func (r *Responder) schedule(e *entry, d time.Duration) {
	gen := e.gen
	e.timer = r.clock.AfterFunc(d, func() { r.tick(e, gen) })
}

func (r *Responder) probeDelay() time.Duration {
	now := r.clock.Now()
	r.conflicts = slices.DeleteFunc(r.conflicts, func(t time.Time) bool { return now.Sub(t) > conflictWindow })
	if len(r.conflicts) >= conflictLimit {
		return conflictPause
	}
	return r.rand(probeWait)
}

func (r *Responder) startProbe(e *entry, delay time.Duration) {
	r.stop(e)
	e.state, e.step = stateProbing, 0
	r.schedule(e, delay)
}

func (r *Responder) startAnnounce(e *entry, delay time.Duration) {
	r.stop(e)
	e.state, e.step = stateAnnouncing, 0
	r.schedule(e, delay)
}

// tick advances one name's probe or announcement sequence.
func (r *Responder) tick(e *entry, gen uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.gen != gen || e.removed || r.closed || r.link == nil {
		return
	}
	switch e.state {
	case stateProbing:
		if e.step < probeCount {
			r.sendProbe(e)
			e.step++
			r.schedule(e, probeWait)
			return
		}
		e.state, e.step = stateAnnouncing, 0
		if e.host {
			if err := r.link.StartHost(e.label()); err != nil {
				r.log.Warn("mdns: host name answerer did not start", "host", e.label(), "err", err)
			}
			// Services point their SRV at the host: (re)announce those past probing with it.
			for _, s := range r.services {
				if s.active() {
					r.startAnnounce(s, 0)
				}
			}
		}
		fallthrough
	case stateAnnouncing:
		if !e.host && !r.host.active() {
			// The SRV names the host: wait until the host is announced, which restarts this
			// announcement.
			return
		}
		r.sendAnnouncement(e)
		e.step++
		if e.step < announceCount {
			r.schedule(e, announceGap)
		} else {
			e.state = stateAnnounced
			r.log.Debug("mdns: announced", "name", r.fqdn(e))
		}
	}
}

func (r *Responder) fqdn(e *entry) string {
	if e.host {
		return e.label() + "." + domain
	}
	return e.instanceFQDN()
}

// hostAAAA are the host's AAAA records on one interface: its IPv6 addresses, answered to
// AAAA questions (over IPv4 mDNS too) and said goodbye to with the A records.
func (r *Responder) hostAAAA(f iface, ttl uint32) []record {
	name := r.host.label() + "." + domain
	out := make([]record, 0, len(f.Addrs6))
	for _, a := range f.Addrs6 {
		out = append(out, record{Name: name, Type: dnsmessage.TypeAAAA, Flush: true, TTL: ttl, Addr: a})
	}
	return out
}

// hostRecords are the host's A records on one interface.
func (r *Responder) hostRecords(f iface, ttl uint32) []record {
	name := r.host.label() + "." + domain
	out := make([]record, 0, len(f.Addrs))
	for _, p := range f.Addrs {
		out = append(out, record{Name: name, Type: dnsmessage.TypeA, Flush: true, TTL: ttl, Addr: p.Addr()})
	}
	return out
}

func (r *Responder) ptrRecord(e *entry, ttl uint32) record {
	return record{Name: e.typeFQDN(), Type: dnsmessage.TypePTR, TTL: ttl, Target: e.instanceFQDN()}
}

func (r *Responder) srvRecord(e *entry, ttl uint32) record {
	return record{Name: e.instanceFQDN(), Type: dnsmessage.TypeSRV, Flush: true, TTL: ttl,
		Port: uint16(e.svc.Port), Target: r.host.label() + "." + domain}
}

func (r *Responder) txtRecord(e *entry, text []string, ttl uint32) record {
	return record{Name: e.instanceFQDN(), Type: dnsmessage.TypeTXT, Flush: true, TTL: ttl, Text: slices.Clone(text)}
}

// uniqueRecords are the records a probe proposes for the name (RFC 6762 §8.1).
func (r *Responder) uniqueRecords(e *entry, f iface) []record {
	if e.host {
		return r.hostRecords(f, ttlHost)
	}
	return []record{r.srvRecord(e, ttlHost), r.txtRecord(e, e.svc.TXT, ttlOther)}
}

// own reports whether a record seen on the network is one this responder sends for e.
func (r *Responder) own(e *entry, rec record) bool {
	if e.host {
		for _, f := range r.link.Ifaces() {
			for _, mine := range r.hostRecords(f, 0) {
				if sameData(mine, rec) {
					return true
				}
			}
			// The AAAA answers carry the interface's own addresses.
			if rec.Type == dnsmessage.TypeAAAA && slices.Contains(f.Addrs6, rec.Addr) {
				return true
			}
		}
		return false
	}
	if sameData(r.srvRecord(e, 0), rec) || sameData(r.txtRecord(e, e.svc.TXT, 0), rec) {
		return true
	}
	// A packet of ours still in flight when the TXT changed.
	return e.prevTXT != nil && sameData(r.txtRecord(e, e.prevTXT, 0), rec)
}

func (r *Responder) sendProbe(e *entry) {
	for _, f := range r.link.Ifaces() {
		m := message{
			Questions:   []question{{Name: r.fqdn(e), Type: dnsmessage.TypeALL}},
			Authorities: r.uniqueRecords(e, f),
		}
		r.sendMessage(f, m, nil)
	}
}

func (r *Responder) sendAnnouncement(e *entry) {
	e.lastMcast = r.clock.Now()
	e.sent = true
	for _, f := range r.link.Ifaces() {
		if e.host {
			r.sendRecords(f, message{Response: true}, r.hostRecords(f, ttlHost), nil, nil)
			continue
		}
		answers := []record{r.ptrRecord(e, ttlOther), r.srvRecord(e, ttlHost), r.txtRecord(e, e.svc.TXT, ttlOther)}
		var extra []record
		if r.host.active() {
			extra = r.hostRecords(f, ttlHost)
		}
		r.sendRecords(f, message{Response: true}, answers, extra, nil)
	}
}

// goodbye sends the name's records with TTL 0 (RFC 6762 §10.1) if they were announced, also
// when the name is being probed again after a network change.
func (r *Responder) goodbye(e *entry) {
	if r.link == nil || !e.active() && !e.sent {
		return
	}
	for _, f := range r.link.Ifaces() {
		var recs []record
		if e.host {
			recs = append(r.hostRecords(f, 0), r.hostAAAA(f, 0)...)
		} else {
			recs = []record{r.ptrRecord(e, 0), r.srvRecord(e, 0), r.txtRecord(e, e.svc.TXT, 0)}
		}
		r.sendRecords(f, message{Response: true}, recs, nil, nil)
	}
	e.state, e.sent = stateIdle, false
}

func (r *Responder) sendMessage(f iface, m message, dst *net.UDPAddr) {
	b, err := m.pack()
	if err != nil {
		r.log.Warn("mdns: cannot build a packet", "err", err)
		return
	}
	r.link.Send(b, f.Index, dst)
}

// sendRecords sends answers (and as many additionals as fit) in as few packets as the
// interface's payload limit allows.
func (r *Responder) sendRecords(f iface, base message, answers, additionals []record, dst *net.UDPAddr) {
	limit := f.payloadLimit()
	size := func(m message) int {
		b, err := m.pack()
		if err != nil {
			return limit + 1
		}
		return len(b)
	}
	cur := base
	for _, a := range answers {
		next := cur
		next.Answers = append(slices.Clone(cur.Answers), a)
		if len(cur.Answers) > 0 && size(next) > limit {
			r.sendMessage(f, cur, dst)
			next = base
			next.Answers = []record{a}
		}
		cur = next
	}
	for _, a := range additionals {
		next := cur
		next.Additionals = append(slices.Clone(cur.Additionals), a)
		if size(next) <= limit {
			cur = next
		}
	}
	if len(cur.Answers) > 0 {
		r.sendMessage(f, cur, dst)
	}
}

// handle processes one packet from the link.
func (r *Responder) handle(l netLink, b []byte, src *net.UDPAddr, ifIndex int) {
	m, err := parseMessage(b)
	if err != nil {
		r.log.Debug("mdns: packet dropped", "src", src, "err", err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.link != l || r.closed {
		return
	}
	i := slices.IndexFunc(l.Ifaces(), func(f iface) bool { return f.Index == ifIndex })
	if i < 0 {
		return
	}
	f := l.Ifaces()[i]
	if m.Response {
		// RFC 6762 §11: a response from any other port is not an mDNS response.
		if src.Port != mdnsPort {
			return
		}
		r.checkConflicts(m)
		for s := range r.sessions {
			s.deliverLocked(&m)
		}
		return
	}
	if len(m.Authorities) > 0 {
		r.tieBreak(m, f)
	}
	r.answer(m, src, f)
}

// checkConflicts looks for someone else's records under one of our names (RFC 6762 §8.1, §9).
func (r *Responder) checkConflicts(m message) {
	recs := append(slices.Clone(m.Answers), m.Additionals...)
	for _, e := range r.all() {
		if e.state == stateIdle {
			continue
		}
		name := r.fqdn(e)
		for _, rec := range recs {
			if rec.TTL == 0 || !equalName(rec.Name, name) || r.own(e, rec) {
				continue
			}
			if e.state != stateProbing && !r.contested(e, rec) {
				continue
			}
			r.conflict(e, rec)
			break
		}
	}
}

// contested reports whether a record conflicts with an announced name: the same name and
// type as a unique record of ours with other data.
func (r *Responder) contested(e *entry, rec record) bool {
	if e.host {
		return rec.Type == dnsmessage.TypeA
	}
	return rec.Type == dnsmessage.TypeSRV || rec.Type == dnsmessage.TypeTXT
}

func (r *Responder) conflict(e *entry, rec record) {
	r.conflicts = append(r.conflicts, r.clock.Now())
	if e.host {
		r.link.StopHost()
	}
	if e.state == stateProbing {
		old := e.label()
		e.n++
		e.sent = false // the old name is the other host's now
		r.log.Warn("mdns: name in use on the network, renaming", "name", old, "new", e.label(), "record", rec.Type)
	} else {
		// RFC 6762 §9: probe the name again; its other owner will defend it if still there.
		r.log.Warn("mdns: conflicting record seen, probing again", "name", r.fqdn(e), "record", rec.Type)
	}
	r.startProbe(e, r.probeDelay())
}

// tieBreak handles another host probing a name we are probing (RFC 6762 §8.2).
func (r *Responder) tieBreak(m message, f iface) {
	for _, e := range r.all() {
		if e.state != stateProbing {
			continue
		}
		name := r.fqdn(e)
		var theirs []record
		for _, rec := range m.Authorities {
			if equalName(rec.Name, name) {
				theirs = append(theirs, rec)
			}
		}
		if len(theirs) == 0 {
			continue
		}
		if compareProbes(r.uniqueRecords(e, f), theirs) < 0 {
			r.log.Debug("mdns: lost a probe tie-break, probing again", "name", name)
			r.startProbe(e, lostTieWait)
		}
	}
}

// answer answers the questions of a query for the names this package owns. A questions for
// the host are the plumbing's.
func (r *Responder) answer(m message, src *net.UDPAddr, f iface) {
	legacy := src.Port != mdnsPort
	now := r.clock.Now()
	var mAns, mAdd, uAns, uAdd []record
	var mEnts []*entry
	for _, q := range m.Questions {
		ans, add, ents := r.answersFor(q, f)
		ans = slices.DeleteFunc(ans, func(a record) bool { return knownAnswer(a, m.Answers) })
		if len(ans) == 0 {
			continue
		}
		// RFC 6762 §5.4: a QU question is answered by multicast when the records have not
		// been multicast for a quarter of their TTL. It also reaches a querier whose unicast
		// replies the kernel hands to another socket sharing port 5353 on its host.
		stale := slices.ContainsFunc(ents, func(e *entry) bool { return now.Sub(e.lastMcast) > ttlHost*time.Second/4 })
		if legacy || q.QU && !stale {
			uAns, uAdd = append(uAns, ans...), append(uAdd, add...)
		} else {
			mAns, mAdd = append(mAns, ans...), append(mAdd, add...)
			mEnts = append(mEnts, ents...)
		}
	}
	if len(mAns) > 0 {
		for _, e := range mEnts {
			e.lastMcast = now
		}
		r.sendRecords(f, message{Response: true}, dedupe(mAns, nil), dedupe(mAdd, mAns), nil)
	}
	if len(uAns) == 0 {
		return
	}
	if !f.onLink(addrOf(src)) {
		r.log.Debug("mdns: not answering an off-link unicast querier", "src", src)
		return
	}
	base := message{Response: true}
	if legacy {
		// RFC 6762 §6.7: a conventional DNS answer: ID and question echoed, short TTLs.
		base.ID, base.Questions = m.ID, m.Questions
		capTTL := func(in []record) []record {
			for i := range in {
				in[i].TTL, in[i].Flush = min(in[i].TTL, ttlLegacy), false
			}
			return in
		}
		uAns, uAdd = capTTL(uAns), capTTL(uAdd)
	}
	r.sendRecords(f, base, dedupe(uAns, nil), dedupe(uAdd, uAns), src)
}

func (r *Responder) answersFor(q question, f iface) (ans, add []record, ents []*entry) {
	want := func(t dnsmessage.Type) bool { return q.Type == t || q.Type == dnsmessage.TypeALL }
	if equalName(q.Name, enumerationFQN) && want(dnsmessage.TypePTR) {
		seen := map[string]bool{}
		for _, e := range r.services {
			t := strings.ToLower(e.typeFQDN())
			if e.active() && !seen[t] {
				seen[t] = true
				ans = append(ans, record{Name: enumerationFQN, Type: dnsmessage.TypePTR, TTL: ttlOther, Target: e.typeFQDN()})
			}
		}
		return ans, nil, nil
	}
	var hostA []record
	if r.host.active() {
		hostA = r.hostRecords(f, ttlHost)
	}
	for _, e := range r.services {
		if !e.active() {
			continue
		}
		n := len(ans)
		if equalName(q.Name, e.typeFQDN()) && want(dnsmessage.TypePTR) {
			ans = append(ans, r.ptrRecord(e, ttlOther))
			add = append(add, r.srvRecord(e, ttlHost), r.txtRecord(e, e.svc.TXT, ttlOther))
			add = append(add, hostA...)
		}
		if equalName(q.Name, e.instanceFQDN()) {
			if want(dnsmessage.TypeSRV) {
				ans = append(ans, r.srvRecord(e, ttlHost))
				add = append(add, hostA...)
			}
			if want(dnsmessage.TypeTXT) {
				ans = append(ans, r.txtRecord(e, e.svc.TXT, ttlOther))
			}
		}
		if len(ans) > n {
			ents = append(ents, e)
		}
	}
	if r.host.active() && equalName(q.Name, r.host.label()+"."+domain) {
		// A questions are the plumbing's; AAAA ones this package's (the plumbing's IPv4
		// socket finds no IPv6 address to answer with).
		n := len(ans)
		if q.Type == dnsmessage.TypeALL {
			ans = append(ans, hostA...)
		}
		if want(dnsmessage.TypeAAAA) {
			ans = append(ans, r.hostAAAA(f, ttlHost)...)
		}
		if len(ans) > n {
			ents = append(ents, r.host)
		}
	}
	return ans, add, ents
}

// knownAnswer implements known-answer suppression (RFC 6762 §7.1): the querier already holds
// the record with at least half its TTL left.
func knownAnswer(a record, known []record) bool {
	for _, k := range known {
		if sameData(a, k) && k.TTL >= a.TTL/2 {
			return true
		}
	}
	return false
}

// dedupe drops repeated records and those already in exclude.
func dedupe(in, exclude []record) []record {
	var out []record
	for _, rec := range in {
		dup := func(o record) bool { return sameData(o, rec) }
		if slices.ContainsFunc(out, dup) || slices.ContainsFunc(exclude, dup) {
			continue
		}
		out = append(out, rec)
	}
	return out
}

// query sends questions (with known answers, as many as fit) on every interface.
func (r *Responder) query(qs []question, known []record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.link == nil || r.closed {
		return
	}
	for _, f := range r.link.Ifaces() {
		m := message{Questions: qs, Answers: known}
		for {
			b, err := m.pack()
			if err == nil && len(b) <= f.payloadLimit() {
				r.link.Send(b, f.Index, nil)
				break
			}
			if len(m.Answers) == 0 {
				r.log.Warn("mdns: cannot build a query", "err", err)
				break
			}
			m.Answers = m.Answers[:len(m.Answers)/2]
		}
	}
}
