package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"
	"github.com/tidwall/gjson"

	"devhost/abi"
	// Named sktypes here: the host functions call their Signal K client sk.
	sktypes "devhost/host/sk"
	runtimens "devhost/runtime-ns"
)

// hostFunc is the body of one host function: it reads its i32 (or i64) parameters from the
// stack and returns the i32 result (a value ≥ 0 or an abi.Errno).
type hostFunc func(s *session, st []uint64) int32

type fnDef struct {
	name string
	body hostFunc
}

func p32(st []uint64, i int) uint32 { return uint32(st[i]) }

// hostFunctions builds the ABI's host functions. Each one finds its session in the call's
// context, answers ErrStopped for a discarded instance and ErrPermission (counted) outside the
// grants, then does its work.
func hostFunctions() []hostFn {
	defs := []fnDef{
		{abi.FnEventRead, fnEventRead},
		{abi.FnLog, fnLog},
		{abi.FnNsRegister, fnNsRegister},
		{abi.FnConfigGet, fnConfigGet},
		{abi.FnSKPublish, fnSKPublish},
		{abi.FnSKMeta, fnSKMeta},
		{abi.FnSKPublishCtx, fnSKPublishCtx},
		{abi.FnSKPublishSrc, fnSKPublishSrc},
		{abi.FnSKSubscribe, fnSKSubscribe},
		{abi.FnSKUnsub, fnSKUnsubscribe},
		{abi.FnSKPutHandle, fnSKPutHandle},
		{abi.FnSKPutReply, fnSKPutReply},
		{abi.FnSKPutSend, fnSKPutSend},
		{abi.FnHealthReport, fnHealthReport},
		{abi.FnTimerSet, fnTimerSet},
		{abi.FnTimerCancel, fnTimerCancel},
		{abi.FnPowerHold, fnPowerHold},
		{abi.FnClockNow, fnClockNow},
		{abi.FnHTTPReply, fnHTTPReply},
		{abi.FnSSEPublish, fnSSEPublish},
		{abi.FnGPIORead, fnGPIORead},
		{abi.FnGPIOWrite, fnGPIOWrite},
		{abi.FnGPIOWatch, fnGPIOWatch},
		{abi.FnCANSend, fnCANSend},
		{abi.FnCANFilter, fnCANFilter},
		{abi.FnBLEScan, fnBLEScan},
		{abi.FnBLEAdvertise, fnBLEAdvertise},
		{abi.FnMDNSService, fnMDNSService},
		{abi.FnPowerSleep, fnPowerSleep},
		{abi.FnNetOpen, fnNetOpen},
		{abi.FnNetSend, fnNetSend},
		{abi.FnNetClose, fnNetClose},
		{abi.FnDormant, fnDormant},
	}
	defs = append(defs, periphFunctions...)
	out := make([]hostFn, 0, len(defs))
	for _, d := range defs {
		capability := abi.FunctionCapability[d.name]
		sig := abi.Signatures[d.name]
		fn := func(ctx context.Context, st []uint64) {
			st[0] = uint64(uint32(dispatch(ctx, capability, d.body, st)))
		}
		out = append(out, hostFn{name: d.name, fn: fn, params: valueTypes(sig.Params), results: valueTypes(sig.Results)})
	}
	return out
}

// valueTypes converts the ABI's value types, which use wazero's encoding.
func valueTypes(ts []abi.ValueType) []api.ValueType {
	out := make([]api.ValueType, len(ts))
	for i, t := range ts {
		out[i] = api.ValueType(t)
	}
	return out
}

func dispatch(ctx context.Context, capability abi.Capability, body hostFunc, st []uint64) int32 {
	s, _ := ctx.Value(sessionKey{}).(*session)
	if s == nil {
		return int32(abi.ErrInternal)
	}
	return s.invoke(capability, body, st)
}

