package skstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"devhost/host/sk"
)

// putTable holds the PUTs: outbound requests in flight by request id, the local handlers of
// inbound PUTs by path, the inbound queue their worker drains, and the results waiting for
// resultRunner to deliver. Guarded by Stream.mu.
type putTable struct {
	puts     map[string]*pendingPut
	handlers map[string]*PutPath
	inQ      chan inboundPut
	results  []func()
	resultCh chan struct{}
}

// Outbound PUT.

type pendingPut struct {
	id, path string
	timer    clockwork.Timer
	done     func(sk.PutAnswer)
}

// Put sends `{context: vessels.self, requestId, put: {path, value}}` and returns the request id.
// done (may be nil) is called once with the final answer: the server's COMPLETED or FAILED
// answer (a PENDING one keeps waiting), TIMEOUT when nothing final came within PutTimeout, or
// FAILED when the connection ended first. Nothing is queued: without a connection Put returns
// ErrInvalidState, with MaxPutsInFlight waiting it returns ErrLimit. done runs on the stream's
// result goroutine and must not block for long.
func (s *Stream) Put(path string, value any, done func(sk.PutAnswer)) (string, error) {
	if err := checkPath(path); err != nil {
		return "", err
	}
	raw, err := encodeValue(value)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.closed || !s.connected {
		return "", ErrInvalidState
	}
	if len(s.puts) >= MaxPutsInFlight {
		return "", fmt.Errorf("%w: %d PUTs in flight", ErrLimit, MaxPutsInFlight)
	}
	id := uuid.NewString()
	p := &pendingPut{id: id, path: path, done: done}
	p.timer = s.clk.AfterFunc(PutTimeout, func() {
		s.finishPut(id, sk.PutAnswer{State: "TIMEOUT", Message: "no answer within 10 s"})
	})
	s.puts[id] = p
	s.sendCtrlLocked(putRequestFrame(id, path, raw))
	return id, nil
}

// PutWait is Put that waits for the answer.
func (s *Stream) PutWait(ctx context.Context, path string, value any) (sk.PutAnswer, error) {
	ch := make(chan sk.PutAnswer, 1)
	if _, err := s.Put(path, value, func(r sk.PutAnswer) { ch <- r }); err != nil {
		return sk.PutAnswer{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-ctx.Done():
		return sk.PutAnswer{}, ctx.Err()
	}
}

func encodeValue(v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return nil, fmt.Errorf("%w: value is not JSON", ErrInvalidArgument)
		}
		return raw, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: value: %v", ErrInvalidArgument, err)
	}
	return b, nil
}

func (s *Stream) finishPut(id string, r sk.PutAnswer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finishPutLocked(id, r)
}

func (s *Stream) finishPutLocked(id string, r sk.PutAnswer) {
	p, ok := s.puts[id]
	if !ok {
		return
	}
	delete(s.puts, id)
	p.timer.Stop()
	r.RequestID, r.Path = id, p.path
	if r.OK() {
		s.putOK++
	} else {
		s.putFailed++
	}
	if p.done != nil {
		done := p.done
		s.results = append(s.results, func() { done(r) })
		select {
		case s.resultCh <- struct{}{}:
		default:
		}
	}
}

func (s *Stream) failPutsLocked(msg string) {
	for id := range s.puts {
		s.finishPutLocked(id, sk.PutAnswer{State: "FAILED", Message: msg})
	}
}

func (s *Stream) onPutAnswer(f Frame) {
	if f.State == "PENDING" {
		return
	}
	s.finishPut(f.RequestID, sk.PutAnswer{State: f.State, StatusCode: f.StatusCode, Message: f.Message})
}

