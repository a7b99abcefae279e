// Package sntp keeps the device's wall clock set from NTP servers: the SNTP source of the
// spec's "Clock sources" (rank 4, the highest). Polling starts at the first network-up; every
// answer sets the clock through the device clock, whose subscribers (the Signal K time
// fallback among them) learn that a better source holds it. The NTP exchange itself is
// github.com/beevik/ntp.
//
// Choices where the spec is silent:
//   - Servers are tried in order for each poll: time.server0, time.server1, then the NTP
//     server the board's DHCP lease offered (when time.from_dhcp is on); the first valid
//     answer wins. An empty server is skipped.
//   - After a valid answer the next poll is Interval later (one hour, as ESP-IDF's SNTP
//     default). When every server fails the next poll comes after a backoff of 2 s doubling
//     to at most 5 minutes; a valid answer resets it.
//   - While the network is down nothing is polled; every network-up (the first, or after a
//     down or a route change) polls at once and resets the backoff.
//   - An answer is refused (counted as a failure) when the library's validation refuses it
//     (kiss-of-death, stratum 0 or 16, unsynchronised leap indicator, root distance over
//     16 s) or when its time is outside the clock's accepted range, so the clock never
//     takes a 1970 value from a server that has none.
//   - `running` in the time document is true from the first network-up while SNTP is
//     enabled, whether or not a server answered.
//   - time.sntp, time.server0/1 and time.from_dhcp are restart-required keys: the
//     configuration is read once, at New.
package sntp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/beevik/ntp"
	"github.com/jonboulle/clockwork"
)

// Polling intervals.
const (
	Interval       = time.Hour       // after a valid answer
	BackoffMin     = 2 * time.Second // after the first failed poll
	BackoffMax     = 5 * time.Minute
	DefaultTimeout = 5 * time.Second // one server's answer
)

// Config is the SNTP part of the configuration.
type Config struct {
	Enabled  bool     // time.sntp
	Servers  []string // time.server0, time.server1 ("" skipped)
	FromDHCP bool     // time.from_dhcp
}

// DHCPServer is the NTP server the board's DHCP lease offered (DHCP option 42), as a host
// name or address, optionally with a port; "" when the lease offered none or there is no
// lease. The board's network side provides it.
type DHCPServer interface {
	NTPServer() string
}

// QueryFunc asks one server for the time and returns the current time by its answer.
type QueryFunc func(ctx context.Context, server string) (time.Time, error)

// Options configure a Client.
type Options struct {
	Config Config
	// Set sets the device clock as source sntp (clock.Clock.Set with clock.SourceSNTP); its
	// error refuses the answer.
	Set    func(time.Time) error
	DHCP   DHCPServer      // nil: no DHCP-offered server
	Clock  clockwork.Clock // polling timers; nil is the real clock
	Logger *slog.Logger
	// Query is the NTP exchange; nil is NTPQuery with DefaultTimeout.
	Query QueryFunc
}

// Status is what the time document shows of SNTP, and what tests inspect.
type Status struct {
	Enabled  bool
	Running  bool     // polling started (the first network-up happened)
	FromDHCP bool     // the DHCP-offered server is used
	Servers  []string // configured non-empty servers
	Synced   bool     // a server answered at least once
	Server   string   // the server of the last valid answer
	Failures int      // consecutive failed polls
}

// Client polls the servers and sets the clock.
type Client struct {
	opts  Options
	clk   clockwork.Clock
	log   *slog.Logger
	query QueryFunc
	kick  chan struct{} // the network state changed

	mu    sync.Mutex
	st    Status
	up    bool   // the network is up
	upGen uint64 // counts network-ups, so a down-then-up seen late still polls
}

// New builds the client; it polls nothing until Run runs and the network comes up.
func New(opts Options) (*Client, error) {
	if opts.Set == nil {
		return nil, errors.New("sntp: no clock to set")
	}
	c := &Client{opts: opts, clk: opts.Clock, log: opts.Logger, query: opts.Query, kick: make(chan struct{}, 1)}
	c.clk = cmp.Or(c.clk, clockwork.NewRealClock())
	c.log = cmp.Or(c.log, slog.New(slog.DiscardHandler))
	if c.query == nil {
		c.query = NTPQuery(DefaultTimeout)
	}
	c.st = Status{Enabled: opts.Config.Enabled, FromDHCP: opts.Config.FromDHCP, Servers: []string{}}
	for _, s := range opts.Config.Servers {
		if s != "" {
			c.st.Servers = append(c.st.Servers, s)
		}
	}
	return c, nil
}

// Status reports the client's state.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.st
	st.Servers = append([]string(nil), c.st.Servers...)
	return st
}

