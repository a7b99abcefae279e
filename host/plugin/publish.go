package plugin

import (
	"time"

	"devhost/abi"
	sktypes "devhost/host/sk"
)

// publisher decodes the sk_publish messages of one session. It runs on the plugin's worker
// goroutine only (host functions run there), so it keeps its buffers and the paths it has
// seen from call to call without a lock: at 100 values a call, a plugin publishing the same
// few paths over and over paid more for making the paths and the slices anew than for
// decoding the values (BenchmarkPublishDecode).
type publisher struct {
	paths  abi.PathTable
	vals   []abi.PathValue
	out    []sktypes.Value
	groups []abi.SourceGroup // sk_publish_src's, over vals
}

// decode decodes an sk_publish message and converts it for the Signal K client. b may alias
// the plugin's memory: nothing of it is kept. The result is valid until the next decode; the
// client does not keep the slice (SignalK.Publish).
func (p *publisher) decode(b []byte) ([]sktypes.Value, error) {
	vals, err := p.paths.AppendDecodedValues(p.vals[:0], b, abi.MaxValuesPerCall)
	if err != nil {
		return nil, err
	}
	return p.convert(vals), nil
}

func (p *publisher) convert(vals []abi.PathValue) []sktypes.Value {
	out := p.out[:0]
	for _, v := range vals {
		out = append(out, sktypes.Value{Path: v.Path, Value: valueToSK(v.Value)})
	}
	clear(vals) // keep no value strings alive between calls
	p.vals, p.out = vals[:0], out
	return out
}

// decodeContext decodes an sk_publish_ctx message as decode does an sk_publish one, with
// its context.
func (p *publisher) decodeContext(b []byte) (string, []sktypes.Value, error) {
	c, vals, err := p.paths.AppendDecodedContextValues(p.vals[:0], b, abi.MaxValuesPerCall)
	if err != nil {
		return "", nil, err
	}
	return c, p.convert(vals), nil
}

// release drops what the last batch referred to, once the client has taken it.
func (p *publisher) release() { clear(p.out) }

// convertOut converts one group of decoded values for the client, into out (valid until the
// next convertOut), leaving vals to the caller.
func (p *publisher) convertOut(vals []abi.PathValue) []sktypes.Value {
	out := p.out[:0]
	for _, v := range vals {
		out = append(out, sktypes.Value{Path: v.Path, Value: valueToSK(v.Value)})
	}
	p.out = out
	return out
}

// releaseGroups drops what the last sk_publish_src message referred to.
func (p *publisher) releaseGroups() {
	clear(p.vals)
	clear(p.groups)
	p.vals, p.groups = p.vals[:0], p.groups[:0]
	p.release()
}

// contextTable is the flood cap of sk_publish_ctx: the contexts one instance published to
// within abi.ContextIdleMs, at most abi.MaxContexts of them. Like publisher it lives on the
// plugin's worker goroutine.
type contextTable = liveTable[string]

// liveTable is a flood cap: the keys (contexts, sources) one instance published to within
// abi.ContextIdleMs, at most abi.MaxContexts of them.
type liveTable[K comparable] struct {
	last map[K]time.Time // key → its last publication
}

// admit records a publication to key at now, and reports false when key is new
// while abi.MaxContexts others are live. The table is swept only when it is full, so a
// plugin publishing to its usual few targets pays one map update per call.
func (t *liveTable[K]) admit(key K, now time.Time) bool {
	if !t.room(key, now) {
		return false
	}
	if t.last == nil {
		t.last = make(map[K]time.Time)
	}
	t.last[key] = now
	return true
}

// room reports whether admit would take key at now, recording nothing; it sweeps the table
// when it is full.
func (t *liveTable[K]) room(key K, now time.Time) bool {
	if _, ok := t.last[key]; ok || len(t.last) < abi.MaxContexts {
		return true
	}
	idle := now.Add(-abi.ContextIdleMs * time.Millisecond)
	for k, at := range t.last {
		if !at.After(idle) {
			delete(t.last, k)
		}
	}
	return len(t.last) < abi.MaxContexts
}