// resultRunner calls PUT completion callbacks outside the read loop and every lock. On close it
// runs what is left, so every Put's done is called.
func (s *Stream) resultRunner() {
	defer s.cbWG.Done()
	for {
		var stop bool
		select {
		case <-s.ctx.Done():
			stop = true
		case <-s.resultCh:
		}
		s.mu.Lock()
		fns := s.results
		s.results = nil
		s.mu.Unlock()
		for _, fn := range fns {
			fn()
		}
		if stop {
			return
		}
	}
}

// Inbound PUT.

type inboundPut struct {
	requestID, context string
	puts               []PathValue
}

// HandlePut registers the handler of a PUT-able path or family (`prefix.*`, `prefix*`, `*`).
// One handler per pattern: registering the same pattern again replaces it. A request goes to
// the exact path's handler, else to the family with the longest prefix that matches. Current
// needs an exact path; when set and the stream is started, the current state is published at
// once.
func (s *Stream) HandlePut(p PutPath) (cancel func(), err error) {
	if err := checkPattern(p.Path); err != nil {
		return nil, err
	}
	if p.Handle == nil {
		return nil, fmt.Errorf("%w: nil handler", ErrInvalidArgument)
	}
	if p.Current != nil && checkPath(p.Path) != nil {
		return nil, fmt.Errorf("%w: a current-state getter needs an exact path", ErrInvalidArgument)
	}
	reg := &p
	s.mu.Lock()
	s.handlers[p.Path] = reg
	started := s.started && !s.closed
	s.mu.Unlock()
	if started {
		s.publishCurrent(p.Path)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.handlers[p.Path] == reg {
				delete(s.handlers, p.Path)
			}
			s.mu.Unlock()
		})
	}, nil
}

// publishCurrent publishes the state of one PUT-able path, or of all of them with path "".
// The getters run outside the lock: they belong to the caller.
func (s *Stream) publishCurrent(path string) {
	type getter struct {
		path string
		fn   func() any
	}
	var gs []getter
	s.mu.Lock()
	for p, h := range s.handlers {
		if h.Current != nil && (path == "" || p == path) {
			gs = append(gs, getter{p, h.Current})
		}
	}
	s.mu.Unlock()
	for _, g := range gs {
		s.publishState(g.path, g.fn)
	}
}

// publishState publishes what current reads for path. The owner may publish a newer state
// between the read and this publish, which would then be overtaken by the older value; so the
// state is read again after publishing and, while it moved, published again (a few rounds: an
// owner that publishes without pause is overtaking this anyway).
func (s *Stream) publishState(path string, current func() any) {
	v := safeCurrent(current)
	for range 3 {
		if v == nil {
			return
		}
		if err := s.publishStateValue(path, v); err != nil {
			if !errors.Is(err, ErrInvalidState) {
				s.log.Warn("signal k stream: cannot publish PUT-able state", "path", path, "err", err)
			}
			return
		}
		now := safeCurrent(current)
		if reflect.DeepEqual(now, v) {
			return
		}
		v = now
	}
}

// publishStateValue publishes a PUT-able path's state, under its own source when it has one
// (sk.Sourced).
func (s *Stream) publishStateValue(path string, v any) error {
	if sv, ok := v.(sk.Sourced); ok {
		if sv.Source != (sk.Source{}) {
			return s.PublishSource(sv.Source, "", sk.Value{Path: path, Value: sv.Value})
		}
		v = sv.Value
	}
	return s.Publish(path, v)
}

func safeCurrent(fn func() any) (v any) {
	defer func() {
		if recover() != nil {
			v = nil
		}
	}()
	return fn()
}

func (s *Stream) onPutRequest(f Frame) {
	s.mu.Lock()
	s.putInbound++
	s.mu.Unlock()
	req := inboundPut{requestID: f.RequestID, context: f.Context, puts: f.Puts}
	select {
	case s.inQ <- req:
	default:
		s.answer(req.requestID, "COMPLETED", 502, "busy")
	}
}

