package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"devhost/abi"
	"devhost/host/sk"
)

// Dormancy (ABI 1.4, dormant): a plugin whose work is off asks to be closed until one of the
// conditions of its abi.Wake holds. Its compiled code, decoded module and linear memory go
// back to the OS; its namespace stays registered (so its configuration is served, validated
// and stored as before), its routes stay routed, and the request, the config write, the
// button press or the WiFi change that wakes it starts a fresh instance (dev_init) with no
// setting lost. The record keeps the namespace's descriptor and the conditions, so a reboot
// registers the namespace and stays dormant without starting the plugin at all while no
// condition holds.

// dormantRecord is what a dormant plugin's record keeps across reboots.
type dormantRecord struct {
	Namespace json.RawMessage `json:"namespace,omitempty"` // the descriptor it registered
	Wake      abi.Wake        `json:"wake"`
}

// errDormant ends runOnce when the instance was closed at its own request.
var errDormant = errors.New("dormant")

// fnDormant is the dormant host function: the wake conditions, or an empty input that
// withdraws an earlier request of the instance.
func fnDormant(s *session, st []uint64) int32 {
	if p32(st, 1) == 0 {
		s.dormant = nil
		return 0
	}
	w, rc := decodeArg(s, st, abi.DecodeWake)
	if rc != 0 {
		return rc
	}
	opts := s.p.m.opts
	switch {
	case w.Button && !s.caps[abi.CapButton], w.WiFiUnconfigured && !s.caps[abi.CapWiFiProv]:
		return int32(abi.ErrPermission)
	case w.Button && opts.Button == nil, w.WiFiUnconfigured && opts.WiFi == nil:
		return int32(abi.ErrUnavailable)
	}
	if len(w.Config) > 0 {
		vals, ok := s.p.configMap()
		if !ok {
			return int32(abi.ErrState)
		}
		for k := range w.Config {
			if _, ok := vals[k]; !ok {
				return int32(abi.ErrInvalid)
			}
		}
	}
	if s.p.wokenBy(w) {
		// It would wake at once: an instance closed and started again and again.
		return int32(abi.ErrState)
	}
	s.dormant = &w
	return 0
}

// configMap is the namespace's effective values by key; false while none is registered.
func (p *plugin) configMap() (map[string]json.RawMessage, bool) {
	b, ok := p.configValues()
	if !ok {
		return nil, false
	}
	var vals map[string]json.RawMessage
	if json.Unmarshal(b, &vals) != nil {
		return nil, false
	}
	return vals, true
}

// wokenBy reports whether a condition of w holds now: a configuration value or the WiFi
// station. Presses and requests wake through the pending events.
func (p *plugin) wokenBy(w abi.Wake) bool {
	if len(w.Config) > 0 {
		vals, ok := p.configMap()
		if !ok || w.ConfigWakes(vals) {
			return true
		}
	}
	if wf := p.m.opts.WiFi; w.WiFiUnconfigured && wf != nil && !wf.Status().Configured {
		return true
	}
	return false
}

// requestLinger is how long an instance that asked to be dormant stays after a request it
// answered: a page that polls a dormant plugin's route would otherwise load it again for
// every poll (a whole load each time), and one that stops polling lets it sleep again.
const requestLinger = time.Minute

// startDozing reports whether the instance asked to be dormant and is idle: nothing queued
// for it, nothing waiting for it to wake, no deferred PUT open, no request in the last
// requestLinger. When it is, the plugin is dozing from then on: what holdForWake takes
// waits for the next instance instead of going to this one, which is about to close
// (holdForWake pushes under the same lock, so an event is either in the inbox seen empty
// here or in pending). When only the linger keeps it, wait is what is left of it.
func (p *plugin) startDozing(s *session) (ok bool, wait time.Duration) {
	if s.dormant == nil {
		return false, 0
	}
	if !s.lastRequest.IsZero() {
		if left := requestLinger - p.m.clk.Since(s.lastRequest); left > 0 {
			return false, left
		}
	}
	s.putMu.Lock()
	deferred := len(s.putDeferred)
	s.putMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if deferred > 0 || len(p.pending) > 0 || !p.inbox.empty() {
		return false, 0
	}
	p.dozing = true
	return true, 0
}

// keepDormant records the instance's request (and the namespace it registered) so that a
// reboot keeps the plugin dormant; the record is written only when it changes.
func (p *plugin) keepDormant(w abi.Wake) {
	p.mu.Lock()
	rec := p.rec
	d := &dormantRecord{Namespace: p.nsDesc, Wake: w}
	same := rec.Dormant != nil && rec.Dormant.Wake.Equal(w) && string(rec.Dormant.Namespace) == string(d.Namespace)
	p.mu.Unlock()
	if same {
		return
	}
	rec.Dormant = d
	if err := p.m.part.writeRecord(rec); err != nil {
		// This boot stays correct; the next one starts the plugin, which asks again.
		p.log.Warn("record the dormant plugin", "err", err)
		return
	}
	p.mu.Lock()
	p.rec.Dormant = d
	p.mu.Unlock()
}

// stillAsleep clears the instance's request when an event about to be delivered is one of
// its wake conditions: a woken instance decides afresh.
func (p *plugin) stillAsleep(s *session, evs []queued, cfg bool) {
	w := s.dormant
	if w == nil {
		return
	}
	for _, e := range evs {
		switch {
		case e.kind == abi.EvButton && w.Button:
			s.dormant = nil
			return
		case e.kind == abi.EvWiFi && w.WiFiUnconfigured:
			var st abi.WiFiStatus
			if json.Unmarshal(e.payload, &st) == nil && !st.Configured {
				s.dormant = nil
				return
			}
		}
	}
	if cfg && len(w.Config) > 0 {
		if vals, ok := p.configMap(); !ok || w.ConfigWakes(vals) {
			s.dormant = nil
		}
	}
}

