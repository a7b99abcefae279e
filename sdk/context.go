package sdk

import (
	"encoding/binary"
	"errors"
	"fmt"

	"devhost/abi"
)

// Other contexts (ABI 1.3): values about another vessel, an aid to navigation, a base
// station, an aircraft or a SAR transponder, as an AIS receiver hears them. They are
// queued per context beside the own vessel's values and sent with them, one host call per
// context, so a context the device refuses (its cap on live contexts) costs only its own
// values.

// MaxContexts is how many contexts one plugin instance may publish to at a time: a context
// is live until abi.ContextIdleMs (10 minutes) after its last publication, and publishing to
// a new one while MaxContexts are live fails with ErrLimit.
const MaxContexts = abi.MaxContexts

// ctxQueue is the queued values of one context, or of one context ("": vessels.self) and
// source (PublishToFrom).
type ctxQueue struct {
	context string
	src     Source // the zero Source: the device's own (sk_publish_ctx)
	// buf is the sk_publish_ctx message, or the sk_publish_src group: the head, then value
	// records. A group's head ends with its count of values, written when it is sent.
	buf   []byte
	heads int // the head's bytes: buf[:heads] is the queue without values
	n     int
}

// start writes q's head into b (reused).
func (q *ctxQueue) start(b []byte) {
	if q.src == (Source{}) {
		q.buf = abi.AppendContextValues(b[:0], q.context)
	} else {
		q.buf = abi.AppendSourceGroup(b[:0], q.src, q.context, 0)
	}
	q.heads, q.n = len(q.buf), 0
}

// ValidContext reports why context is not one PublishTo takes (nil when it is):
// `vessels.<id>`, `atons.<id>`, `shore.basestations.<id>`, `aircraft.<id>` or `sar.<id>`,
// the id `urn:mrn:` then colon-separated segments of letters, digits, _ and -
// (`vessels.urn:mrn:imo:mmsi:230123456`). vessels.self is not one: Publish is for the own
// vessel.
func ValidContext(context string) error {
	if err := abi.ValidContext(context); err != nil {
		return fmt.Errorf("sdk: %w: %w", err, ErrInvalid)
	}
	return nil
}

// PublishTo queues a Signal K value for another context (ValidContext); queued values go to
// the device when the running handler returns (or at Flush), each context's in one call,
// after the own vessel's. The empty path with a JSON object (a map, a struct,
// json.RawMessage) sets members of the context's root: a target's name, mmsi or
// communication.callsignVhf. It fails at once on a malformed context, path or value and
// without the signalk.publish capability; the device's refusal (ErrLimit past MaxContexts
// live contexts) comes from Flush. Needs ABI 1.3 (manifest abi_minor 3).
func PublishTo(context, path string, v any) error {
	q := contextQueue(context, Source{})
	if q == nil {
		if err := ValidContext(context); err != nil {
			return err
		}
	}
	return queueIn(q, context, Source{}, path, v)
}

// queueIn queues a value in q, a new queue of context and src when nil (both checked).
func queueIn(q *ctxQueue, context string, src Source, path string, v any) error {
	val, err := queuedValue(v)
	if err != nil {
		return fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	if path == "" && context != "" {
		if val.Kind != abi.KindJSON || !isObject(val.Str) {
			return fmt.Errorf("sdk: publish to %s: the root takes a JSON object: %w", context, ErrInvalid)
		}
	} else if !checkPath(path) {
		return invalidPath(path)
	}
	if !rt.canPublish {
		return errNoPublish()
	}
	if q == nil {
		rt.ctxPub = append(rt.ctxPub, ctxQueue{context: context, src: src})
		q = &rt.ctxPub[len(rt.ctxPub)-1]
		q.start(spareBuf())
	}
	q.buf = abi.AppendValue(q.buf, path, val)
	q.n++
	if q.n == abi.MaxValuesPerCall || len(q.buf) > abi.MaxMessage-(abi.MaxPath+abi.MaxValue+16) {
		return flushContext(q)
	}
	return nil
}

// isObject reports whether a JSON text (valid: ToValue checked it) is an object.
func isObject(text string) bool {
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case ' ', '\t', '\n', '\r':
			continue
		case '{':
			return true
		}
		return false
	}
	return false
}

