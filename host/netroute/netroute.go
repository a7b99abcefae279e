// Package netroute owns the device's transport-neutral network status: it takes the state of
// each interface (Ethernet and Thread from the board, the WiFi station from the station
// manager), picks the default route with the fixed preference Ethernet over WiFi station over
// Thread, turns route changes into the spec's edges (UP, DOWN, CHANGED), tells subscribers,
// serves GET /net/status, publishes the `net` event when the status changed, and raises
// `netDown` while the network is down.
//
// A preferred interface coming up, the route's interface going away while another is up, and
// an address change on the route's interface are CHANGED. A change on a standby interface, an
// RSSI refresh or a report of the same data is no edge; the `net` event goes out only when
// the status document differs. ip6_ll is the route interface's EUI-64 link-local address,
// derived from its MAC (board.IfaceMAC). A device whose first report finds no interface up
// (the default board before WiFi joins) raises `netDown` then, without an edge.
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

// Iface is one interface's report.
type Iface struct {
	Name    string // eth, wifi_sta, thread
	Up      bool
	IP      string
	Netmask string
	Gateway string
	RSSI    *int // wifi_sta only
}

// preference is the fixed order of the default route.
var preference = []string{board.IfaceEth, board.IfaceWiFiSTA, board.IfaceThread}

// Route is the default route.
type Route struct {
	opts Options

	// report serialises reports, so edges reach subscribers in the order they happened
	// whichever goroutine reported them.
	report sync.Mutex

	mu      sync.Mutex
	ifaces  map[string]Iface
	link    Iface // the route: the preferred interface that is up; Up false when none
	upSince time.Time
	upCount int
	last    Status // the last status published as an event
	told    bool   // netDown has been reported at least once
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
	r := &Route{opts: opts, subs: map[int]func(Edge){}, ifaces: map[string]Iface{}}
	// The document a new SSE stream gets on connect is the baseline: a report that leaves
	// it unchanged (an interface down at boot) is no `net` event.
	r.last = r.statusLocked()
	return r
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

// Update takes a wired interface's report from the board.
func (r *Route) Update(st board.IfState) {
	r.Report(Iface{Name: st.Name, Up: st.Up, IP: st.IP, Netmask: st.Netmask, Gateway: st.Gateway})
}

// Report takes one interface's state. Subscribers hear the edge, if any, before Report returns.
func (r *Route) Report(in Iface) {
	r.report.Lock()
	defer r.report.Unlock()
	if in.Name != board.IfaceWiFiSTA || !in.Up {
		in.RSSI = nil
	}
	r.mu.Lock()
	r.ifaces[in.Name] = in
	prev := r.link
	var l Iface
	for _, name := range preference {
		if i, ok := r.ifaces[name]; ok && i.Up {
			l = i
			break
		}
	}
	var edge Edge
	switch {
	case l.Up && !prev.Up:
		edge = Up
	case !l.Up && prev.Up:
		edge = Down
	case l.Up && (l.Name != prev.Name || l.IP != prev.IP || l.Netmask != prev.Netmask || l.Gateway != prev.Gateway):
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
	// A device that boots with no interface up is down too, though no edge says so.
	first := !r.told
	r.told = true
	r.mu.Unlock()

	if edge == 0 && first && !l.Up && r.opts.Health != nil {
		_ = r.opts.Health.Report("netDown", "warn", "network down")
	}
	if edge != 0 {
		r.opts.Logger.Info("default route", "edge", edge.String(), "iface", l.Name, "ip", l.IP)
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
	st.Iface = r.link.Name
	st.IP, st.Netmask, st.Gateway = r.link.IP, r.link.Netmask, r.link.Gateway
	if mac, err := board.IfaceMAC(r.opts.MAC, st.Iface); err == nil {
		st.IP6LL = board.LinkLocal(mac)
	}
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
	return []api.Route{{Method: http.MethodGet, Path: "/net/status", Handler: api.Document(r.Status)}}
}
