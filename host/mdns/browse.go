package mdns

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// EventType says what happened to a browsed instance.
type EventType int

// Browse events.
const (
	Added   EventType = iota + 1 // resolved for the first time (or again after a removal)
	Updated                      // host, port, addresses or TXT changed
	Removed                      // goodbye received or records expired
)

func (t EventType) String() string {
	switch t {
	case Added:
		return "added"
	case Updated:
		return "updated"
	case Removed:
		return "removed"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is a browsed service instance. A Removed event repeats the last known state.
type Event struct {
	Type     EventType
	Instance string            // instance label, as advertised
	Service  string            // "_signalk-http._tcp", as browsed
	Host     string            // SRV target without the trailing dot, e.g. "boat.local"
	Port     int               // SRV port
	Addrs    []netip.Addr      // the host's A and AAAA addresses, sorted
	TXT      map[string]string // see ParseTXT
}

func (e Event) same(o Event) bool {
	return e.Instance == o.Instance && e.Host == o.Host && e.Port == o.Port &&
		slices.Equal(e.Addrs, o.Addrs) && maps.Equal(e.TXT, o.TXT)
}

// Browse timings: continuous querying of RFC 6762 §5.2.
const (
	firstQueryGap   = time.Second
	maxQueryGap     = time.Hour
	resolveDelay    = 250 * time.Millisecond // wait for additionals before asking for missing parts
	maxResolveTries = 3
	goodbyeGrace    = time.Second // a TTL-0 record is deleted one second later (RFC 6762 §10.1)
	maxCached       = 512         // records one browse keeps; the rest of a flood is ignored
	sessionBuffer   = 64
)

// session connects a running Browse to the responder's packet stream.
type session struct {
	in   chan *message
	kick chan struct{}
}

func (s *session) deliverLocked(m *message) {
	select {
	case s.in <- m:
	default: // a browse that cannot keep up loses packets, as the network would
	}
}

func (s *session) kickLocked() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Browse looks for instances of a service type ("_name._tcp") on the local link until ctx
// ends, calling fn (from the calling goroutine) for every change. It waits for the responder
// to be on the network first, and queries again whenever the network changes. It returns nil
// when ctx ends, ErrClosed when the responder closes.
func (r *Responder) Browse(ctx context.Context, service string, fn func(Event)) error {
	typ, proto, _ := strings.Cut(service, ".")
	if err := validType(typ); err != nil {
		return err
	}
	if proto != "_tcp" && proto != "_udp" {
		return fmt.Errorf("%w: service %q: proto must be _tcp or _udp", ErrInvalid, service)
	}
	s := &session{in: make(chan *message, sessionBuffer), kick: make(chan struct{}, 1)}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	r.sessions[s] = struct{}{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.sessions, s)
		r.mu.Unlock()
	}()
	if err := r.WaitReady(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	st := newBrowseState(service, r.clock.Now())
	emit := func(evs []Event) {
		for _, ev := range evs {
			fn(ev)
		}
	}
	for {
		now := r.clock.Now()
		qs, known, evs := st.due(now)
		if len(qs) > 0 {
			r.query(qs, known)
		}
		emit(evs)
		timer := r.clock.NewTimer(st.next(now).Sub(now))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-r.done:
			timer.Stop()
			return ErrClosed
		case m := <-s.in:
			emit(st.receive(r.clock.Now(), m))
		case <-s.kick:
			st.restart(r.clock.Now())
		case <-timer.Chan():
		}
		timer.Stop()
	}
}

type cached struct {
	rec       record
	received  time.Time
	expires   time.Time
	refreshes int
}

// refreshAt is when the record is asked for again: at 80 % and 90 % of its TTL.
func (c *cached) refreshAt() time.Time {
	ttl := time.Duration(c.rec.TTL) * time.Second
	return c.received.Add(ttl * time.Duration(80+10*c.refreshes) / 100)
}

// browseState is one browse's record cache and the instances it has reported, free of
// sockets and goroutines.
type browseState struct {
	service   string // as the caller named it
	fqdn      string // lower-case "_x._tcp.local."
	cache     map[string]*cached
	emitted   map[string]Event // by lower-case instance FQDN
	interval  time.Duration
	nextQuery time.Time
	resolveAt time.Time
	tries     map[string]int
}

func newBrowseState(service string, now time.Time) *browseState {
	return &browseState{
		service:   service,
		fqdn:      strings.ToLower(service) + "." + domain,
		cache:     map[string]*cached{},
		emitted:   map[string]Event{},
		interval:  firstQueryGap,
		nextQuery: now,
		tries:     map[string]int{},
	}
}

// restart queries at once and then at growing intervals again (the network changed).
func (st *browseState) restart(now time.Time) {
	st.nextQuery, st.interval = now, firstQueryGap
	clear(st.tries)
}

func (st *browseState) isInstance(name string) bool {
	_, rest := firstLabel(strings.ToLower(name))
	return rest == st.fqdn
}

func (st *browseState) hasSRVTarget(name string) bool {
	for _, c := range st.cache {
		if c.rec.Type == dnsmessage.TypeSRV && equalName(c.rec.Target, name) {
			return true
		}
	}
	return false
}

// relevant reports whether the browse needs the record.
func (st *browseState) relevant(rec record) bool {
	switch rec.Type {
	case dnsmessage.TypePTR:
		return equalName(rec.Name, st.fqdn) && st.isInstance(rec.Target)
	case dnsmessage.TypeSRV, dnsmessage.TypeTXT:
		return st.isInstance(rec.Name)
	case dnsmessage.TypeA, dnsmessage.TypeAAAA:
		return st.hasSRVTarget(rec.Name)
	}
	return false
}

var typeOrder = map[dnsmessage.Type]int{dnsmessage.TypePTR: 0, dnsmessage.TypeSRV: 1, dnsmessage.TypeTXT: 2}

// receive caches the response's records this browse needs and reports what changed.
func (st *browseState) receive(now time.Time, m *message) []Event {
	recs := append(slices.Clone(m.Answers), m.Additionals...)
	// Addresses only count for known SRV targets, so read the SRV records first.
	slices.SortStableFunc(recs, func(a, b record) int {
		oa, ok := typeOrder[a.Type]
		if !ok {
			oa = 3
		}
		ob, ok := typeOrder[b.Type]
		if !ok {
			ob = 3
		}
		return oa - ob
	})
	for _, rec := range recs {
		if st.relevant(rec) {
			st.insert(now, rec)
		}
	}
	return st.diff(now)
}

func (st *browseState) insert(now time.Time, rec record) {
	expires := now.Add(time.Duration(rec.TTL) * time.Second)
	if rec.TTL == 0 {
		expires = now.Add(goodbyeGrace)
	}
	if rec.Flush && rec.TTL > 0 {
		// RFC 6762 §10.2: other data under a unique name, older than a second, is stale.
		for _, c := range st.cache {
			if c.rec.Type == rec.Type && equalName(c.rec.Name, rec.Name) && !sameData(c.rec, rec) &&
				now.Sub(c.received) > time.Second && c.expires.After(now.Add(goodbyeGrace)) {
				c.expires = now.Add(goodbyeGrace)
			}
		}
	}
	key := rec.cacheKey()
	if c, ok := st.cache[key]; ok {
		c.rec, c.received, c.expires, c.refreshes = rec, now, expires, 0
		return
	}
	if len(st.cache) >= maxCached {
		return
	}
	st.cache[key] = &cached{rec: rec, received: now, expires: expires}
}

// due expires records, and returns the questions to send now (refreshes, the periodic
// query, resolution of incomplete instances) with the known answers to attach.
func (st *browseState) due(now time.Time) ([]question, []record, []Event) {
	expired := false
	for k, c := range st.cache {
		if !now.Before(c.expires) {
			delete(st.cache, k)
			expired = true
		}
	}
	var evs []Event
	if expired {
		evs = st.diff(now)
	}
	var qs []question
	ask := func(q question) {
		if !slices.ContainsFunc(qs, func(o question) bool { return o.Type == q.Type && equalName(o.Name, q.Name) }) {
			qs = append(qs, q)
		}
	}
	for _, c := range st.cache {
		if c.rec.TTL == 0 || c.refreshes >= 2 || !st.relevant(c.rec) {
			continue
		}
		if !now.Before(c.refreshAt()) {
			ask(question{Name: c.rec.Name, Type: c.rec.Type})
			c.refreshes++
		}
	}
	if !now.Before(st.nextQuery) {
		ask(question{Name: st.fqdn, Type: dnsmessage.TypePTR})
		st.nextQuery = now.Add(st.interval)
		st.interval = min(2*st.interval, maxQueryGap)
	}
	if !st.resolveAt.IsZero() && !now.Before(st.resolveAt) {
		st.resolveAt = time.Time{}
		for _, q := range st.resolveQuestions() {
			ask(q)
		}
	}
	var known []record
	if len(qs) > 0 {
		for _, c := range st.cache {
			left := c.expires.Sub(now)
			if c.rec.Type == dnsmessage.TypePTR && c.rec.TTL > 0 && left > time.Duration(c.rec.TTL)*time.Second/2 {
				k := c.rec
				k.TTL = uint32(left / time.Second)
				known = append(known, k)
			}
		}
		slices.SortFunc(known, func(a, b record) int { return strings.Compare(a.Target, b.Target) })
	}
	return qs, known, evs
}

// next is when due has work next.
func (st *browseState) next(now time.Time) time.Time {
	t := st.nextQuery
	earlier := func(c time.Time) {
		if c.Before(t) {
			t = c
		}
	}
	if !st.resolveAt.IsZero() {
		earlier(st.resolveAt)
	}
	for _, c := range st.cache {
		earlier(c.expires)
		if c.rec.TTL > 0 && c.refreshes < 2 && st.relevant(c.rec) {
			earlier(c.refreshAt())
		}
	}
	if t.Before(now) {
		return now
	}
	return t
}

func (st *browseState) find(name string, t dnsmessage.Type) []*cached {
	var out []*cached
	for _, c := range st.cache {
		if c.rec.Type == t && equalName(c.rec.Name, name) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *cached) int { return b.received.Compare(a.received) })
	return out
}

