package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/abi"
	"devhost/host/sk"
)

type sessionKey struct{}

// session is the host's side of one plugin instance: what the instance registered (timers,
// subscriptions, handlers, watches, the power hold), the requests it has been handed, and the
// batch of the export call in progress. Host functions run on the plugin's worker goroutine
// during an export call; producers on other goroutines reach the plugin only through its
// inbox.
type session struct {
	p    *plugin
	inst *instance
	gen  uint64

	caps    map[abi.Capability]bool // granted, fixed for the instance's life
	stopped atomic.Bool
	batch   []byte // the batch of the export call in progress, nil between calls
	// batchBuf is the array of the last event batch, reused for the next (deliver).
	batchBuf []byte
	// errLine is the last line the plugin logged at error level in the call in progress or
	// the last one: its own words for why it answered non-zero.
	errLine string
	pub     publisher            // sk_publish's decoding state
	ctxs    contextTable         // sk_publish_ctx's live contexts
	srcs    liveTable[sourceKey] // sk_publish_src's live sources
	meter   *callMeter           // of the call in progress, nil between calls

	// lastRequest is when a request (HTTP, portal, GATT) was last delivered: a dormant
	// request waits requestLinger after it (worker goroutine only).
	lastRequest time.Time

	callMu   sync.Mutex
	stopping bool               // a stop was asked: no further event calls
	broken   bool               // a call failed: the instance is closed, never call it again
	cancel   context.CancelFunc // of the call in progress

	nsCalled  bool
	dormant   *abi.Wake // the instance asked to be dormant (dormant.go)
	subs      map[string]func()
	putPats   map[string]func()
	timers    map[uint32]*holder
	hold      func()
	gpioWatch map[int]func()
	canCancel func()
	canFilter atomic.Pointer[[]abi.CANFilter]
	bleCancel func()
	mdnsSvcs  map[string]abi.MDNSService // mdns_service registrations by mdnsKey
	net       netTable                   // net_open sockets

	httpOpen map[uint32]*httpReq // delivered in the call in progress
	periph   periphSession       // ABI minor 2: GATT, portal, WiFi hand-off, button

	putMu       sync.Mutex
	putOpen     map[uint32]*putReq // delivered in the call in progress
	putDeferred map[uint32]*putReq
	nextPutID   uint32 // outbound PUT ids
}

// httpReq is a request waiting for the plugin's http_reply.
type httpReq struct {
	id    uint32
	reply chan abi.HTTPResponse // buffered 1
}

// putReq is an inbound PUT waiting for the plugin's sk_put_reply.
type putReq struct {
	id    uint32
	reply func(sk.PutResult, string)
	timer clockwork.Timer // deferred: the 30 s limit
}

func newSession(p *plugin, inst *instance, gen uint64, granted []string) *session {
	caps := map[abi.Capability]bool{}
	for _, c := range granted {
		caps[abi.Capability(c)] = true
	}
	return &session{
		p: p, inst: inst, gen: gen, caps: caps,
		subs: map[string]func(){}, putPats: map[string]func(){}, timers: map[uint32]*holder{},
		gpioWatch: map[int]func(){}, httpOpen: map[uint32]*httpReq{},
		putOpen: map[uint32]*putReq{}, putDeferred: map[uint32]*putReq{},
		periph: periphSession{open: map[uint32]*waitReq{}},
	}
}

func (s *session) granted(c abi.Capability) bool { return s.caps[c] }

// errAborted is the end of a call cut short by a stop.
var errAborted = errors.New("stopped during a call")

// abort is how a stop reaches a plugin that may be inside a call: no further event call
// starts, and a call in progress is cut off at once, after which every host function answers
// plugin stopped and takes no effect. Between calls the stop stays orderly: the worker
// delivers the stop record with host functions working.
func (s *session) abort() {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	s.stopping = true
	if s.cancel != nil {
		s.stopped.Store(true)
		s.cancel()
	}
}

func (s *session) aborted() bool {
	s.callMu.Lock()
	defer s.callMu.Unlock()
	return s.stopping
}

