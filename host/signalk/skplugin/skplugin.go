// Package skplugin lets the plugin host use the Signal K client: it adapts *signalk.Client to
// plugin.SignalK, mapping the client's errors to the ABI's error codes (invalid state, busy,
// invalid argument, limit).
package skplugin

import (
	"encoding/json"
	"errors"
	"fmt"

	"devhost/abi"
	"devhost/host/plugin"
	"devhost/host/signalk"
)

// New adapts c for the plugin host.
func New(c *signalk.Client) plugin.SignalK { return adapter{c} }

type adapter struct{ c *signalk.Client }

func errno(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, signalk.ErrInvalidState):
		return fmt.Errorf("%w: %w", abi.ErrState, err)
	case errors.Is(err, signalk.ErrBusy):
		return fmt.Errorf("%w: %w", abi.ErrBusy, err)
	case errors.Is(err, signalk.ErrInvalidArgument):
		return fmt.Errorf("%w: %w", abi.ErrInvalid, err)
	}
	return err
}

func (a adapter) Publish(values ...plugin.SKValue) error {
	vs := make([]signalk.Value, len(values))
	for i, v := range values {
		vs[i] = signalk.Value{Path: v.Path, Value: v.Value}
	}
	return errno(a.c.Publish(vs...))
}

func (a adapter) DeclareMeta(path string, meta json.RawMessage) error {
	return errno(a.c.DeclareMeta(path, meta))
}

func (a adapter) Subscribe(pattern string, deliver func(plugin.Delta)) (func(), error) {
	cancel, err := a.c.Subscribe(pattern, func(d signalk.Delta) {
		deliver(plugin.Delta{Path: d.Path, Value: d.Value, Timestamp: d.Timestamp})
	})
	if err != nil && errors.Is(err, signalk.ErrBusy) {
		return nil, fmt.Errorf("%w: %w", abi.ErrLimit, err)
	}
	return cancel, errno(err)
}

func (a adapter) HandlePut(pattern string, h plugin.PutHandler) (func(), error) {
	remove, err := a.c.HandlePut(pattern, func(req signalk.PutRequest, reply func(signalk.PutResult, string)) {
		h(plugin.PutRequest{Path: req.Path, Value: req.Value}, func(r plugin.PutResult, msg string) {
			reply(signalk.PutResult(r), msg)
		})
	})
	return remove, errno(err)
}

func (a adapter) Put(path string, value json.RawMessage, answer func(plugin.PutAnswer)) error {
	return errno(a.c.Put(path, value, func(p signalk.PutAnswer) {
		answer(plugin.PutAnswer{State: p.State, StatusCode: p.StatusCode, Message: p.Message})
	}))
}