// instance is what the cache knows of one instance.
type instance struct {
	fqdn  string
	srv   *cached
	txt   *cached
	addrs []netip.Addr
}

func (st *browseState) instances() []instance {
	var out []instance
	seen := map[string]bool{}
	for _, c := range st.cache {
		if c.rec.Type != dnsmessage.TypePTR {
			continue
		}
		key := strings.ToLower(c.rec.Target)
		if seen[key] {
			continue
		}
		seen[key] = true
		in := instance{fqdn: c.rec.Target}
		if s := st.find(c.rec.Target, dnsmessage.TypeSRV); len(s) > 0 {
			in.srv = s[0]
		}
		if t := st.find(c.rec.Target, dnsmessage.TypeTXT); len(t) > 0 {
			in.txt = t[0]
		}
		if in.srv != nil {
			for _, t := range []dnsmessage.Type{dnsmessage.TypeA, dnsmessage.TypeAAAA} {
				for _, a := range st.find(in.srv.rec.Target, t) {
					in.addrs = append(in.addrs, a.rec.Addr)
				}
			}
			slices.SortFunc(in.addrs, netip.Addr.Compare)
			in.addrs = slices.Compact(in.addrs)
		}
		out = append(out, in)
	}
	return out
}

func (st *browseState) resolveQuestions() []question {
	var qs []question
	for _, in := range st.instances() {
		key := strings.ToLower(in.fqdn)
		if in.srv != nil && in.txt != nil && len(in.addrs) > 0 || st.tries[key] >= maxResolveTries {
			continue
		}
		st.tries[key]++
		if in.srv == nil {
			qs = append(qs, question{Name: in.fqdn, Type: dnsmessage.TypeSRV})
		} else if len(in.addrs) == 0 {
			qs = append(qs, question{Name: in.srv.rec.Target, Type: dnsmessage.TypeA})
		}
		if in.txt == nil {
			qs = append(qs, question{Name: in.fqdn, Type: dnsmessage.TypeTXT})
		}
	}
	return qs
}

