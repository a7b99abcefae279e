package mdns

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
)

type entryState int

const (
	stateIdle entryState = iota // no network
	stateProbing
	stateAnnouncing
	stateAnnounced
)

func (s entryState) String() string {
	return [...]string{"idle", "probing", "announcing", "announced"}[s]
}

// entry is one name the responder owns: the host or a service instance.
type entry struct {
	host    bool
	key     serviceKey
	svc     Service // Instance holds the base name
	app     bool
	base    string
	n       int // 1 for the base name, then the rename counter
	prevTXT []string
	state   entryState
	step    int
	timer   clockwork.Timer
	gen     uint64
	removed bool
	// lastMcast is when the entry's records last went out by multicast.
	lastMcast time.Time
	// sent: the records under the current name were announced and not said goodbye to, so
	// other hosts may hold them (also while the name is probed again after a network
	// change).
	sent bool
}

func (e *entry) label() string { return renamed(e.base, e.n, e.host) }

func (e *entry) active() bool { return e.state == stateAnnouncing || e.state == stateAnnounced }

func (e *entry) typeFQDN() string { return e.svc.Type + "." + e.svc.Proto + "." + domain }

func (e *entry) instanceFQDN() string { return e.label() + "." + e.typeFQDN() }

// SetHostname changes the host label: goodbye for the old name, then probing and announcing
// the new one (and the services, whose SRV records point at it). Services registered without
// an instance name follow the host name: goodbye for the old instance, then probing and
// announcing under the new one.
func (r *Responder) SetHostname(h string) error {
	if err := ValidHostname(h); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if h == r.host.base && r.host.n == 1 {
		return nil
	}
	r.goodbye(r.host)
	if r.link != nil {
		r.link.StopHost()
	}
	r.host.base, r.host.n = h, 1
	if r.link != nil {
		r.startProbe(r.host, r.probeDelay())
	}
	for _, e := range r.services {
		if e.key.instance != "" {
			continue
		}
		r.goodbye(e)
		r.stop(e)
		e.base, e.n, e.svc.Instance = h, 1, h
		e.state = stateIdle
		if r.link != nil {
			r.startProbe(e, r.probeDelay())
		}
	}
	return nil
}

// Register adds one of the device's own services (not counted in the application slots).
func (r *Responder) Register(s Service) error { return r.register(s, false) }

// RegisterApp adds an application service, which takes one of the Slots; with all slots used
// it returns ErrNoSlot.
func (r *Responder) RegisterApp(s Service) error { return r.register(s, true) }

func (r *Responder) register(s Service, app bool) error {
	if err := s.validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	key := keyOf(s.Instance, s.Type, s.Proto)
	base := s.Instance
	base = cmp.Or(base, r.host.base)
	apps := 0
	for _, e := range r.services {
		if e.key == key || strings.EqualFold(e.base, base) && strings.EqualFold(e.typeFQDN(), s.Type+"."+s.Proto+"."+domain) {
			return fmt.Errorf("%w: %s.%s.%s", ErrExists, base, s.Type, s.Proto)
		}
		if e.app {
			apps++
		}
	}
	if app && apps >= r.cfg.Slots {
		return fmt.Errorf("%w (%d in use)", ErrNoSlot, apps)
	}
	svc := s
	svc.Instance = base
	svc.TXT = slices.Clone(s.TXT)
	e := &entry{key: key, svc: svc, app: app, base: base, n: 1}
	r.services = append(r.services, e)
	if r.link != nil {
		r.startProbe(e, r.probeDelay())
	}
	return nil
}

// registered answers the service registered under these names and its index in r.services:
// ErrClosed once the responder is closed, ErrNotFound when there is none. r.mu is held.
func (r *Responder) registered(instance, typ, proto string) (*entry, int, error) {
	if r.closed {
		return nil, -1, ErrClosed
	}
	i := slices.IndexFunc(r.services, func(e *entry) bool { return e.key == keyOf(instance, typ, proto) })
	if i < 0 {
		return nil, -1, fmt.Errorf("%w: %q %s.%s", ErrNotFound, instance, typ, proto)
	}
	return r.services[i], i, nil
}

// Unregister removes a service, named as it was registered, and sends its goodbye.
func (r *Responder) Unregister(instance, typ, proto string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, i, err := r.registered(instance, typ, proto)
	if err != nil {
		return err
	}
	r.goodbye(e)
	r.stop(e)
	e.removed = true
	r.services = slices.Delete(r.services, i, i+1)
	return nil
}

// UpdateTXT replaces a service's TXT items and announces them again (RFC 6762 §8.4).
func (r *Responder) UpdateTXT(instance, typ, proto string, txt []string) error {
	if err := validTXT(txt); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, _, err := r.registered(instance, typ, proto)
	if err != nil {
		return err
	}
	if slices.Equal(e.svc.TXT, txt) {
		return nil
	}
	e.prevTXT = e.svc.TXT
	e.svc.TXT = slices.Clone(txt)
	if e.active() {
		r.startAnnounce(e, 0)
	}
	return nil
}

// ServiceStatus is a registered service as it is advertised now.
type ServiceStatus struct {
	Service           // Instance is the name in use
	Registered string `json:"registered"` // the instance as registered ("" for the hostname)
	App        bool   `json:"app"`
	State      string `json:"state"` // idle, probing, announcing, announced
}

// Services lists the registered services in registration order.
func (r *Responder) Services() []ServiceStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]ServiceStatus, 0, len(r.services))
	for _, e := range r.services {
		svc := e.svc
		svc.Instance = e.label()
		svc.TXT = slices.Clone(e.svc.TXT)
		out = append(out, ServiceStatus{Service: svc, Registered: e.key.instance, App: e.app, State: e.state.String()})
	}
	return out
}

func (r *Responder) all() []*entry {
	return append([]*entry{r.host}, r.services...)
}