// answer sends an answer frame. answered counts requests, not frames: a deferred request
// is answered PENDING then COMPLETED and counts once, at its final answer.
func (s *Stream) answer(id, state string, code int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sendCtrlLocked(putAnswerFrame(id, state, code, msg)) {
		if state != "PENDING" {
			s.putAnswered++
		}
	} else {
		s.log.Warn("signal k stream: PUT answer lost, stream down", "requestId", id, "statusCode", code)
	}
}

// inboundWorker runs PUT handlers one request at a time, in arrival order, off the read loop.
func (s *Stream) inboundWorker() {
	defer s.cbWG.Done()
	each(s.ctx, s.inQ, s.handleInbound)
}

// handlerLocked finds the handler for a path the way Route picks its pattern.
func (s *Stream) handlerLocked(path string) *PutPath {
	h, _ := Route(s.handlers, path)
	return h
}

// answerError carries the status and message a handler wants answered.
type answerError struct {
	code int
	msg  string
}

func (e *answerError) Error() string { return e.msg }

func (e *answerError) Is(target error) bool {
	return e.code == 400 && target == ErrInvalidArgument
}

// invalid is a handler error answered `COMPLETED` 400 with msg.
func invalid(msg string) error { return &answerError{400, msg} }

// failed is a handler error answered `COMPLETED` 502 with msg.
func failed(msg string) error { return &answerError{502, msg} }

// errDeferred is a handler outcome that completes later through the completion function;
// the server is answered PENDING 202 meanwhile.
var errDeferred = errors.New("skstream: deferred")

// putFunc is the form the request aggregation works with: it returns nil (200), an error from
// invalid (400), errDeferred (202 now, complete is called later with the final outcome), or
// any other error (502). complete may be called once, from any goroutine; it is ignored unless
// the handler returned errDeferred.
type putFunc func(req sk.PutRequest, complete func(error)) error

// codeOf maps a handler outcome to the answer's status code and message.
func codeOf(err error) (code int, msg string) {
	var ae *answerError
	switch {
	case err == nil:
		return 200, ""
	case errors.As(err, &ae):
		return ae.code, ae.msg
	case errors.Is(err, ErrInvalidArgument):
		return 400, err.Error()
	}
	return 502, err.Error()
}

func outcomeErr(o sk.PutResult, msg string) error {
	switch o {
	case sk.PutSuccess:
		return nil
	case sk.PutInvalid:
		return invalid(msg)
	case sk.PutDeferred:
		return errDeferred
	}
	if msg == "" {
		msg = "failed"
	}
	return failed(msg)
}

// replyHandler turns a handler that answers through reply (sk.PutHandler) into a putFunc: a
// reply given before the handler returns is its answer (a final reply after a deferred one is
// kept as the completion); no reply, or a deferred one, answers PENDING 202 and the next final
// reply completes the request. Replies after the final one are ignored.
func replyHandler(h sk.PutHandler) putFunc {
	return func(req sk.PutRequest, complete func(error)) error {
		var (
			mu       sync.Mutex
			returned bool
			first    *sk.PutResult
			firstMsg string
			final    error
			hasFinal bool
		)
		reply := func(o sk.PutResult, msg string) {
			mu.Lock()
			if !returned {
				switch {
				case first == nil:
					first, firstMsg = &o, msg
				case *first == sk.PutDeferred && o != sk.PutDeferred && !hasFinal:
					final, hasFinal = outcomeErr(o, msg), true
				}
				mu.Unlock()
				return
			}
			mu.Unlock()
			if o != sk.PutDeferred {
				complete(outcomeErr(o, msg))
			}
		}
		h(req, reply)
		mu.Lock()
		returned = true
		f, fmsg, fin, hasFin := first, firstMsg, final, hasFinal
		mu.Unlock()
		switch {
		case f == nil:
			return errDeferred
		case *f == sk.PutDeferred:
			if hasFin {
				complete(fin)
			}
			return errDeferred
		}
		return outcomeErr(*f, fmsg)
	}
}

