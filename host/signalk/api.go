package signalk

import (
	"context"
	"devhost/abi"
	"devhost/host/sk"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrBusy: 8 PUTs are in flight.
var ErrBusy = errors.New("signalk: busy")

// ErrInvalidArgument: a path, pattern or value this client refuses.
var ErrInvalidArgument = errors.New("signalk: invalid argument")

// Publish queues values for vessels.self. It is safe from any goroutine, never blocks, and
// answers ErrInvalidState before Run.
func (c *Client) Publish(values ...sk.Value) error {
	if err := checkStarted(c); err != nil {
		return err
	}
	for _, v := range values {
		if err := checkValue(v); err != nil {
			return err
		}
	}
	return c.stream.Publish(values...)
}

// PublishContext queues values for another context than vessels.self: another vessel, an
// aid to navigation, a base station, an aircraft or a SAR transponder (abi.ValidContext's
// grammar, `vessels.urn:mrn:imo:mmsi:230123456`). They are batched, buffered and drained as
// the own vessel's values, one delta message per context. A value with the empty path and a
// JSON object sets members at the context's root (a target's name, mmsi, call sign).
func (c *Client) PublishContext(context string, values ...sk.Value) error {
	if err := checkStarted(c); err != nil {
		return err
	}
	if err := abi.ValidContext(context); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if err := checkContextValues(context, values); err != nil {
		return err
	}
	return c.stream.PublishContext(context, values...)
}

// checkContextValues checks values for context ("": vessels.self, whose root takes none).
func checkContextValues(context string, values []sk.Value) error {
	for _, v := range values {
		if v.Path == "" && context != "" {
			if raw, ok := v.Value.(json.RawMessage); ok && isObject(raw) {
				continue
			}
			return fmt.Errorf("%w: the root of %s takes a JSON object", ErrInvalidArgument, context)
		}
		if err := checkValue(v); err != nil {
			return err
		}
	}
	return nil
}

// isObject reports whether raw is one JSON object.
func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

func checkValue(v sk.Value) error {
	if !validPath(v.Path) {
		return fmt.Errorf("%w: path %q", ErrInvalidArgument, v.Path)
	}
	switch x := v.Value.(type) {
	case nil, string, bool, json.RawMessage:
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("%w: %s is not a finite number", ErrInvalidArgument, v.Path)
		}
	default:
		return fmt.Errorf("%w: %s: value of type %T", ErrInvalidArgument, v.Path, v.Value)
	}
	return nil
}

// PublishNumber queues a number.
func (c *Client) PublishNumber(path string, v float64) error {
	return c.Publish(sk.Value{Path: path, Value: v})
}

// PublishString queues a string.
func (c *Client) PublishString(path, v string) error {
	return c.Publish(sk.Value{Path: path, Value: v})
}

// PublishBool queues a boolean.
func (c *Client) PublishBool(path string, v bool) error {
	return c.Publish(sk.Value{Path: path, Value: v})
}

// PublishJSON queues any JSON value (an object, an array, null…).
func (c *Client) PublishJSON(path string, v json.RawMessage) error {
	if !json.Valid(v) {
		return fmt.Errorf("%w: %s: not JSON", ErrInvalidArgument, path)
	}
	return c.Publish(sk.Value{Path: path, Value: json.RawMessage(compact(v))})
}

// DeclareMeta declares the metadata of a non-standard path (reconciled on every connect). A
// period above zero is how often the path is published: the declaration then carries
// `timeout` = 2.5 × period in seconds, so the server can tell a stale value.
func (c *Client) DeclareMeta(path string, meta json.RawMessage, period time.Duration) error {
	if !validPath(path) || !json.Valid(meta) {
		return fmt.Errorf("%w: meta for %q", ErrInvalidArgument, path)
	}
	if period < 0 {
		return fmt.Errorf("%w: meta for %q: negative period", ErrInvalidArgument, path)
	}
	return c.stream.DeclareMeta(path, meta, period)
}

// Subscribe delivers values of an exact path or a family (`prefix.*`, `prefix*`, `*`).
func (c *Client) Subscribe(pattern string, fn func(sk.Delta)) (cancel func(), err error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: nil callback", ErrInvalidArgument)
	}
	return c.stream.Subscribe(pattern, fn)
}

// HandlePut routes inbound PUTs for paths matching pattern (an exact path or a family) to h.
//
// The server routes a PUT only to a path this device has published, so an exact path's handler
// should come with current, which reads the path's present state (ok false while it is
// unknown). That state is published when the handler is registered, on every connect and after
// each successful PUT. A family takes no current (ErrInvalidArgument): register its known
// paths one by one for that.
func (c *Client) HandlePut(pattern string, h sk.PutHandler, current func() (value any, ok bool)) (remove func(), err error) {
	if h == nil {
		return nil, fmt.Errorf("%w: nil handler", ErrInvalidArgument)
	}
	if current == nil {
		return c.stream.HandlePut(pattern, h, nil)
	}
	if !validPath(pattern) {
		return nil, fmt.Errorf("%w: a current state needs an exact path, not %q", ErrInvalidArgument, pattern)
	}
	return c.stream.HandlePut(pattern, h, stateGetter(pattern, current))
}

// stateGetter adapts a caller's state reader to the stream's, which skips a nil answer: JSON
// null is sent as raw JSON, an unknown or unpublishable state not at all. A state with a
// source of its own (sk.Sourced) keeps it.
func stateGetter(path string, current func() (any, bool)) func() any {
	return func() any {
		v, ok := current()
		sv, sourced := v.(sk.Sourced)
		if sourced {
			v = sv.Value
		}
		if !ok || checkValue(sk.Value{Path: path, Value: v}) != nil {
			return nil
		}
		if v == nil {
			v = json.RawMessage("null")
		}
		if sourced {
			sv.Value = v
			return sv
		}
		return v
	}
}

// Put sends a PUT to the server; answer is called once (COMPLETED, FAILED or TIMEOUT). An error
// means nothing was sent: ErrBusy with 8 in flight, ErrInvalidState when the stream is down.
func (c *Client) Put(path string, value json.RawMessage, answer func(sk.PutAnswer)) error {
	if err := checkStarted(c); err != nil {
		return err
	}
	if !validPath(path) || !json.Valid(value) {
		return fmt.Errorf("%w: PUT %q", ErrInvalidArgument, path)
	}
	if answer == nil {
		answer = func(sk.PutAnswer) {}
	}
	return c.stream.Put(path, value, answer)
}

// Flush closes the current batch and waits until everything was sent (nil), ctx ends
// (context.DeadlineExceeded or the ctx error), or the stream is down (ErrInvalidState).
func (c *Client) Flush(ctx context.Context) error {
	if err := checkStarted(c); err != nil {
		return err
	}
	return c.stream.Flush(ctx)
}
