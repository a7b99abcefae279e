// Package runtimens owns the run-time namespace registry: plugins register configuration
// namespaces `f_<id>` while the device runs. It enforces the spec's rules (id of at most 12
// characters forming a valid namespace name, 32 slots, no duplicates, a well-formed
// descriptor), hands accepted namespaces to the configuration (which marks them
// `x-dev-runtime` and changes the schema ETag on every register and unregister), and raises the
// health condition `flowConfig` when a registration is refused.
//
// Choices where the spec is silent:
//   - An id is 1 to 12 characters of [a-z0-9_] (so `f_<id>` matches the namespace regex; a
//     leading digit or underscore is fine after the prefix).
//   - A descriptor's own namespace name may be empty or `f_<id>`; anything else is refused.
//   - flowConfig is raised ("warn") by every refusal, naming the id and the reason, and stays
//     raised while any refused id is outstanding. An id stops being outstanding when it later
//     registers successfully or is unregistered (its plugin went away); when none is left the
//     condition returns to "normal". A success for another id does not hide a refusal.
//   - Unregister keeps the namespace's stored values (a reinstalled plugin finds them); Purge
//     erases them.
//   - List returns the registered namespace names (`f_<id>`) in registration order.
package runtimens

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"

	"devhost/host/config"
)

// Limits of the spec.
const (
	MaxIDLen  = 12
	Slots     = 32
	Prefix    = "f_"
	Condition = "flowConfig"
	// maxRefused bounds the outstanding refusals remembered.
	maxRefused = 2 * Slots
)

// Refusal reasons, matched with errors.Is.
var (
	ErrBadID      = errors.New("runtimens: id must be 1 to 12 characters of a-z, 0-9 and _")
	ErrDuplicate  = errors.New("runtimens: namespace already registered")
	ErrFull       = errors.New("runtimens: all 32 run-time namespace slots are in use")
	ErrDescriptor = errors.New("runtimens: malformed descriptor")
	ErrUnknown    = errors.New("runtimens: namespace not registered")
)

var idRE = regexp.MustCompile(`^[a-z0-9_]{1,12}$`)

// Reporter is the health table: Report(key, state, message) with state normal, warn or alarm.
type Reporter interface {
	Report(key, state, message string) error
}

// Registry tracks the run-time namespaces.
type Registry struct {
	cfg    *config.Config
	health Reporter

	mu      sync.Mutex
	order   []string          // registered ids in registration order
	refused map[string]string // outstanding refusals: id -> message
	last    string            // message of the latest refusal
}

// New returns an empty registry over cfg reporting to health.
func New(cfg *config.Config, health Reporter) *Registry {
	return &Registry{cfg: cfg, health: health, refused: map[string]string{}}
}

// Name is the namespace name of a plugin id.
func Name(id string) string { return Prefix + id }

// Register adds the namespace ns for plugin id and returns its name `f_<id>`.
func (r *Registry) Register(id string, ns config.Namespace) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name, err := r.register(id, ns)
	if err != nil {
		return "", r.refuse(id, err)
	}
	return name, nil
}

// RegisterJSON is Register with the descriptor in the spec's JSON shape
// (config.DecodeNamespace).
func (r *Registry) RegisterJSON(id string, descriptor []byte) (string, error) {
	ns, err := config.DecodeNamespace(descriptor)
	if err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		return "", r.refuse(id, fmt.Errorf("%w: %w", ErrDescriptor, err))
	}
	return r.Register(id, ns)
}

func (r *Registry) register(id string, ns config.Namespace) (string, error) {
	if !idRE.MatchString(id) {
		return "", fmt.Errorf("%w: %q", ErrBadID, id)
	}
	name := Name(id)
	if ns.Name != "" && ns.Name != name {
		return "", fmt.Errorf("%w: namespace %q, want %q", ErrDescriptor, ns.Name, name)
	}
	ns.Name = name
	if r.index(id) >= 0 {
		return "", fmt.Errorf("%w: %s", ErrDuplicate, name)
	}
	if len(r.order) >= Slots {
		return "", ErrFull
	}
	if err := config.ValidateNamespace(ns); err != nil {
		return "", fmt.Errorf("%w: %w", ErrDescriptor, err)
	}
	if err := r.cfg.Register(ns); err != nil {
		if errors.Is(err, config.ErrExists) {
			return "", fmt.Errorf("%w: %s", ErrDuplicate, name)
		}
		return "", fmt.Errorf("%w: %w", ErrDescriptor, err)
	}
	r.order = append(r.order, id)
	r.settle(id)
	return name, nil
}

// refuse records a refusal and raises flowConfig. A failure to report is returned alongside
// the refusal so it is never silent.
func (r *Registry) refuse(id string, err error) error {
	shown := id
	if len(shown) > 2*MaxIDLen {
		shown = shown[:2*MaxIDLen] + "..."
	}
	msg := fmt.Sprintf("run-time namespace %q refused: %v", shown, err)
	// The table of outstanding refusals is bounded; beyond it a refusal is still reported.
	if _, known := r.refused[id]; known || len(r.refused) < maxRefused {
		r.refused[id] = msg
	}
	r.last = msg
	return errors.Join(err, r.report())
}

// settle forgets an outstanding refusal of id, lowering flowConfig when none is left.
func (r *Registry) settle(id string) {
	if _, ok := r.refused[id]; !ok {
		return
	}
	delete(r.refused, id)
	r.last = ""
	if len(r.refused) > 0 {
		// Name a refusal that is still outstanding.
		ids := make([]string, 0, len(r.refused))
		for k := range r.refused {
			ids = append(ids, k)
		}
		sort.Strings(ids)
		r.last = r.refused[ids[0]]
	}
	_ = r.report()
}

func (r *Registry) report() error {
	if r.health == nil {
		return nil
	}
	if len(r.refused) == 0 {
		return r.health.Report(Condition, "normal", "")
	}
	msg := r.last
	if n := len(r.refused); n > 1 {
		msg = fmt.Sprintf("%s (%d ids refused)", msg, n)
	}
	return r.health.Report(Condition, "warn", msg)
}

// Unregister removes plugin id's namespace (its stored values stay) and forgets an
// outstanding refusal of id.
func (r *Registry) Unregister(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := r.index(id)
	if i < 0 {
		if _, refused := r.refused[id]; refused {
			r.settle(id)
			return nil
		}
		return fmt.Errorf("%w: %q", ErrUnknown, id)
	}
	if err := r.cfg.Unregister(Name(id)); err != nil {
		return fmt.Errorf("runtimens: unregister %s: %w", Name(id), err)
	}
	r.order = append(r.order[:i:i], r.order[i+1:]...)
	return nil
}

// Purge erases the stored values of plugin id's namespace; it must be unregistered.
func (r *Registry) Purge(id string) error {
	if !idRE.MatchString(id) {
		return fmt.Errorf("%w: %q", ErrBadID, id)
	}
	if err := r.cfg.Purge(Name(id)); err != nil {
		return fmt.Errorf("runtimens: %w", err)
	}
	return nil
}

// List returns the registered namespace names in registration order.
func (r *Registry) List() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, len(r.order))
	for i, id := range r.order {
		out[i] = Name(id)
	}
	return out
}

func (r *Registry) index(id string) int {
	for i, v := range r.order {
		if v == id {
			return i
		}
	}
	return -1
}