// call runs one export with a batch under the per-call time limit. Requests the batch carried
// and the plugin left unanswered are answered by the host: HTTP 500, PUT failure. final is
// the stop record's call, which a pending stop does not hold back.
func (s *session) call(ctx context.Context, export string, batch []byte, final bool) (rc uint32, err error) {
	// The limit counts the call's running time, with a backstop in wall time (throttle.go);
	// the context ends the call when it is stopped.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.callMu.Lock()
	// A failed call (a trap, the time limit, a cancelled context) has closed the module and
	// freed its memory: entering it again would run code over freed memory.
	if (s.stopping && !final) || s.stopped.Load() || s.broken || s.inst.isClosed() {
		s.callMu.Unlock()
		return 0, errAborted
	}
	s.cancel = cancel
	s.callMu.Unlock()
	s.batch, s.errLine = batch, ""
	cctx = context.WithValue(cctx, sessionKey{}, s)
	s.meter = realMeter(s.p.m.opts.CallTimeout)
	rc, err = s.inst.call(cctx, export)
	s.meter.end()
	s.meter = nil
	s.callMu.Lock()
	s.cancel = nil
	if err != nil {
		s.broken = true
	}
	s.callMu.Unlock()
	s.batch = nil
	s.p.calls.Add(1)
	s.finishRequests()
	if err != nil {
		if s.stopped.Load() {
			return rc, errAborted
		}
		return rc, err
	}
	return rc, nil
}

func (s *session) finishRequests() {
	for id, r := range s.httpOpen {
		select {
		case r.reply <- abi.HTTPResponse{ID: id, Status: 500, Body: []byte(`{"error":"internal","message":"the plugin did not answer"}`)}:
		default:
		}
		delete(s.httpOpen, id)
	}
	s.finishPeriph()
	for _, r := range s.takePuts(&s.putOpen) {
		r.reply(sk.PutFailure, "the plugin did not answer")
	}
}

// takePuts empties the PUT table *t and returns what it held.
func (s *session) takePuts(t *map[uint32]*putReq) map[uint32]*putReq {
	s.putMu.Lock()
	defer s.putMu.Unlock()
	held := *t
	if len(held) == 0 {
		return nil // nothing to take: the table stays, no new one every call
	}
	*t = map[uint32]*putReq{}
	return held
}

// release calls each cancel function that is set and clears it.
func release(cancels ...*func()) {
	for _, c := range cancels {
		if *c != nil {
			(*c)()
			*c = nil
		}
	}
}

// end releases everything the instance held. After it every host function answers
// ErrStopped. It runs on the worker goroutine once the instance is closed.
func (s *session) end() {
	s.stopped.Store(true)
	for _, c := range s.subs {
		c()
	}
	for _, c := range s.putPats {
		c()
	}
	s.p.m.releasePutPatterns(s.p.id)
	for _, t := range s.timers {
		t.Stop()
	}
	for _, c := range s.gpioWatch {
		c()
	}
	release(&s.hold, &s.canCancel, &s.bleCancel)
	s.endMDNS()
	s.endNet()
	s.endPeriph()
	s.finishRequests()
	for _, r := range s.takePuts(&s.putDeferred) {
		r.timer.Stop()
		r.reply(sk.PutFailure, "the plugin stopped")
	}
}

// mem returns a copy of n bytes of the plugin's memory at ptr.
func (s *session) mem(ptr, n uint32) ([]byte, abi.Errno) {
	b, e := s.view(ptr, n)
	if e != 0 {
		return nil, e
	}
	return append([]byte(nil), b...), 0
}

// view is mem without the copy: the bytes alias the plugin's memory, so they are valid only
// until the host function returns (the plugin does not run while it is in one) and nothing
// of them may be kept.
func (s *session) view(ptr, n uint32) ([]byte, abi.Errno) {
	if n > abi.MaxMessage {
		return nil, abi.ErrLimit
	}
	buf := s.inst.memory.buf
	end := uint64(ptr) + uint64(n)
	if end > uint64(len(buf)) {
		return nil, abi.ErrInvalid
	}
	return buf[ptr:end:end], 0
}