// diff compares the resolved instances with those reported and returns the changes.
func (st *browseState) diff(now time.Time) []Event {
	views := map[string]Event{}
	incomplete := false
	for _, in := range st.instances() {
		key := strings.ToLower(in.fqdn)
		if in.srv == nil || in.txt == nil || len(in.addrs) == 0 {
			incomplete = incomplete || st.tries[key] < maxResolveTries
			continue
		}
		delete(st.tries, key)
		label, _ := firstLabel(in.fqdn)
		views[key] = Event{
			Instance: label,
			Service:  st.service,
			Host:     strings.TrimSuffix(in.srv.rec.Target, "."),
			Port:     int(in.srv.rec.Port),
			Addrs:    in.addrs,
			TXT:      ParseTXT(in.txt.rec.Text),
		}
	}
	if incomplete && st.resolveAt.IsZero() {
		st.resolveAt = now.Add(resolveDelay)
	}
	var gone []string
	for k := range st.emitted {
		if _, ok := views[k]; !ok {
			gone = append(gone, k)
		}
	}
	slices.Sort(gone)
	keys := append(slices.Sorted(maps.Keys(views)), gone...)
	var evs []Event
	for _, k := range keys {
		v, present := views[k]
		old, before := st.emitted[k]
		switch {
		case present && !before:
			v.Type = Added
		case present && !old.same(v):
			v.Type = Updated
		case !present && before:
			v = old
			v.Type = Removed
			delete(st.emitted, k)
			evs = append(evs, v)
			continue
		default:
			continue
		}
		st.emitted[k] = v
		evs = append(evs, v)
	}
	return evs
}
