// Package skplugin lets the plugin host use the Signal K client: it adapts *signalk.Client to
// plugin.SignalK, mapping the client's errors to the ABI's error codes (invalid state, busy,
// invalid argument, limit).
//
// It also keeps the state of the paths plugins answer PUTs for. The server routes a PUT only
// to a path this device has published, and forgets that when it restarts, so the state must be
// published again on every connect. Plugins publish their state as ordinary values; the
// adapter keeps the last value published for each path under a plugin's PUT pattern and
// registers that path with the client as PUT-able with that value as its current state.
package skplugin

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"devhost/abi"
	"devhost/host/plugin"
	"devhost/host/signalk"
	"devhost/host/sk"
	"devhost/host/skstream"
)

// MaxStatePaths bounds the PUT-able paths whose state is kept. A path published past it is
// still answered through its pattern, but its state is not published again on reconnect.
const MaxStatePaths = 256

// New adapts c for the plugin host.
func New(c *signalk.Client) plugin.SignalK {
	return &adapter{c: c, pats: map[string]*patReg{}, paths: map[string]*pathState{}}
}

type adapter struct {
	c *signalk.Client

	// regMu orders the registrations with the client, which run outside mu: registering an
	// exact path reads its state through mu at once.
	regMu sync.Mutex

	mu sync.Mutex
	// pats are the PUT patterns plugins registered.
	pats map[string]*patReg
	// paths are the exact paths registered with the client with a current state.
	paths map[string]*pathState
}

// patReg is one plugin pattern; remove is its family registration with the client (nil for
// an exact path, which lives in paths).
type patReg struct {
	h      sk.PutHandler
	remove func()
}

type pathState struct {
	value  any
	src    sk.Source // the source the value came with; the zero Source: the device's own
	known  bool
	remove func()
}

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

func (a *adapter) Publish(values ...sk.Value) error {
	return a.publishKept(values, sk.Source{}, a.c.Publish)
}

// publishKept publishes the own vessel's values through publish, keeping the state of those
// under a plugin's PUT pattern with src, the source they are published with.
func (a *adapter) publishKept(vs []sk.Value, src sk.Source, publish func(...sk.Value) error) error {
	a.mu.Lock()
	var covered []int // the values under a plugin's PUT pattern, whose state is kept
	if len(a.pats) > 0 {
		for i, v := range vs {
			if a.ownerLocked(v.Path) != nil {
				covered = append(covered, i)
			}
		}
	}
	if len(covered) == 0 {
		a.mu.Unlock()
		return errno(publish(vs...))
	}
	// Published and recorded under one lock, so a reconnect reading the state in between
	// cannot send an older value after this one.
	err := publish(vs...)
	var fresh []string
	if err == nil {
		for _, i := range covered {
			v := vs[i]
			st := a.paths[v.Path]
			if st == nil {
				if len(a.paths) >= MaxStatePaths {
					continue
				}
				st = &pathState{}
				a.paths[v.Path] = st
				fresh = append(fresh, v.Path)
			}
			st.value, st.src, st.known = v.Value, src, true
		}
	}
	a.mu.Unlock()
	if len(fresh) > 0 {
		a.regMu.Lock()
		for _, p := range fresh {
			a.registerPath(p)
		}
		a.regMu.Unlock()
	}
	return errno(err)
}

// PublishContext passes another context's values on: PUTs and their kept state are the own
// vessel's only.
func (a *adapter) PublishContext(context string, values ...sk.Value) error {
	return errno(a.c.PublishContext(context, values...))
}

// PublishSource passes values with their own source on; the own vessel's keep their PUT
// state as Publish's do, whatever their source.
func (a *adapter) PublishSource(src sk.Source, context string, values ...sk.Value) error {
	if context != "" {
		return errno(a.c.PublishSource(src, context, values...))
	}
	return a.publishKept(values, src, func(vs ...sk.Value) error { return a.c.PublishSource(src, "", vs...) })
}

