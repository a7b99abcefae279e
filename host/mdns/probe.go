package mdns

import (
	"slices"
	"time"

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
