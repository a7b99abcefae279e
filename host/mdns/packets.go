package mdns

import (
	"net"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

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
