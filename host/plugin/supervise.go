package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/abi"
	"devhost/host/api"
)

// supervise is the plugin's life: load and run an instance while it should run, restart it
// with backoff after a failure, disable it after too many, idle while stopped or disabled.
// It returns when ctx ends or the plugin is shut down for a replacement or removal.
func (p *plugin) supervise(ctx context.Context) {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	defer close(exited)
	var retry clockwork.Timer
	stopRetry := func() {
		if retry != nil {
			retry.Stop()
			retry = nil
		}
	}
	defer stopRetry()
	defer func() {
		p.unroute()
		p.dropPending()
	}()
	// dormant: the next turn waits for a wake condition instead of starting an instance.
	dormant := p.restoreDormant()
	for {
		w, halted := p.wanted()
		if halted {
			p.drainCommands()
			return
		}
		if w == WantRunning && retry == nil {
			var cmd *command
			var err error
			if dormant {
				dormant = false
				cmd = p.doze(ctx)
			} else if cmd, err = p.runOnce(ctx); errors.Is(err, errDormant) {
				dormant, err = true, nil
				p.fallAsleep()
			}
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				p.dropPending()
				retry = p.failed(err)
			}
			if cmd != nil {
				if cmd.start {
					stopRetry()
				}
				if w, _ := p.wanted(); w != WantRunning {
					dormant = false
					p.unroute()
					p.dropPending()
					p.idle(w)
				}
				close(cmd.done)
			}
			continue
		}
		if dormant { // stopped or disabled while dormant: nothing wakes it any more
			dormant = false
			p.unroute()
			p.dropPending()
		}
		p.idle(w)
		var retryC <-chan time.Time
		if retry != nil {
			retryC = retry.Chan()
		}
		select {
		case <-ctx.Done():
			return
		case <-retryC:
			retry = nil
			p.restarts.Add(1)
		case cmd := <-p.ctl:
			if w, _ := p.wanted(); cmd.start || w != WantRunning {
				stopRetry()
				if w != WantRunning {
					p.idle(w)
				}
			}
			close(cmd.done)
		}
	}
}

func (p *plugin) drainCommands() {
	for {
		select {
		case cmd := <-p.ctl:
			close(cmd.done)
		default:
			return
		}
	}
}

// idle shows the state of a plugin that is not running.
func (p *plugin) idle(w Wanted) {
	p.mu.Lock()
	st := p.state
	want := st
	switch w {
	case WantStopped:
		want = StateStopped
	case WantDisabled:
		want = StateDisabled
	}
	p.mu.Unlock()
	if want != st {
		p.setState(want, "")
	}
}

// failed applies the restart policy after a failure and returns the timer of the restart, nil
// when the plugin is disabled. The timer exists before the state is shown, so whoever sees
// "failed" can count on the restart being scheduled.
func (p *plugin) failed(err error) clockwork.Timer {
	p.errs.Add(1)
	p.log.Error("plugin failed", "err", err)
	p.mu.Lock()
	p.failures++
	n := p.failures
	p.mu.Unlock()
	if isPermanent(err) || n >= p.m.opts.MaxFailures {
		reason := err.Error()
		if !isPermanent(err) {
			reason = fmt.Sprintf("%d failures in a row, last: %s", n, err)
		}
		p.disable(reason)
		return nil
	}
	d := backoff(p.m.opts.BackoffMin, p.m.opts.BackoffMax, n)
	t := p.m.clk.NewTimer(d)
	p.mu.Lock()
	p.nextRetry = p.m.clk.Now().Add(d)
	p.mu.Unlock()
	p.setState(StateFailed, err.Error())
	return t
}

// backoff is the delay before the restart that follows the n-th consecutive failure.
func backoff(lo, hi time.Duration, n int) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// disable keeps the plugin off, across reboots, until an operator starts it.
func (p *plugin) disable(reason string) {
	p.mu.Lock()
	rec := p.rec
	rec.Wanted, rec.Reason = WantDisabled, reason
	p.mu.Unlock()
	if err := p.m.part.writeRecord(rec); err != nil {
		p.log.Error("record the disabled plugin", "err", err)
	}
	p.mu.Lock()
	p.rec = rec
	p.mu.Unlock()
	p.log.Error("plugin disabled", "reason", reason)
	p.setState(StateDisabled, reason)
}

