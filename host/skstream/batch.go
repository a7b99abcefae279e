package skstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/sk"
)

// batcher is the open batch: values published since the last delta message, one entry per
// path (a newer value replaces an older one in place), closed into a delta message when the
// batch time runs out or the message is full. Guarded by Stream.mu.
type batcher struct {
	batch         []entry
	batchIdx      map[string]int
	batchBytes    int
	batchTS       time.Time
	batchTimer    clockwork.Timer
	batchDeadline time.Time
}

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
	es := make([]entry, len(items))
	for i, it := range items {
		e, err := toEntry(it.Path, it.Value)
		if err != nil {
			return err
		}
		if err := s.checkEntry(&e); err != nil {
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
	if total := batchSize(es); total+deltaOverhead+len(s.label) > MaxMessageBytes-s.batchBytes {
		s.closeBatchLocked()
	}
	for i := range es {
		s.addLocked(es[i], ts)
	}
	s.armLocked()
	return nil
}

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

func (s *Stream) checkEntry(e *entry) error {
	if err := checkPath(e.path); err != nil {
		return err
	}
	if e.size()+deltaOverhead+len(s.label) > MaxMessageBytes {
		return fmt.Errorf("%w: value for %q is larger than a message", ErrInvalidArgument, e.path)
	}
	return nil
}

func (s *Stream) publish(e entry) error {
	if err := s.checkEntry(&e); err != nil {
		return err
	}
	ts := s.stamp()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started || s.closed {
		return ErrInvalidState
	}
	s.addLocked(e, ts)
	s.armLocked()
	return nil
}

// addLocked puts a checked value into the open batch (last value wins per path).
func (s *Stream) addLocked(e entry, ts time.Time) {
	size := e.size()
	if i, ok := s.batchIdx[e.path]; ok {
		s.batchBytes += size - s.batch[i].size()
		s.batch[i] = e
	} else {
		if len(s.batch) > 0 && s.batchBytes+size+deltaOverhead+len(s.label) > MaxMessageBytes {
			s.closeBatchLocked()
		}
		s.batchIdx[e.path] = len(s.batch)
		s.batch = append(s.batch, e)
		s.batchBytes += size
	}
	if ts.After(s.batchTS) {
		s.batchTS = ts
	}
}

// armLocked closes the batch at once with sk.batch_ms 0, else opens its window.
func (s *Stream) armLocked() {
	switch {
	case s.set.BatchMS == 0:
		s.closeBatchLocked()
	case len(s.batch) > 0 && s.batchDeadline.IsZero():
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

// closeBatchLocked turns the open batch into one delta message at the end of the ring.
func (s *Stream) closeBatchLocked() {
	s.batchDeadline = time.Time{}
	if s.batchTimer != nil {
		s.batchTimer.Stop()
	}
	if len(s.batch) == 0 {
		return
	}
	b := appendDelta(s.bufferLocked(s.batchBytes+deltaOverhead+len(s.label)), s.label, s.batchTS, s.batch)
	clear(s.batch)
	s.batch = s.batch[:0]
	clear(s.batchIdx)
	s.batchBytes, s.batchTS = 0, time.Time{}
	s.ring.add(false, b)
	s.trimLocked()
	s.wakeWriterLocked()
}