// contextQueue answers the queue of a context and source (checked when it was made), nil for
// one not queued in this batch; the last one used first: a plugin usually publishes several
// values of one target, or one message, in a row.
func contextQueue(context string, src Source) *ctxQueue {
	if n := len(rt.ctxPub); n > 0 && rt.ctxPub[n-1].context == context && rt.ctxPub[n-1].src == src {
		return &rt.ctxPub[n-1]
	}
	for i := range rt.ctxPub {
		if rt.ctxPub[i].context == context && rt.ctxPub[i].src == src {
			return &rt.ctxPub[i]
		}
	}
	return nil
}

// flushContext sends one context's queued values; a source's go with every other source's
// (flushSources).
func flushContext(q *ctxQueue) error {
	if q.src != (Source{}) {
		return flushSources()
	}
	if q.n == 0 {
		return nil
	}
	rc := callIn(abi.FnSKPublishCtx, q.buf)
	q.buf, q.n = q.buf[:q.heads], 0
	if rc < 0 {
		return fmt.Errorf("sdk: publish to %q: %w", q.context, abi.Errno(rc))
	}
	return nil
}

// flushSources sends the values queued with a source of their own, every source's group in
// one sk_publish_src call (more when they pass the limits of one call): a gateway relays the
// messages of dozens of senders in a batch, and a host call per sender would cost more than
// the values.
func flushSources() error {
	var errs []error
	msg, n := rt.srcMsg[:0], 0
	send := func() {
		if n == 0 {
			return
		}
		if rc := callIn(abi.FnSKPublishSrc, msg); rc < 0 {
			errs = append(errs, fmt.Errorf("sdk: publish with sources: %w", abi.Errno(rc)))
		}
		msg, n = msg[:0], 0
	}
	for i := range rt.ctxPub {
		q := &rt.ctxPub[i]
		if q.src == (Source{}) || q.n == 0 {
			continue
		}
		if n+q.n > abi.MaxValuesPerCall || len(msg)+len(q.buf) > abi.MaxMessage {
			send()
		}
		// The group's count: the last field of its head.
		binary.LittleEndian.PutUint32(q.buf[q.heads-4:q.heads], uint32(q.n))
		msg = append(msg, q.buf...)
		n += q.n
		q.buf, q.n = q.buf[:q.heads], 0
	}
	send()
	rt.srcMsg = msg[:0]
	return errors.Join(errs...)
}

// flushContexts sends every context's queued values and forgets the contexts: the next
// batch's targets are other ones.
func flushContexts() error {
	var errs []error
	for i := range rt.ctxPub {
		if q := &rt.ctxPub[i]; q.src == (Source{}) {
			if err := flushContext(q); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := flushSources(); err != nil {
		errs = append(errs, err)
	}
	for i := range rt.ctxPub {
		keepBuf(rt.ctxPub[i].buf)
	}
	clear(rt.ctxPub)
	rt.ctxPub = rt.ctxPub[:0]
	return errors.Join(errs...)
}

// The queues' buffers outlive their batch: a gateway queues the values of the same few dozen
// senders batch after batch, and a new buffer grown afresh for each of them each time was
// most of what publishing with sources cost inside the sandbox, where every allocation is
// fresh memory. At most maxSpare are kept, none larger than spareCap.
const (
	maxSpare = 64
	spareCap = 16 << 10
)

// spareBuf answers an empty buffer, a kept one when there is one.
func spareBuf() []byte {
	if n := len(rt.spare); n > 0 {
		b := rt.spare[n-1]
		rt.spare[n-1] = nil
		rt.spare = rt.spare[:n-1]
		return b
	}
	return nil
}

// keepBuf keeps a queue's buffer for a later queue.
func keepBuf(b []byte) {
	if cap(b) > 0 && cap(b) <= spareCap && len(rt.spare) < maxSpare {
		rt.spare = append(rt.spare, b[:0])
	}
}