// compile returns the plugin's compiled module, kept across restarts of one bundle.
func (p *plugin) compile(ctx context.Context, bd *abi.Bundle) (*compiled, error) {
	p.mu.Lock()
	cp := p.compiled
	p.mu.Unlock()
	if cp != nil {
		return cp, nil
	}
	cp, key, err := p.m.eng.acquire(ctx, bd.Module)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.compiled, p.compiledKey = cp, key
	p.mu.Unlock()
	return cp, nil
}

func (p *plugin) releaseCompiled() {
	p.mu.Lock()
	key := p.compiledKey
	p.compiled, p.compiledKey = nil, ""
	p.mu.Unlock()
	if key != "" {
		p.m.eng.release(key)
	}
}

// runOnce loads, starts and runs one instance. It returns the command that ended it in
// order, or the failure that ended it.
func (p *plugin) runOnce(ctx context.Context) (*command, error) {
	defer p.dropButtonCarry() // a load that ends before init
	// Loading (compile, start, init) runs under lctx, which a stop or a removal cancels:
	// whatever phase the plugin is in, they win. The check and the cancel func are set under
	// one lock with the wanted state, so a stop either sees the cancel func or is seen here.
	lctx, lcancel := context.WithCancel(ctx)
	defer lcancel()
	p.mu.Lock()
	if p.rec.Wanted != WantRunning || p.halted {
		p.mu.Unlock()
		return p.takeCommand(ctx), nil
	}
	p.loadCancel = lcancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.loadCancel = nil
		p.mu.Unlock()
	}()
	// stopped tells a load cut short by a stop (not by the shutdown, which supervise sees).
	stopped := func() bool { return lctx.Err() != nil && ctx.Err() == nil }

	p.setState(StateLoading, "")
	if h := p.m.loadHook; h != nil {
		h(p.id)
	}
	b, err := p.m.part.readBundle(p.id)
	if err != nil {
		return nil, permanent(err)
	}
	bd, err := p.m.verify(b)
	if err != nil {
		return nil, permanent(err)
	}
	p.mu.Lock()
	rec := p.rec
	p.mu.Unlock()
	cp, err := p.compile(lctx, bd)
	if stopped() {
		return p.takeCommand(ctx), nil
	}
	if err != nil {
		return nil, err
	}
	if h := p.m.startHook; h != nil {
		h(p.id)
	}
	inst, err := p.m.eng.instantiate(lctx, cp, p.m.wallTime, p.m.opts.CallTimeout)
	if stopped() {
		if inst != nil {
			inst.close()
		}
		return p.takeCommand(ctx), nil
	}
	if err != nil {
		return nil, err
	}
	gen := p.inbox.open()
	p.gen.Store(gen)
	s := newSession(p, inst, gen, rec.Granted)
	p.mu.Lock()
	p.sess = s
	p.mu.Unlock()
	p.takePending(gen)
	asleep := false // closed at its own request: the routes stay
	defer func() {
		if !asleep {
			p.unroute()
		}
		p.gen.Store(0)
		inst.close()
		s.end()
		for _, e := range p.inbox.close() {
			answerDropped(e)
		}
		p.mu.Lock()
		p.sess = nil
		p.mu.Unlock()
	}()
	// sleep closes an idle instance that asked to be dormant. When a recent request keeps
	// it, linger looks again once that has passed.
	var linger clockwork.Timer
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	sleep := func() bool {
		ok, wait := p.startDozing(s)
		if !ok {
			if wait > 0 {
				if linger != nil {
					linger.Stop()
				}
				linger = p.m.clk.NewTimer(wait)
			}
			return false
		}
		p.stopInstance(s)
		p.keepDormant(*s.dormant)
		asleep = true
		return true
	}

	err = p.init(lctx, s)
	// A press while the instance loaded has reached it; from now on only its own watch counts.
	p.dropButtonCarry()
	if err != nil {
		if s.aborted() || stopped() {
			return p.takeCommand(ctx), nil
		}
		return nil, err
	}
	if err := p.route(s.caps[abi.CapHTTP]); err != nil {
		return nil, permanent(fmt.Errorf("routes: %w", err))
	}
	if sleep() {
		return nil, errDormant
	}
	// The stability timer exists before the state shows running (see failed).
	stable := p.m.clk.NewTimer(p.m.opts.StableAfter)
	defer stable.Stop()
	p.mu.Lock()
	p.nextRetry = time.Time{}
	p.mu.Unlock()
	p.setState(StateRunning, "")
	p.log.Info("plugin running", "version", bd.Manifest.Version)
	for {
		select {
		case <-ctx.Done():
			p.stopInstance(s)
			return nil, nil
		case cmd := <-p.ctl:
			if w, halted := p.wanted(); cmd.start && w == WantRunning && !halted {
				close(cmd.done) // already running
				continue
			}
			p.stopInstance(s)
			return &cmd, nil
		case <-p.inbox.due:
			p.inbox.flushHeld() // the gathered CAN frames go with the next iteration's kick
		case <-p.inbox.kick:
			if err := p.deliver(ctx, s); err != nil {
				if s.aborted() || ctx.Err() != nil {
					continue // the stop command (or the shutdown) is waiting
				}
				return nil, err
			}
			if sleep() {
				return nil, errDormant
			}
		case <-timerChan(linger):
			linger = nil
			if sleep() {
				return nil, errDormant
			}
		case <-stable.Chan():
			p.mu.Lock()
			p.failures = 0
			p.mu.Unlock()
		}
	}
}

