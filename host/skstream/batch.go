package skstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/sk"
)

// batcher is the open batch: values published since the last delta messages, one group
// per context (the own vessel's and up to MaxBatchContexts others), one entry per path in a
// group (a newer value replaces an older one in place), each group closed into one delta
// message when the batch time runs out or its message is full. Guarded by Stream.mu.
type batcher struct {
	self          group
	others        []*group            // other contexts and sources, in the order they joined the batch
	otherIdx      map[groupKey]*group // others by context and source
	spareGroups   []*group            // emptied groups kept for the next batch's contexts
	batchTimer    clockwork.Timer
	batchDeadline time.Time
}

// group is one context's part of the open batch.
type group struct {
	context  string    // "" for vessels.self
	src      sk.Source // the zero Source for the device's own (SourceSrc)
	entries  []entry
	paths    pathTable
	bytes    int
	ts       int64 // the newest stamp among the entries (stamp.go); noStamp: none
	overhead int   // the message's bytes besides its values
}

// newGroup is an empty group with room for a message's paths.
func newGroup() *group { return &group{paths: newPathTable(), ts: noStamp} }

// MaxBatchContexts bounds the other contexts in one open batch: one more closes the batch
// early, so a burst of targets costs a bounded amount of memory before it reaches the ring.
const MaxBatchContexts = 64

// PublishNumber publishes a number for vessels.self; NaN and infinities are sent as null.
func (s *Stream) PublishNumber(path string, v float64) error {
	return s.publish(entry{path: path, kind: kindNumber, num: v})
}

// PublishString publishes a string.
func (s *Stream) PublishString(path, v string) error {
	return s.publish(entry{path: path, kind: kindString, str: v})
}

// PublishBool publishes a boolean.
func (s *Stream) PublishBool(path string, v bool) error {
	return s.publish(entry{path: path, kind: kindBool, b: v})
}

// PublishJSON publishes a JSON value (object, array or scalar); it is copied.
func (s *Stream) PublishJSON(path string, v []byte) error {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || !json.Valid(v) {
		return fmt.Errorf("%w: value for %q is not JSON", ErrInvalidArgument, path)
	}
	return s.publish(entry{path: path, kind: kindJSON, raw: bytes.Clone(v)})
}

// Publish publishes any Go value: numbers, strings and booleans directly, nil as null,
// json.RawMessage as is, anything else through encoding/json.
func (s *Stream) Publish(path string, v any) error {
	e, err := toEntry(path, v)
	if err != nil {
		return err
	}
	return s.publish(e)
}

// PublishValues publishes several values into the same batch: all of them or, when one is
// refused, none.
func (s *Stream) PublishValues(items ...sk.Value) error {
	return s.PublishContext("", items...)
}

// PublishContext is PublishValues for another context than vessels.self (""): another
// vessel, an aid to navigation, a base station... (`vessels.urn:mrn:imo:mmsi:230123456`).
// The context is checked as a path (letters, digits and `._-:`); the caller checks the
// Signal K grammar. Besides paths, a value may have the empty path with a JSON object: the
// members set at the context's root; such values are all kept, never replaced.
func (s *Stream) PublishContext(context string, items ...sk.Value) error {
	return s.publishGroup(groupKey{context: context}, items)
}

// publishGroup publishes values into the open batch's group of k, all of them or none.
func (s *Stream) publishGroup(k groupKey, items []sk.Value) error {
	if k.context != "" {
		if err := checkPath(k.context); err != nil {
			return fmt.Errorf("context: %w", err)
		}
	}
	overhead := k.overhead()
	es := make([]entry, len(items))
	for i, it := range items {
		e, err := toEntry(it.Path, it.Value)
		if err != nil {
			return err
		}
		if err := s.checkEntry(k.context, overhead, &e); err != nil {
			return err
		}
		es[i] = e
	}
	ts := s.stamp()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.closed {
		return ErrInvalidState
	}
	g := s.groupLocked(k)
	if total := batchSize(es); total+g.overhead > MaxMessageBytes-g.bytes {
		s.fullLocked(g)
	}
	for i := range es {
		e := &es[i]
		slot := int32(noSlot)
		if e.path != "" {
			var known bool
			if slot, known = g.paths.lookup(e.path, len(g.entries) > 0); !known {
				slot = g.paths.add(e.path)
			}
		}
		s.addLocked(g, slot, e, ts)
	}
	s.armLocked()
	return nil
}