// invoke runs a host function body for this session.
func (s *session) invoke(capability abi.Capability, body hostFunc, st []uint64) int32 {
	if s.stopped.Load() {
		return int32(abi.ErrStopped)
	}
	if capability != "" && !s.granted(capability) {
		s.p.denied.Add(1)
		return int32(abi.ErrPermission)
	}
	rc := body(s, st)
	// Malformed input is counted against the plugin (ABI §12); the instance is kept.
	if rc == int32(abi.ErrInvalid) || rc == int32(abi.ErrLimit) {
		s.p.errs.Add(1)
	}
	return rc
}

func fnEventRead(s *session, st []uint64) int32 {
	return s.put(p32(st, 0), p32(st, 1), s.batch)
}

func fnLog(s *session, st []uint64) int32 {
	level := p32(st, 0)
	b, e := s.mem(p32(st, 1), p32(st, 2))
	if e != 0 {
		return int32(e)
	}
	if level > 3 || !utf8.Valid(b) {
		return int32(abi.ErrInvalid)
	}
	if len(b) > abi.MaxLogLine {
		b = b[:abi.MaxLogLine]
		for len(b) > 0 && !utf8.Valid(b) {
			b = b[:len(b)-1]
		}
	}
	lv := [...]slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError}[level]
	s.p.log.Log(context.Background(), lv, string(b))
	if lv == slog.LevelError {
		s.errLine = string(b)
	}
	return 0
}