// init runs dev_init with the init record.
func (p *plugin) init(ctx context.Context, s *session) error {
	in := abi.Init{ABI: abi.Version, ABIMinor: abi.Minor, ID: p.id, Version: p.man.Version,
		DeviceID: p.m.opts.DeviceID}
	for c := range s.caps {
		in.Capabilities = append(in.Capabilities, c)
	}
	sortCaps(in.Capabilities)
	if vals, ok := p.configValues(); ok {
		in.Config = json.RawMessage(vals)
	}
	payload, err := abi.MarshalInit(in)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	rc, err := s.call(ctx, abi.ExportInit, abi.AppendEvent(nil, abi.EvInit, payload), false)
	if err != nil {
		return err
	}
	if rc != 0 {
		// The plugin's own reason (the SDK logs why OnInit failed at error level) says more
		// than the code; without one, say where a reason would be.
		if s.errLine != "" {
			return errors.New(s.errLine)
		}
		return fmt.Errorf("%s returned %d and logged no reason (a plugin granted log can say why)", abi.ExportInit, int32(rc))
	}
	return nil
}

func sortCaps(cs []abi.Capability) {
	order := map[abi.Capability]int{}
	for i, c := range abi.Capabilities {
		order[c] = i
	}
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && order[cs[j]] < order[cs[j-1]]; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

// maxKeptBatch bounds the batch array a session keeps for its next call: a rare large batch
// (a body of an HTTP request, a burst of deltas) is not held for the instance's life.
const maxKeptBatch = 64 << 10

// deliver hands the next batch to the instance.
func (p *plugin) deliver(ctx context.Context, s *session) error {
	evs, cfg := p.inbox.take()
	p.stillAsleep(s, evs, cfg)
	size := 0
	for _, e := range evs {
		size += abi.EventHeader + len(e.payload)
	}
	// The batch of the call before is free again (the plugin read it during that call): a
	// busy bus reuses its array instead of allocating (and faulting in) one every call.
	batch := s.batchBuf[:0]
	if cap(batch) < size {
		batch = make([]byte, 0, size) // one allocation instead of one per doubling
	}
	for _, e := range evs {
		batch = abi.AppendEvent(batch, e.kind, e.payload)
		if e.http != nil {
			s.httpOpen[e.http.id] = e.http
		}
		if e.http != nil || e.req != nil {
			s.lastRequest = p.m.clk.Now()
		}
		if e.put != nil {
			s.openPut(e.put)
		}
		if e.req != nil {
			s.periph.open[e.req.id] = e.req
		}
	}
	if cfg && s.caps[abi.CapConfig] {
		if vals, ok := p.configValues(); ok {
			batch = abi.AppendEvent(batch, abi.EvConfig, vals)
		}
	}
	if len(batch) == 0 {
		return nil
	}
	rc, err := s.call(ctx, abi.ExportEvent, batch, false)
	if cap(batch) <= maxKeptBatch {
		s.batchBuf = batch[:0]
	}
	for _, e := range evs {
		if e.done != nil {
			e.done()
		}
	}
	if err != nil {
		return err
	}
	if rc != 0 {
		p.errs.Add(1)
		msg := fmt.Sprintf("%s returned %d", abi.ExportEvent, int32(rc))
		if s.errLine != "" {
			msg = s.errLine
		}
		p.mu.Lock()
		p.lastErr = msg
		p.mu.Unlock()
	}
	return nil
}

// stopInstance delivers the stop record; host functions work during it. Its outcome is
// logged, never counted as a failure: the instance is going away anyway.
func (p *plugin) stopInstance(s *session) {
	if s.stopped.Load() {
		return // cut off during a call: nothing more runs in it
	}
	// The supervisor's context may be over (shutdown): the stop call gets its own.
	_, err := s.call(context.Background(), abi.ExportEvent, abi.AppendEvent(nil, abi.EvStop, nil), true)
	if err != nil {
		p.log.Warn("stop event", "err", err)
	}
}

// route puts the manifest's endpoints on the router, when http is granted. They stay there
// while the plugin is dormant (a request wakes it) and go when it stops or fails.
func (p *plugin) route(granted bool) error {
	rt := p.m.opts.Router
	p.mu.Lock()
	done := p.routed
	p.mu.Unlock()
	if done || rt == nil || !granted || len(p.man.Routes) == 0 {
		return nil
	}
	out := make([]api.Route, 0, len(p.man.Routes))
	for _, r := range p.man.Routes {
		out = append(out, api.Route{Method: r.Method, Path: r.Path, Public: r.Public, Handler: p.serveRoute(r)})
	}
	if err := rt.AddApp(p.id, out...); err != nil {
		return err
	}
	p.mu.Lock()
	p.routed = true
	p.mu.Unlock()
	return nil
}

// unroute takes the endpoints off the router.
func (p *plugin) unroute() {
	p.mu.Lock()
	done := p.routed
	p.routed = false
	p.mu.Unlock()
	if done {
		p.m.opts.Router.RemoveApp(p.id)
	}
}

// maxHTTPWait bounds how long a request to a plugin endpoint waits for its answer.
const maxHTTPWait = 30 * time.Second

// serveRoute hands a request to the plugin and writes its http_reply.
func (p *plugin) serveRoute(rt abi.Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, err := api.ReadBody(r)
		if err != nil {
			api.WriteErr(w, err)
			return
		}
		if len(body) > abi.MaxHTTPRequest {
			api.WriteError(w, http.StatusRequestEntityTooLarge, api.CodeTooLarge)
			return
		}
		req := &httpReq{id: p.nextHTTP.Add(1), reply: make(chan abi.HTTPResponse, 1)}
		path := r.URL.Path
		if len(path) >= len("/api/v1") && path[:len("/api/v1")] == "/api/v1" {
			path = path[len("/api/v1"):]
		}
		payload := abi.AppendHTTPRequest(nil, abi.HTTPRequest{ID: req.id, Method: r.Method, Route: rt.Path,
			Path: path, Query: r.URL.RawQuery, Body: body})
		if !p.holdForWake(queued{kind: abi.EvHTTP, payload: payload, http: req}) {
			api.WriteErr(w, api.Errorf(http.StatusServiceUnavailable, api.CodeInternal, "plugin %s is not taking requests", p.id))
			return
		}
		select {
		case resp := <-req.reply:
			ct := resp.ContentType
			if ct == "" {
				ct = "application/json"
			}
			w.Header().Set("Content-Type", ct)
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(int(resp.Status))
			_, _ = w.Write(resp.Body)
		case <-r.Context().Done():
		case <-p.m.clk.After(maxHTTPWait):
			api.WriteErr(w, api.Errorf(http.StatusInternalServerError, api.CodeInternal, "plugin %s did not answer", p.id))
		}
	}
}

// takeCommand returns the stop that cut a start short (or nil at shutdown).
func (p *plugin) takeCommand(ctx context.Context) *command {
	select {
	case cmd := <-p.ctl:
		return &cmd
	case <-ctx.Done():
		return nil
	}
}

// timerChan is t's channel, or nil (never ready) when there is no timer.
func timerChan(t clockwork.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.Chan()
}