// restoreDormant takes up, at boot, the dormancy the record kept: the namespace registered
// from the kept descriptor and the routes routed, without starting the plugin. It reports
// false when the plugin must start (no dormancy kept, or the namespace refused).
func (p *plugin) restoreDormant() bool {
	p.mu.Lock()
	d := p.rec.Dormant
	want := p.rec.Wanted
	p.mu.Unlock()
	if d == nil || want != WantRunning {
		return false
	}
	if len(d.Namespace) > 0 {
		if err := p.registerNamespace(d.Namespace); err != nil {
			p.log.Warn("register the dormant plugin's namespace", "err", err)
			return false
		}
	}
	if err := p.route(p.hasGrant(abi.CapHTTP)); err != nil {
		p.log.Warn("route the dormant plugin", "err", err)
		return false
	}
	return true
}

func (p *plugin) hasGrant(c abi.Capability) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.rec.Granted {
		if g == string(c) {
			return true
		}
	}
	return false
}

// doze waits, dormant, until a wake condition holds (nil) or a command comes. It watches
// the button and the station for the conditions that name them; a press is kept for the
// instance it wakes. The compiled module was released before: nothing of the plugin but its
// records stays in memory.
func (p *plugin) doze(ctx context.Context) *command {
	p.mu.Lock()
	var w abi.Wake
	if p.rec.Dormant != nil {
		w = p.rec.Dormant.Wake
	}
	p.dozing = true
	p.mu.Unlock()
	if bt := p.m.opts.Button; w.Button && bt != nil {
		p.carryButton(bt)
	}
	if wf := p.m.opts.WiFi; w.WiFiUnconfigured && wf != nil {
		cancel := wf.Watch(func(st abi.WiFiStatus) {
			if !st.Configured {
				p.signalWake()
			}
		})
		defer cancel()
	}
	p.setState(StateDormant, "")
	for {
		p.mu.Lock()
		woken := len(p.pending) > 0
		p.mu.Unlock()
		if woken || p.wokenBy(w) {
			return nil
		}
		select {
		case <-ctx.Done():
			p.dropButtonCarry()
			return nil
		case <-p.wake:
		case cmd := <-p.ctl:
			p.dropButtonCarry()
			return &cmd
		}
	}
}

// carryButton watches the button for a dormant plugin: a press waits in pending for the
// instance it wakes (holdForWake), and the watch stays while that instance loads.
func (p *plugin) carryButton(bt Button) {
	p.mu.Lock()
	has := p.btnCarry != nil
	p.mu.Unlock()
	if has {
		return
	}
	c := bt.Watch(func(seconds int) {
		p.holdForWake(queued{kind: abi.EvButton, payload: abi.AppendTimer(nil, uint32(max(seconds, 0)))})
	})
	p.mu.Lock()
	p.btnCarry = c
	p.mu.Unlock()
}

// takeButtonCarry hands the carried watch over; nil when there is none.
func (p *plugin) takeButtonCarry() func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.btnCarry
	p.btnCarry = nil
	return c
}

// dropButtonCarry ends the carried watch, if any.
func (p *plugin) dropButtonCarry() {
	if c := p.takeButtonCarry(); c != nil {
		c()
	}
}

// signalWake has doze look at the conditions again.
func (p *plugin) signalWake() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// holdForWake takes an event for a plugin that is dormant or waking up: it waits in pending
// for the next instance (and wakes the plugin). It reports false when the plugin is neither,
// after trying the running instance once more (it may have started meanwhile).
func (p *plugin) holdForWake(e queued) bool {
	p.mu.Lock()
	if !p.dozing {
		defer p.mu.Unlock()
		return p.inbox.push(p.gen.Load(), e)
	}
	p.pending = append(p.pending, e)
	p.mu.Unlock()
	p.signalWake()
	return true
}

// takePending hands what waited for the instance of generation gen over to its inbox; from
// now on events go to the instance directly.
func (p *plugin) takePending(gen uint64) {
	p.mu.Lock()
	pend := p.pending
	p.pending, p.dozing = nil, false
	p.mu.Unlock()
	for _, e := range pend {
		if !p.inbox.push(gen, e) {
			answerDropped(e)
		}
	}
}

// dropPending answers what waited for an instance that will not come (a failed load, a stop).
func (p *plugin) dropPending() {
	p.mu.Lock()
	pend := p.pending
	p.pending, p.dozing = nil, false
	p.mu.Unlock()
	for _, e := range pend {
		answerDropped(e)
	}
}

// answerDropped answers an event no instance will see: an HTTP request 503, a PUT failure.
func answerDropped(e queued) {
	if e.done != nil {
		e.done()
	}
	if e.http != nil {
		e.http.reply <- abi.HTTPResponse{ID: e.http.id, Status: http.StatusServiceUnavailable,
			Body: []byte(`{"error":"internal","message":"the plugin stopped"}`)}
	}
	if e.put != nil {
		e.put.reply(sk.PutFailure, "the plugin stopped")
	}
	if e.req != nil {
		e.req.reply <- nil
	}
}

// fallAsleep ends a dormant instance's supervision turn: the compiled module is released and
// the heap it held goes back to the OS at once (the scavenger would keep it for minutes),
// through the engine's reclaimer like a compilation's garbage, and waited for, so that the
// state says dormant only once the memory is back.
func (p *plugin) fallAsleep() {
	p.releaseCompiled()
	p.m.eng.reclaim.start()
	p.m.eng.reclaim.wait()
}