func fnNsRegister(s *session, st []uint64) int32 {
	b, e := s.mem(p32(st, 0), p32(st, 1))
	if e != 0 {
		return int32(e)
	}
	if s.nsCalled {
		return int32(abi.ErrConflict)
	}
	var head struct {
		Namespace string `json:"namespace"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return int32(abi.ErrInvalid)
	}
	if head.Namespace != "" && head.Namespace != abi.Namespace(s.p.id) {
		return int32(abi.ErrPermission)
	}
	if err := s.p.registerNamespace(b); err != nil {
		s.p.log.Warn("namespace refused", "err", err)
		if errors.Is(err, runtimens.ErrFull) {
			return int32(abi.ErrLimit)
		}
		return int32(errno(err, abi.ErrInvalid))
	}
	s.nsCalled = true
	return 0
}

func fnConfigGet(s *session, st []uint64) int32 {
	vals, ok := s.p.configValues()
	if !ok {
		return int32(abi.ErrState)
	}
	return s.put(p32(st, 0), p32(st, 1), vals)
}

func fnSKPublish(s *session, st []uint64) int32 {
	b, e := s.view(p32(st, 0), p32(st, 1))
	if e != 0 {
		return int32(e)
	}
	out, err := s.pub.decode(b)
	if err != nil {
		return int32(abi.ErrInvalid)
	}
	defer s.pub.release()
	sk := s.p.m.opts.SignalK
	if sk == nil {
		return int32(abi.ErrState)
	}
	if err := sk.Publish(out...); err != nil {
		return int32(errno(err, abi.ErrState))
	}
	return 0
}

// fnSKPublishCtx publishes another context's values (ABI 1.3), within the instance's cap on
// live contexts.
func fnSKPublishCtx(s *session, st []uint64) int32 {
	b, e := s.view(p32(st, 0), p32(st, 1))
	if e != 0 {
		return int32(e)
	}
	c, out, err := s.pub.decodeContext(b)
	if err != nil {
		s.p.m.log.Debug("sk_publish_ctx refused", "plugin", s.p.id, "err", err)
		return int32(abi.ErrInvalid)
	}
	defer s.pub.release()
	sk := s.p.m.opts.SignalK
	if sk == nil {
		return int32(abi.ErrState)
	}
	if !s.ctxs.admit(c, s.p.m.clk.Now()) {
		s.p.m.log.Warn("sk_publish_ctx: too many contexts", "plugin", s.p.id, "context", c, "live", abi.MaxContexts)
		return int32(abi.ErrLimit)
	}
	if err := sk.PublishContext(c, out...); err != nil {
		return int32(errno(err, abi.ErrState))
	}
	return 0
}

func fnSKMeta(s *session, st []uint64) int32 {
	metas, rc := decodeArg(s, st, abi.DecodeMeta)
	if rc != 0 {
		return rc
	}
	sk := s.p.m.opts.SignalK
	if sk == nil {
		return int32(abi.ErrState)
	}
	for _, m := range metas {
		if err := sk.DeclareMeta(m.Path, json.RawMessage(m.JSON)); err != nil {
			return int32(errno(err, abi.ErrInvalid))
		}
	}
	return 0
}

// decodeArg reads a host function's (ptr, len) input and decodes it; a malformed one is
// ErrInvalid.
func decodeArg[T any](s *session, st []uint64, decode func([]byte) (T, error)) (T, int32) {
	return decodeArgMax(s, st, abi.MaxMessage, decode)
}

// decodeArgMax is decodeArg for an input with a limit of its own: a malformed one longer
// than max bytes is ErrLimit.
func decodeArgMax[T any](s *session, st []uint64, max int, decode func([]byte) (T, error)) (T, int32) {
	var zero T
	b, e := s.mem(p32(st, 0), p32(st, 1))
	if e != 0 {
		return zero, int32(e)
	}
	v, err := decode(b)
	switch {
	case err != nil && len(b) > max:
		return zero, int32(abi.ErrLimit)
	case err != nil:
		return zero, int32(abi.ErrInvalid)
	}
	return v, 0
}

// patternsArg reads the pattern list a host call passes, at most max of them.
func patternsArg(s *session, st []uint64, max int) ([]string, int32) {
	return decodeArg(s, st, func(b []byte) ([]string, error) { return abi.DecodePatterns(b, max) })
}

// addPatterns is the body of sk_subscribe and sk_put_handle: it reads the call's pattern
// list and registers each pattern not yet in have with the Signal K client, once it is sure
// the total stays within limit (so a refused call adds nothing for lack of room); register
// answers the pattern's cancel function or the error code for the plugin.
func addPatterns(s *session, st []uint64, have map[string]func(), limit int, register func(sk SignalK, p string) (func(), int32)) int32 {
	pats, rc := patternsArg(s, st, limit)
	if rc != 0 {
		return rc
	}
	sk := s.p.m.opts.SignalK
	if sk == nil {
		return int32(abi.ErrState)
	}
	fresh := 0
	for _, p := range pats {
		if have[p] == nil {
			fresh++
		}
	}
	if len(have)+fresh > limit {
		return int32(abi.ErrLimit)
	}
	for _, p := range pats {
		if have[p] != nil {
			continue
		}
		cancel, rc := register(sk, p)
		if rc != 0 {
			return rc
		}
		have[p] = cancel
	}
	return 0
}

func fnSKSubscribe(s *session, st []uint64) int32 {
	return addPatterns(s, st, s.subs, abi.MaxPatterns, func(sk SignalK, p string) (func(), int32) {
		gen, in := s.gen, s.p.inbox
		cancel, err := sk.Subscribe(p, func(d sktypes.Delta) {
			v, err := valueFromJSON(d.Value)
			if err != nil || !abi.ValidPath(d.Path) {
				return
			}
			in.push(gen, queued{kind: abi.EvDelta, payload: abi.AppendValue(nil, d.Path, v), n: 1})
		})
		if err != nil {
			return nil, int32(errno(err, abi.ErrLimit))
		}
		return cancel, 0
	})
}

func fnSKUnsubscribe(s *session, st []uint64) int32 {
	pats, rc := patternsArg(s, st, abi.MaxPatterns)
	if rc != 0 {
		return rc
	}
	for _, p := range pats {
		if s.subs[p] == nil {
			return int32(abi.ErrNotFound)
		}
	}
	for _, p := range pats {
		s.subs[p]()
		delete(s.subs, p)
	}
	return 0
}

func fnSKPutHandle(s *session, st []uint64) int32 {
	return addPatterns(s, st, s.putPats, abi.MaxPutHandlers, func(sk SignalK, p string) (func(), int32) {
		if !s.p.m.claimPutPattern(s.p.id, p) {
			return nil, int32(abi.ErrConflict)
		}
		remove, err := sk.HandlePut(p, s.deliverPut)
		if err != nil {
			s.p.m.releasePutPattern(s.p.id, p)
			return nil, int32(errno(err, abi.ErrConflict))
		}
		return remove, 0
	})
}

func fnSKPutReply(s *session, st []uint64) int32 {
	rep, rc := decodeArg(s, st, abi.DecodePutReply)
	if rc != 0 {
		return rc
	}
	return int32(s.replyPut(rep))
}

func fnSKPutSend(s *session, st []uint64) int32 {
	pv, rc := decodeArg(s, st, abi.DecodePutSend)
	if rc != 0 {
		return rc
	}
	sk := s.p.m.opts.SignalK
	if sk == nil {
		return int32(abi.ErrState)
	}
	s.putMu.Lock()
	s.nextPutID++
	id := s.nextPutID
	s.putMu.Unlock()
	gen, in := s.gen, s.p.inbox
	err := sk.Put(pv.Path, pv.Value.AppendJSON(nil), func(a sktypes.PutAnswer) {
		in.push(gen, queued{kind: abi.EvPutAnswer, payload: abi.AppendPutAnswer(nil,
			abi.PutAnswer{ID: id, Status: uint32(a.StatusCode), State: a.State, Message: a.Message})})
	})
	if err != nil {
		return int32(errno(err, abi.ErrState))
	}
	return int32(id)
}

func fnHealthReport(s *session, st []uint64) int32 {
	h, rc := decodeArg(s, st, abi.DecodeHealthReport)
	if rc != 0 {
		return rc
	}
	if h.Reboot && !s.granted(abi.CapHealthReboot) {
		s.p.denied.Add(1)
		return int32(abi.ErrPermission)
	}
	if !s.p.claimHealthName(h.Name) {
		return int32(abi.ErrLimit)
	}
	hl := s.p.m.opts.Health
	if hl == nil {
		return 0
	}
	key := s.p.id + "." + h.Name
	report := hl.Report
	if h.Reboot {
		report = hl.ReportFatal
	}
	if err := report(key, h.State.String(), h.Message); err != nil {
		s.p.log.Warn("health report refused", "key", key, "err", err)
		return int32(errno(err, abi.ErrLimit))
	}
	return 0
}

func fnTimerSet(s *session, st []uint64) int32 {
	id := p32(st, 0)
	delay, period := int64(st[1]), int64(st[2])
	if int32(id) < 1 || delay < 0 || delay > abi.MaxDelayMs || period < 0 || period > abi.MaxDelayMs ||
		(period != 0 && period < abi.MinPeriodMs) {
		return int32(abi.ErrInvalid)
	}
	if old := s.timers[id]; old != nil {
		old.Stop()
		s.p.inbox.dropTimer(id)
	} else if len(s.timers) >= abi.MaxTimers {
		return int32(abi.ErrLimit)
	}
	clk, gen, in := s.p.m.clk, s.gen, s.p.inbox
	payload := abi.AppendTimer(nil, id)
	var fire func()
	var t holder
	fire = func() {
		in.push(gen, queued{kind: abi.EvTimer, payload: payload, timer: id})
		if period > 0 {
			t.set(clk.AfterFunc(time.Duration(period)*time.Millisecond, fire))
		}
	}
	t.set(clk.AfterFunc(time.Duration(delay)*time.Millisecond, fire))
	s.timers[id] = &t
	return 0
}

func fnTimerCancel(s *session, st []uint64) int32 {
	id := p32(st, 0)
	t := s.timers[id]
	if t == nil {
		return int32(abi.ErrNotFound)
	}
	t.Stop()
	delete(s.timers, id)
	s.p.inbox.dropTimer(id)
	return 0
}

func fnPowerHold(s *session, st []uint64) int32 {
	pw, id := s.p.m.opts.Power, s.p.id
	return toggleWatch(st, pw != nil, &s.hold, func() (func(), error) { return pw.Hold(id), nil })
}

// PowerSleeper is a Power that also takes the application's sleep-now requests (power_sleep,
// ABI minor 1). A refusal wraps an abi.Errno (abi.ErrState while an update is unconfirmed).
type PowerSleeper interface {
	SleepNow() error
}

func fnPowerSleep(s *session, st []uint64) int32 {
	if p32(st, 0) != 0 {
		return int32(abi.ErrInvalid)
	}
	sl, ok := s.p.m.opts.Power.(PowerSleeper)
	if !ok {
		return int32(abi.ErrUnavailable)
	}
	if err := sl.SleepNow(); err != nil {
		var e abi.Errno
		if errors.As(err, &e) {
			return int32(e)
		}
		return int32(abi.ErrState)
	}
	return 0
}

var clockSources = map[string]abi.ClockSource{
	"none": abi.ClockNone, "rtc": abi.ClockRTC, "sk": abi.ClockSK, "manual": abi.ClockManual, "sntp": abi.ClockSNTP,
}

func fnClockNow(s *session, st []uint64) int32 {
	m := s.p.m
	c := abi.Clock{UptimeMs: m.clk.Since(m.started).Milliseconds()}
	if m.opts.WallClock != nil {
		t, src, synced := m.opts.WallClock()
		if !t.IsZero() {
			c.UnixMs = t.UnixMilli()
		}
		c.Synced, c.Source = synced, clockSources[src]
	}
	return s.put(p32(st, 0), p32(st, 1), abi.AppendClock(nil, c))
}

func fnHTTPReply(s *session, st []uint64) int32 {
	h, rc := decodeArg(s, st, abi.DecodeHTTPResponse)
	if rc != 0 {
		return rc
	}
	r := s.httpOpen[h.ID]
	if r == nil {
		return int32(abi.ErrNotFound)
	}
	delete(s.httpOpen, h.ID)
	r.reply <- h
	return 0
}

func fnSSEPublish(s *session, st []uint64) int32 {
	ev, rc := decodeArg(s, st, decodeSSEEvent)
	if rc != 0 {
		return rc
	}
	if !s.p.declaresEvent(ev.Event) {
		s.p.denied.Add(1)
		return int32(abi.ErrPermission)
	}
	s.p.m.publishPluginEvent(s.p, ev.Event, json.RawMessage(ev.Data), ev.Retain)
	return 0
}

// decodeSSEEvent is abi.DecodeSSEEvent checking the data with gjson's validator, which
// accepts the same texts as encoding/json's (FuzzValidJSON) about six times faster: a
// gateway's delta events, 8 KiB each, spent most of sse_publish's time in the scanner.
func decodeSSEEvent(b []byte) (abi.SSEEvent, error) {
	return abi.DecodeSSEEventValid(b, gjson.ValidBytes)
}

func fnGPIORead(s *session, st []uint64) int32 {
	g := s.p.m.opts.GPIO
	if g == nil {
		return int32(abi.ErrUnavailable)
	}
	high, err := g.Read(int(p32(st, 0)))
	if err != nil {
		return int32(errno(err, abi.ErrIO))
	}
	if high {
		return 1
	}
	return 0
}

func fnGPIOWrite(s *session, st []uint64) int32 {
	g := s.p.m.opts.GPIO
	if g == nil {
		return int32(abi.ErrUnavailable)
	}
	level := p32(st, 1)
	if level > 1 {
		return int32(abi.ErrInvalid)
	}
	if err := g.Write(int(p32(st, 0)), level == 1); err != nil {
		return int32(errno(err, abi.ErrIO))
	}
	return 0
}

func fnGPIOWatch(s *session, st []uint64) int32 {
	g := s.p.m.opts.GPIO
	if g == nil {
		return int32(abi.ErrUnavailable)
	}
	pin, edges := int(p32(st, 0)), p32(st, 1)
	if edges > abi.EdgeBoth {
		return int32(abi.ErrInvalid)
	}
	if c := s.gpioWatch[pin]; c != nil {
		c()
		delete(s.gpioWatch, pin)
	}
	if edges == abi.EdgeNone {
		return 0
	}
	gen, in := s.gen, s.p.inbox
	cancel, err := g.Watch(pin, func(pin int, high bool) {
		if (high && edges&abi.EdgeRising == 0) || (!high && edges&abi.EdgeFalling == 0) {
			return
		}
		var lv uint8
		if high {
			lv = 1
		}
		in.push(gen, queued{kind: abi.EvGPIO, payload: abi.AppendGPIOEdge(nil, abi.GPIOEdge{Pin: uint32(pin), Level: lv})})
	})
	if err != nil {
		return int32(errno(err, abi.ErrIO))
	}
	s.gpioWatch[pin] = cancel
	return 0
}

func fnCANSend(s *session, st []uint64) int32 {
	f, rc := decodeArg(s, st, abi.DecodeCANFrame)
	if rc != 0 {
		return rc
	}
	c := s.p.m.opts.CAN
	if c == nil {
		return int32(abi.ErrUnavailable)
	}
	if err := c.Send(CANFrame{ID: f.ID, Extended: f.Extended, Remote: f.Remote, Data: append([]byte(nil), f.Data...)}); err != nil {
		return int32(errno(err, abi.ErrIO))
	}
	return 0
}

func fnCANFilter(s *session, st []uint64) int32 {
	// Filters are 8-byte records: an input with room for more than MaxCANFilters is too large.
	fs, rc := decodeArgMax(s, st, 8*(abi.MaxCANFilters+1)-1, abi.DecodeCANFilters)
	if rc != 0 {
		return rc
	}
	c := s.p.m.opts.CAN
	if c == nil {
		return int32(abi.ErrUnavailable)
	}
	s.canFilter.Store(&fs)
	switch {
	case len(fs) == 0 && s.canCancel != nil:
		s.canCancel()
		s.canCancel = nil
	case len(fs) > 0 && s.canCancel == nil:
		gen, in, filt := s.gen, s.p.inbox, &s.canFilter
		cancel, err := c.Receive(func(f CANFrame) {
			pass := false
			for _, x := range *filt.Load() {
				pass = pass || f.ID&x.Mask == x.ID&x.Mask
			}
			if !pass || len(f.Data) > abi.MaxCANData {
				return
			}
			in.push(gen, queued{kind: abi.EvCAN, payload: abi.AppendCANFrame(nil,
				abi.CANFrame{ID: f.ID, Extended: f.Extended, Remote: f.Remote, Data: f.Data})})
		})
		if err != nil {
			return int32(errno(err, abi.ErrIO))
		}
		s.canCancel = cancel
	}
	return 0
}

func fnBLEScan(s *session, st []uint64) int32 {
	bl := s.p.m.opts.BLE
	gen, in := s.gen, s.p.inbox
	return toggleWatch(st, bl != nil, &s.bleCancel, func() (func(), error) {
		return bl.Scan(func(a BLEAdvert) {
			if len(a.Address) > 17 || len(a.Data) > 255 || !utf8.ValidString(a.Address) {
				return
			}
			in.push(gen, queued{kind: abi.EvBLE, payload: abi.AppendBLEAdvert(nil,
				abi.BLEAdvert{Addr: a.Address, RSSI: int32(a.RSSI), Data: a.Data})})
		})
	})
}

// advertArg reads a legacy advertising payload (advertising data or scan response).
func advertArg(s *session, st []uint64) ([]byte, int32) {
	b, e := s.mem(p32(st, 0), p32(st, 1))
	if e != 0 {
		return nil, int32(e)
	}
	if len(b) > abi.MaxBLEAdvertising {
		return nil, int32(abi.ErrLimit)
	}
	return b, 0
}

func fnBLEAdvertise(s *session, st []uint64) int32 {
	b, rc := advertArg(s, st)
	if rc != 0 {
		return rc
	}
	bl := s.p.m.opts.BLE
	if bl == nil {
		return int32(abi.ErrUnavailable)
	}
	var err error
	if len(b) == 0 {
		err = bl.StopAdvertising()
	} else {
		err = bl.Advertise(b)
	}
	if err != nil {
		return int32(errno(err, abi.ErrIO))
	}
	return 0
}