// registerPath registers an exact path with the client, with its kept state as the current
// one, unless the path was dropped meanwhile. regMu is held.
func (a *adapter) registerPath(path string) {
	a.mu.Lock()
	st := a.paths[path]
	a.mu.Unlock()
	if st == nil {
		return
	}
	remove, err := a.c.HandlePut(path, a.dispatch, a.current(path))
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case err != nil:
		// Only a path the client refuses ends here; its PUTs stay with the family, if any.
		if a.paths[path] == st {
			delete(a.paths, path)
		}
	case a.paths[path] == st:
		st.remove = remove
	default:
		// Dropped while registering: undo it once mu is released.
		defer remove()
	}
}

func (a *adapter) current(path string) func() (any, bool) {
	return func() (any, bool) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if st := a.paths[path]; st != nil && st.known {
			if st.src != (sk.Source{}) {
				return sk.Sourced{Source: st.src, Value: st.value}, true
			}
			return st.value, true
		}
		return nil, false
	}
}

// ownerLocked finds the plugin handler of a path the way the stream routes (skstream.Route).
func (a *adapter) ownerLocked(path string) *patReg {
	r, _ := skstream.Route(a.pats, path)
	return r
}

// dispatch is the one handler the adapter registers with the client: it picks the plugin
// pattern that owns the path at the time of the request.
func (a *adapter) dispatch(req sk.PutRequest, reply func(sk.PutResult, string)) {
	a.mu.Lock()
	r := a.ownerLocked(req.Path)
	a.mu.Unlock()
	if r == nil {
		reply(sk.PutFailure, "no handler for "+req.Path)
		return
	}
	r.h(req, reply)
}

func (a *adapter) DeclareMeta(path string, meta json.RawMessage) error {
	// The ABI's sk_meta carries no period; a plugin that wants a timeout writes it into meta.
	return errno(a.c.DeclareMeta(path, meta, 0))
}

func (a *adapter) Subscribe(pattern string, deliver func(sk.Delta)) (func(), error) {
	cancel, err := a.c.Subscribe(pattern, deliver)
	if err != nil && errors.Is(err, signalk.ErrBusy) {
		return nil, fmt.Errorf("%w: %w", abi.ErrLimit, err)
	}
	return cancel, errno(err)
}

// HandlePut registers a plugin's pattern. Registering a pattern again replaces its handler.
func (a *adapter) HandlePut(pattern string, h sk.PutHandler) (func(), error) {
	if h == nil {
		return nil, fmt.Errorf("%w: %w: nil handler", abi.ErrInvalid, signalk.ErrInvalidArgument)
	}
	a.regMu.Lock()
	defer a.regMu.Unlock()
	reg := &patReg{h: h}
	_, family := strings.CutSuffix(pattern, "*")
	var err error
	if family {
		reg.remove, err = a.c.HandlePut(pattern, a.dispatch, nil)
		if err != nil {
			return nil, errno(err)
		}
	}
	// A family registered again replaced its registration with the client above; an exact
	// path keeps the one it has.
	a.mu.Lock()
	a.pats[pattern] = reg
	needPath := false
	if !family && a.paths[pattern] == nil {
		a.paths[pattern] = &pathState{}
		needPath = true
	}
	a.mu.Unlock()
	if needPath {
		a.registerPath(pattern)
		a.mu.Lock()
		_, ok := a.paths[pattern]
		if !ok && a.pats[pattern] == reg {
			delete(a.pats, pattern)
		}
		a.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("%w: %w: PUT pattern %q", abi.ErrInvalid, signalk.ErrInvalidArgument, pattern)
		}
	}
	var once sync.Once
	return func() { once.Do(func() { a.removePattern(pattern, reg) }) }, nil
}

// removePattern drops a plugin pattern and every kept path no pattern owns any more.
func (a *adapter) removePattern(pattern string, reg *patReg) {
	a.regMu.Lock()
	defer a.regMu.Unlock()
	a.mu.Lock()
	if a.pats[pattern] != reg {
		a.mu.Unlock()
		return
	}
	delete(a.pats, pattern)
	var removes []func()
	if reg.remove != nil {
		removes = append(removes, reg.remove)
	}
	for p, st := range a.paths {
		if a.ownerLocked(p) == nil {
			delete(a.paths, p)
			if st.remove != nil {
				removes = append(removes, st.remove)
			}
		}
	}
	a.mu.Unlock()
	for _, rm := range removes {
		rm()
	}
}

func (a *adapter) Put(path string, value json.RawMessage, answer func(sk.PutAnswer)) error {
	return errno(a.c.Put(path, value, answer))
}