// groupLocked answers the open batch's group of a context and source, adding it (and
// closing a batch that holds MaxBatchContexts others already).
func (s *Stream) groupLocked(k groupKey) *group {
	if k == (groupKey{}) {
		return &s.self
	}
	if g := s.otherIdx[k]; g != nil {
		return g
	}
	if len(s.others) >= MaxBatchContexts {
		s.closeBatchLocked()
	}
	var g *group
	if n := len(s.spareGroups); n > 0 {
		g, s.spareGroups = s.spareGroups[n-1], s.spareGroups[:n-1]
	} else {
		g = newGroup()
	}
	g.context, g.src, g.overhead = k.context, k.src, k.overhead()+len(s.label)
	if s.otherIdx == nil {
		s.otherIdx = make(map[groupKey]*group)
	}
	s.otherIdx[k] = g
	s.others = append(s.others, g)
	return g
}

// contextOverhead is a message's bytes besides its values and label, for a context other
// than vessels.self.
func contextOverhead(context string) int { return deltaOverhead - len("vessels.self") + len(context) }

func batchSize(es []entry) int {
	n := 0
	for i := range es {
		n += es[i].size()
	}
	return n
}

func toEntry(path string, v any) (entry, error) {
	switch x := v.(type) {
	case float64:
		return entry{path: path, kind: kindNumber, num: x}, nil
	case float32:
		return entry{path: path, kind: kindNumber, num: float64(x)}, nil
	case int:
		return entry{path: path, kind: kindNumber, num: float64(x)}, nil
	case int64:
		return entry{path: path, kind: kindNumber, num: float64(x)}, nil
	case uint64:
		return entry{path: path, kind: kindNumber, num: float64(x)}, nil
	case string:
		return entry{path: path, kind: kindString, str: x}, nil
	case bool:
		return entry{path: path, kind: kindBool, b: x}, nil
	case nil:
		return entry{path: path, kind: kindJSON, raw: []byte("null")}, nil
	case json.RawMessage:
		raw := bytes.TrimSpace(x)
		if len(raw) == 0 || !json.Valid(raw) {
			return entry{}, fmt.Errorf("%w: value for %q is not JSON", ErrInvalidArgument, path)
		}
		return entry{path: path, kind: kindJSON, raw: bytes.Clone(raw)}, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return entry{}, fmt.Errorf("%w: value for %q: %v", ErrInvalidArgument, path, err)
	}
	return entry{path: path, kind: kindJSON, raw: b}, nil
}

// checkEntry checks a value for a group of context whose messages have overhead bytes
// besides the values and the label.
func (s *Stream) checkEntry(context string, overhead int, e *entry) error {
	switch {
	case context != "" && e.path == "":
		if e.kind != kindJSON || e.raw[0] != '{' {
			return fmt.Errorf("%w: the root of %s takes a JSON object", ErrInvalidArgument, context)
		}
	default:
		if err := checkPath(e.path); err != nil {
			return err
		}
	}
	return s.checkSize(overhead, e)
}

// checkSize refuses a value that cannot fit a message whose overhead is given.
func (s *Stream) checkSize(overhead int, e *entry) error {
	if e.size()+overhead+len(s.label) > MaxMessageBytes {
		return fmt.Errorf("%w: value for %q is larger than a message", ErrInvalidArgument, e.path)
	}
	return nil
}