// NetworkUp tells the client the network came up (or its route changed): it polls at once.
// It never blocks.
func (c *Client) NetworkUp() { c.network(true) }

// NetworkDown stops polling until the next NetworkUp. It never blocks.
func (c *Client) NetworkDown() { c.network(false) }

func (c *Client) network(up bool) {
	c.mu.Lock()
	c.up = up
	if up {
		c.upGen++
	}
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default: // a kick is pending: Run reads the latest state
	}
}

// Run polls until ctx ends. With SNTP disabled it only waits.
func (c *Client) Run(ctx context.Context) error {
	var timer clockwork.Timer
	var due <-chan time.Time
	stop := func() {
		if timer != nil {
			timer.Stop()
		}
		timer, due = nil, nil
	}
	defer stop()
	backoff := time.Duration(0)
	var seen uint64 // the last network-up acted on
	poll := func() {
		stop()
		next := Interval
		if c.poll(ctx) {
			backoff = 0
		} else {
			backoff = min(max(2*backoff, BackoffMin), BackoffMax)
			next = backoff
		}
		if ctx.Err() == nil {
			timer = c.clk.NewTimer(next)
			due = timer.Chan()
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.kick:
			c.mu.Lock()
			up, gen := c.up, c.upGen
			c.mu.Unlock()
			if !c.opts.Config.Enabled {
				continue
			}
			if !up {
				stop()
				continue
			}
			if gen == seen {
				continue
			}
			seen = gen
			c.mu.Lock()
			first := !c.st.Running
			c.st.Running = true
			c.mu.Unlock()
			if first {
				c.log.Info("sntp: polling started", "servers", c.servers())
			}
			backoff = 0
			poll()
		case <-due:
			// The timer can fire while a NetworkDown's kick is pending (select picks at
			// random): the state decides, so nothing is polled while down.
			c.mu.Lock()
			up := c.up
			c.mu.Unlock()
			if !up {
				stop()
				continue
			}
			poll()
		}
	}
}

// servers are the servers of one poll, in order.
func (c *Client) servers() []string {
	out := c.Status().Servers
	if c.opts.Config.FromDHCP && c.opts.DHCP != nil {
		if s := c.opts.DHCP.NTPServer(); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// poll asks each server in turn until one answers validly and sets the clock with it.
func (c *Client) poll(ctx context.Context) bool {
	var errs []error
	for _, server := range c.servers() {
		t, err := c.query(ctx, server)
		if err == nil {
			err = c.opts.Set(t)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", server, err))
			continue
		}
		c.mu.Lock()
		first := !c.st.Synced
		c.st.Synced, c.st.Server, c.st.Failures = true, server, 0
		c.mu.Unlock()
		if first {
			c.log.Info("sntp: clock set", "server", server)
		} else {
			c.log.Debug("sntp: clock refreshed", "server", server)
		}
		return true
	}
	c.mu.Lock()
	c.st.Failures++
	n := c.st.Failures
	c.mu.Unlock()
	if len(errs) == 0 {
		errs = append(errs, errors.New("no server configured"))
	}
	if ctx.Err() == nil {
		c.log.Warn("sntp: no server answered", "failures", n, "err", errors.Join(errs...))
	}
	return false
}

// NTPQuery is the NTP exchange of github.com/beevik/ntp: one request, the answer validated,
// and the current time by the answer's clock offset. The exchange ends when ctx does.
func NTPQuery(timeout time.Duration) QueryFunc {
	return func(ctx context.Context, server string) (time.Time, error) {
		opts := ntp.QueryOptions{Timeout: timeout, Dialer: func(local, remote string) (net.Conn, error) {
			d := net.Dialer{}
			if local != "" {
				d.LocalAddr = &net.UDPAddr{IP: net.ParseIP(local)}
			}
			conn, err := d.DialContext(ctx, "udp", remote)
			if err != nil {
				return nil, err
			}
			// Shutdown ends a wait for the answer at once.
			stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
			return closeHook{Conn: conn, stop: stop}, nil
		}}
		resp, err := ntp.QueryWithOptions(server, opts)
		if err != nil {
			return time.Time{}, fmt.Errorf("ntp query: %w", err)
		}
		if err := resp.Validate(); err != nil {
			return time.Time{}, fmt.Errorf("ntp answer refused: %w", err)
		}
		return time.Now().Add(resp.ClockOffset), nil
	}
}

// closeHook releases the context hook when the library closes the connection.
type closeHook struct {
	net.Conn
	stop func() bool
}

func (c closeHook) Close() error {
	c.stop()
	return c.Conn.Close()
}