type putItem struct {
	path               string
	returned, deferred bool
	completed          bool
	code               int
	msg                string
}

// putAgg collects the outcomes of one request's paths and answers it exactly once with its
// final state (after a PENDING 202 when a handler deferred).
type putAgg struct {
	s        *Stream
	id       string
	mu       sync.Mutex
	items    []*putItem
	returned int
	pending  bool
	finished bool
}

func (a *putAgg) worstLocked(onlyCompleted bool) (int, string) {
	code, msg := 200, ""
	for _, it := range a.items {
		if onlyCompleted && !it.completed {
			continue
		}
		if it.code > code {
			code, msg = it.code, it.msg
		}
	}
	return code, msg
}

// settleLocked answers when the request's outcome is known; it returns what to send.
func (a *putAgg) settleLocked() (state string, code int, msg string, send bool) {
	if a.finished || a.returned < len(a.items) {
		return "", 0, "", false
	}
	allDone, failed := true, false
	for _, it := range a.items {
		if !it.completed {
			allDone = false
		} else if it.code != 200 {
			failed = true
		}
	}
	switch {
	case allDone || failed:
		// A failure is final at once; completions still outstanding are ignored.
		a.finished = true
		code, msg = a.worstLocked(true)
		return "COMPLETED", code, msg, true
	case !a.pending:
		a.pending = true
		return "PENDING", 202, "", true
	}
	return "", 0, "", false
}

func (a *putAgg) settle() {
	a.mu.Lock()
	state, code, msg, send := a.settleLocked()
	a.mu.Unlock()
	if send {
		a.s.answer(a.id, state, code, msg)
	}
}

func (s *Stream) handleInbound(req inboundPut) {
	if req.requestID == "" {
		return
	}
	if len(req.puts) == 0 {
		s.answer(req.requestID, "COMPLETED", 400, "empty put")
		return
	}
	hs := make([]*PutPath, len(req.puts))
	s.mu.Lock()
	for i, pv := range req.puts {
		hs[i] = s.handlerLocked(pv.Path)
	}
	s.mu.Unlock()
	for i, pv := range req.puts {
		if checkPath(pv.Path) != nil {
			s.answer(req.requestID, "COMPLETED", 400, fmt.Sprintf("invalid path %q", pv.Path))
			return
		}
		if hs[i] == nil {
			s.answer(req.requestID, "COMPLETED", 405, "no handler for "+pv.Path)
			return
		}
	}
	agg := &putAgg{s: s, id: req.requestID, items: make([]*putItem, len(req.puts))}
	for i := range req.puts {
		agg.items[i] = &putItem{path: req.puts[i].Path}
	}
	for i, pv := range req.puts {
		it := agg.items[i]
		var once sync.Once
		complete := func(err error) {
			once.Do(func() {
				code, msg := codeOf(err)
				if errors.Is(err, errDeferred) {
					code, msg = 502, "completed as deferred"
				}
				agg.mu.Lock()
				if it.returned && !it.deferred {
					agg.mu.Unlock()
					return
				}
				it.completed, it.code, it.msg = true, code, msg
				agg.mu.Unlock()
				if code == 200 {
					s.publishCurrent(it.path)
				}
				agg.settle()
			})
		}
		err := callPutHandler(replyHandler(hs[i].Handle), sk.PutRequest{RequestID: req.requestID, Context: req.context,
			Path: pv.Path, Value: pv.Value}, complete)
		agg.mu.Lock()
		it.returned = true
		agg.returned++
		if errors.Is(err, errDeferred) {
			it.deferred = true
		} else {
			it.completed = true
			it.code, it.msg = codeOf(err)
		}
		ok := it.completed && it.code == 200
		agg.mu.Unlock()
		if ok {
			s.publishCurrent(it.path)
		}
	}
	agg.settle()
}

func callPutHandler(h putFunc, req sk.PutRequest, complete func(error)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return h(req, complete)
}
