// Package netroute owns the device's transport-neutral network status: it turns the link
// reports of the hardware into the spec's default-route edges (UP, DOWN, CHANGED), tells
// subscribers, serves GET /net/status, publishes the `net` event when the status changed, and
// raises `netDown` while the network is down.
//
// The simulated board reports one interface at a time, so "a preferred interface comes up" and
// "the preferred one goes away" arrive as a report whose interface differs from the current
// one: both are CHANGED, like an address change. An RSSI refresh or a report of the same data
// is no edge; the `net` event goes out only when the status document differs.
package netroute

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/api"
	"devhost/host/board"
)

// Edge is a change of the default route.
type Edge int

// The edges of the spec's "Default network route" table. Changed means network-down then
// network-up: sockets bound to the old address must be rebuilt.
const (
	Up Edge = iota + 1
	Down
	Changed
)

func (e Edge) String() string {
	switch e {
	case Up:
		return "up"
	case Down:
		return "down"
	case Changed:
		return "changed"
	}
	return "none"
}

// Reporter is the health table as this package uses it.
type Reporter interface {
	Report(key, state, message string) error
}

// Options wires the route to the device.
type Options struct {
	Clock    clockwork.Clock
	Logger   *slog.Logger
	MAC      string // base MAC
	ID       string // the device id (last two MAC bytes)
	Hostname func() string
	Publish  func(name string, data any) // the `net` SSE event
	Health   Reporter
}

// Status is the GET /net/status document.
type Status struct {
	Up       bool   `json:"up"`
	Iface    string `json:"iface"`
	IP       string `json:"ip"`
	Netmask  string `json:"netmask"`
	Gateway  string `json:"gateway"`
	IP6LL    string `json:"ip6_ll"`
	MAC      string `json:"mac"`
	Hostname string `json:"hostname"`
	ID       string `json:"id"`
	RSSI     *int   `json:"rssi"`
	UpCount  int    `json:"up_count"`
	UpS      int64  `json:"up_s"`
}

// Route is the default route.
type Route struct {
	opts Options

	mu      sync.Mutex
	link    board.Link // the last report; meaningful when link.Up
	upSince time.Time
	upCount int
	last    Status // the last status published as an event
	subs    map[int]func(Edge)
	nextSub int
}

// New builds the route, down until the first report.
func New(opts Options) *Route {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Hostname == nil {
		opts.Hostname = func() string { return "" }
	}
	if opts.Publish == nil {
		opts.Publish = func(string, any) {}
	}
	return &Route{opts: opts, subs: map[int]func(Edge){}}
}

// Subscribe calls fn on every edge, in order, on the goroutine that reported the link. The
// returned function cancels.
func (r *Route) Subscribe(fn func(Edge)) (cancel func()) {
	r.mu.Lock()
	id := r.nextSub
	r.nextSub++
	r.subs[id] = fn
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.subs, id)
		r.mu.Unlock()
	}
}

// Up reports whether the default route is up.
func (r *Route) Up() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.link.Up
}

// Update takes a link report from the hardware.
func (r *Route) Update(l board.Link) {
	r.mu.Lock()
	prev := r.link
	var edge Edge
	switch {
	case l.Up && !prev.Up:
		edge = Up
	case !l.Up && prev.Up:
		edge = Down
	case l.Up && (l.Iface != prev.Iface || l.IP != prev.IP || l.Netmask != prev.Netmask || l.Gateway != prev.Gateway):
		edge = Changed
	}
	r.link = l
	if edge == Up || edge == Changed {
		r.upCount++
		r.upSince = r.opts.Clock.Now()
	}
	st := r.statusLocked()
	publish := !sameStatus(st, r.last)
	if publish {
		r.last = st
	}
	subs := make([]func(Edge), 0, len(r.subs))
	for i := 0; i < r.nextSub; i++ {
		if fn, ok := r.subs[i]; ok {
			subs = append(subs, fn)
		}
	}
	r.mu.Unlock()

	if edge != 0 {
		r.opts.Logger.Info("default route", "edge", edge.String(), "iface", l.Iface, "ip", l.IP)
		if r.opts.Health != nil {
			if l.Up {
				_ = r.opts.Health.Report("netDown", "normal", "")
			} else {
				_ = r.opts.Health.Report("netDown", "warn", "network down")
			}
		}
		for _, fn := range subs {
			fn(edge)
		}
	}
	if publish {
		r.opts.Publish("net", st)
	}
}

// Status is the current document.
func (r *Route) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.statusLocked()
}

func (r *Route) statusLocked() Status {
	st := Status{MAC: r.opts.MAC, ID: r.opts.ID, Hostname: r.hostname(), UpCount: r.upCount, Iface: "none"}
	if !r.link.Up {
		return st
	}
	st.Up = true
	st.Iface = r.link.Iface
	if st.Iface == "" || st.Iface == "none" {
		st.Iface = "wifi_sta"
	}
	st.IP, st.Netmask, st.Gateway = r.link.IP, r.link.Netmask, r.link.Gateway
	if st.Iface == "wifi_sta" && r.link.RSSI != nil {
		v := *r.link.RSSI
		st.RSSI = &v
	}
	st.UpS = int64(r.opts.Clock.Since(r.upSince) / time.Second)
	return st
}

// hostname is net.hostname, or dev-<id> when empty.
func (r *Route) hostname() string {
	if h := r.opts.Hostname(); h != "" {
		return h
	}
	return "dev-" + r.opts.ID
}

// sameStatus compares documents without the running up_s counter.
func sameStatus(a, b Status) bool {
	if (a.RSSI == nil) != (b.RSSI == nil) || (a.RSSI != nil && *a.RSSI != *b.RSSI) {
		return false
	}
	a.RSSI, b.RSSI = nil, nil
	a.UpS, b.UpS = 0, 0
	return a == b
}

// OnConnect is the `net` event's snapshot for a new SSE stream.
func (r *Route) OnConnect() (string, any) { return "net", r.Status() }

// Routes lists GET /net/status.
func (r *Route) Routes() []api.Route {
	return []api.Route{{Method: http.MethodGet, Path: "/net/status", Handler: func(w http.ResponseWriter, _ *http.Request) {
		api.WriteJSON(w, http.StatusOK, r.Status())
	}}}
}