// put writes b into the plugin's memory at ptr when it fits cap; it returns len(b) either
// way, as the read functions of the ABI do.
func (s *session) put(ptr, capacity uint32, b []byte) int32 {
	if uint64(len(b)) > uint64(capacity) {
		return int32(len(b))
	}
	buf := s.inst.memory.buf
	if uint64(ptr)+uint64(len(b)) > uint64(len(buf)) {
		return int32(abi.ErrInvalid)
	}
	copy(buf[ptr:], b)
	return int32(len(b))
}

// deliverPut hands an inbound PUT to the plugin.
func (s *session) deliverPut(req sk.PutRequest, reply func(sk.PutResult, string)) {
	v, err := valueFromJSON(req.Value)
	if err != nil {
		reply(sk.PutInvalid, err.Error())
		return
	}
	s.putMu.Lock()
	s.nextPutID++
	r := &putReq{id: s.nextPutID, reply: reply}
	s.putMu.Unlock()
	payload := abi.AppendPutRequest(nil, abi.PutRequest{ID: r.id, Path: req.Path, Value: v})
	if !s.p.inbox.push(s.gen, queued{kind: abi.EvPut, payload: payload, put: r}) {
		reply(sk.PutFailure, "the plugin is not taking requests")
	}
}

// openPut marks a PUT as delivered in the call in progress.
func (s *session) openPut(r *putReq) {
	s.putMu.Lock()
	s.putOpen[r.id] = r
	s.putMu.Unlock()
}

// replyPut applies sk_put_reply.
func (s *session) replyPut(rep abi.PutReply) abi.Errno {
	s.putMu.Lock()
	r, open := s.putOpen[rep.ID]
	if open {
		delete(s.putOpen, rep.ID)
	} else if r = s.putDeferred[rep.ID]; r != nil {
		if rep.Result == abi.PutDeferred {
			s.putMu.Unlock()
			return abi.ErrInvalid // already deferred once
		}
		delete(s.putDeferred, rep.ID)
		r.timer.Stop()
	}
	if r == nil {
		s.putMu.Unlock()
		return abi.ErrNotFound
	}
	if rep.Result == abi.PutDeferred {
		id := rep.ID
		r.timer = s.p.m.clk.AfterFunc(time.Duration(abi.PutDeferMs)*time.Millisecond, func() {
			s.putMu.Lock()
			late := s.putDeferred[id]
			delete(s.putDeferred, id)
			s.putMu.Unlock()
			if late != nil {
				late.reply(sk.PutFailure, "deferred PUT not completed within 30 s")
			}
		})
		s.putDeferred[id] = r
	}
	s.putMu.Unlock()
	r.reply(putResult(rep.Result), rep.Message)
	return 0
}

// valueFromJSON turns a Signal K JSON value into an ABI value.
func valueFromJSON(raw json.RawMessage) (abi.Value, error) {
	var x any
	if err := json.Unmarshal(raw, &x); err != nil {
		return abi.Value{}, fmt.Errorf("value: %w", err)
	}
	var v abi.Value
	switch t := x.(type) {
	case nil:
		v = abi.Null()
	case bool:
		v = abi.Bool(t)
	case float64:
		v = abi.Number(t)
	case string:
		v = abi.String(t)
	default:
		v = abi.JSON(raw)
	}
	if err := v.Validate(); err != nil {
		return abi.Value{}, err
	}
	return v, nil
}

// valueToSK turns an ABI value into what the Signal K client publishes.
func valueToSK(v abi.Value) any {
	switch v.Kind {
	case abi.KindNumber:
		return v.Num
	case abi.KindString:
		return v.Str
	case abi.KindBool:
		return v.Bool
	case abi.KindJSON:
		return json.RawMessage(v.Str)
	}
	return nil
}

// errno maps an error from the device to the ABI's code: an abi.Errno anywhere in its chain
// is used as is, anything else becomes def.
func errno(err error, def abi.Errno) abi.Errno {
	var e abi.Errno
	if errors.As(err, &e) && e < 0 {
		return e
	}
	return def
}

// holder is a plugin timer; a periodic one gets a new clock timer at every firing.
type holder struct {
	mu      sync.Mutex
	t       clockwork.Timer
	stopped bool
}

func (h *holder) set(t clockwork.Timer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		t.Stop()
		return
	}
	h.t = t
}

// Stop disarms the timer for good.
func (h *holder) Stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	if h.t != nil {
		h.t.Stop()
	}
}