// publish adds one value for vessels.self. Its path is looked up in the own vessel's path
// table first: a path found there was checked when it was first published, so only a new
// path is checked (under the lock, once).
func (s *Stream) publish(e entry) error {
	ts := s.stamp()
	s.mu.Lock()
	defer s.mu.Unlock()
	g := &s.self
	slot, known := g.paths.lookup(e.path, len(g.entries) > 0)
	if !known {
		if err := checkPath(e.path); err != nil {
			return err
		}
	}
	if err := s.checkSize(deltaOverhead, &e); err != nil {
		return err
	}
	if !s.started || s.closed {
		return ErrInvalidState
	}
	if !known {
		slot = g.paths.add(e.path)
	}
	s.addLocked(g, slot, &e, ts)
	s.armLocked()
	return nil
}

// addLocked puts a checked value into a group of the open batch: into the place of its path's
// value in the open message (last value wins per path), else at the end; slot is the path's
// in the group's table, noSlot for a root value (all kept). A group whose message would grow
// past MaxMessageBytes goes to the ring first.
func (s *Stream) addLocked(g *group, slot int32, e *entry, ts int64) {
	size := e.size()
	if i, ok := g.paths.current(slot); ok {
		g.bytes += size - g.entries[i].size()
		g.entries[i] = *e
	} else {
		if len(g.entries) > 0 && g.bytes+size+g.overhead > MaxMessageBytes {
			s.fullLocked(g)
		}
		g.paths.place(slot, len(g.entries))
		g.entries = append(g.entries, *e)
		g.bytes += size
	}
	g.ts = max(g.ts, ts)
}

// armLocked closes the batch at once with sk.batch_ms 0, else opens its window.
func (s *Stream) armLocked() {
	switch {
	case s.set.BatchMS == 0:
		s.closeBatchLocked()
	case s.batchDeadline.IsZero() && (len(s.self.entries) > 0 || len(s.others) > 0):
		d := time.Duration(s.set.BatchMS) * time.Millisecond
		s.batchDeadline = s.clk.Now().Add(d)
		if s.batchTimer == nil {
			s.batchTimer = s.clk.AfterFunc(d, s.batchExpired)
		} else {
			s.batchTimer.Reset(d)
		}
	}
}

func (s *Stream) batchExpired() {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A timer that fired for a batch closed early must not cut the next window short.
	if s.batchDeadline.IsZero() || s.clk.Now().Before(s.batchDeadline) {
		return
	}
	s.closeBatchLocked()
}

// closeBatchLocked turns the open batch into delta messages at the end of the ring, one per
// context: the own vessel's first, then the others in the order they joined.
func (s *Stream) closeBatchLocked() {
	s.batchDeadline = time.Time{}
	if s.batchTimer != nil {
		s.batchTimer.Stop()
	}
	s.emitLocked(&s.self)
	for i, g := range s.others {
		s.emitLocked(g)
		delete(s.otherIdx, groupKey{g.context, g.src})
		g.context, g.src = "", sk.Source{}
		g.paths.reset()
		s.spareGroups = append(s.spareGroups, g)
		s.others[i] = nil
	}
	s.others = s.others[:0]
}

// fullLocked sends a group that has no room for more: alone in the batch, the batch closes
// (the next value opens a new window); beside others, it goes out by itself and the window
// stays open for them.
func (s *Stream) fullLocked(g *group) {
	if g == &s.self && len(s.others) == 0 {
		s.closeBatchLocked()
		return
	}
	s.emitLocked(g)
}

// emitLocked turns a group into one delta message at the end of the ring and empties it.
func (s *Stream) emitLocked(g *group) {
	if len(g.entries) == 0 {
		return
	}
	b := appendDeltaFrom(s.bufferLocked(g.bytes+g.overhead), g.context, s.label, &g.src, stampTime(g.ts), g.entries)
	clear(g.entries)
	g.entries = g.entries[:0]
	g.paths.next()
	g.bytes, g.ts = 0, noStamp
	s.ring.add(false, b)
	s.trimLocked()
	s.wakeWriterLocked()
}
