// Package portal is the network side of the setup access point: while the portal is up it
// gives the device's HTTP server a second listener on the portal address, answers every DNS
// name with that address, hands out DHCP leases in the portal's /24 and redirects the
// captive-portal probes to the portal's root page. The radio (the access point itself) and
// the decision when the portal is up belong to the WiFi station manager, which drives this
// package through Up and Down.
//
// Addresses. The portal address is the board's (Hardware.PortalIP): on the simulated board a
// loopback address such as 127.4.1.1, so several simulated devices run side by side, each on
// its own address; on a real board the spec's 192.168.4.1 on the interface the board names.
// HTTP (httpd.port) and DNS (53) bind on the portal address only. DHCP (67) binds on the
// portal address for a loopback portal; on a real interface it binds 0.0.0.0:67 tied to that
// interface (SO_BINDTODEVICE), because a client without an address broadcasts its DISCOVER
// and Linux delivers broadcasts only to sockets bound to the wildcard address.
//
// A bind that fails raises the health condition KeyBind (warn, naming the services that did
// not start) and leaves the rest of the portal, and the device, running.
package portal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/health"
)

// KeyBind is the health condition raised while the portal is up with a service (HTTP, DNS or
// DHCP) whose socket could not be bound; it returns to normal when a later Up binds them all
// and when the portal goes down.
const KeyBind = "portalBind"

// Standard ports of the portal's services.
const (
	DNSPort  = 53
	DHCPPort = 67
)

// Reporter is the health table as this package uses it.
type Reporter interface {
	Report(key, state, message string) error
}

// Authenticator is the device's credential check, used by the probes on the station side.
type Authenticator interface {
	Check(r *http.Request) error
	WriteError(w http.ResponseWriter, err error)
}

// Options configure a Portal. IP and Serve are required.
type Options struct {
	Clock  clockwork.Clock
	Logger *slog.Logger
	// IP is the portal's IPv4 address (the board's PortalIP).
	IP string
	// Iface is the real interface that carries IP; "" is the simulated loopback portal.
	Iface string
	// HTTPPort returns httpd.port; nil means 80.
	HTTPPort func() int
	// Serve is the device's HTTP server answering on one more listener until ctx ends
	// ((*httpd.Server).Serve). Nil means the server already answers on the portal address
	// (a station listener bound to all addresses holds the port): no listener of its own.
	Serve func(ctx context.Context, ln net.Listener) error
	// Auth checks the probes' credentials on the station side; nil lets every request pass.
	Auth Authenticator
	// Health receives KeyBind; nil reports nowhere.
	Health Reporter
	// LeaseTime is the DHCP lease; 0 means DefaultLeaseTime.
	LeaseTime time.Duration
	// DNSPort and DHCPPort override the standard ports (tests of a second portal); 0 means
	// the standard port.
	DNSPort, DHCPPort int
}

// Stats counts what the portal's UDP services dropped.
type Stats struct {
	DNSDropped  uint64 `json:"dns_dropped"`  // packets that did not parse as a DNS query
	DHCPDropped uint64 `json:"dhcp_dropped"` // packets that did not parse as a DHCP request
}

// Portal is the setup access point's network side. Its methods are safe for concurrent use.
type Portal struct {
	opts Options
	log  *slog.Logger
	ip   net.IP // 4-byte form of opts.IP; nil when it does not parse

	mu      sync.Mutex
	up      bool
	missing int // services (svc* bits) whose bind failed while up; the next Up retries them
	ctx     context.Context
	cancel  context.CancelFunc
	conns   []closer
	wg      sync.WaitGroup
	leases  *leases

	dnsDropped  atomic.Uint64
	dhcpDropped atomic.Uint64
	upIP        atomic.Pointer[string]
}

type closer interface{ Close() error }

// New builds a portal that is down.
func New(opts Options) *Portal {
	opts.Clock = cmp.Or(opts.Clock, clockwork.NewRealClock())
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	if opts.LeaseTime <= 0 {
		opts.LeaseTime = DefaultLeaseTime
	}
	opts.DNSPort = cmp.Or(opts.DNSPort, DNSPort)
	opts.DHCPPort = cmp.Or(opts.DHCPPort, DHCPPort)
	p := &Portal{opts: opts, log: opts.Logger, ip: net.ParseIP(opts.IP).To4()}
	empty := ""
	p.upIP.Store(&empty)
	return p
}

// The portal's network services, as bits of Portal.missing.
const (
	svcHTTP = 1 << iota
	svcDNS
	svcDHCP
	svcAll = svcHTTP | svcDNS | svcDHCP
)

// Up brings the portal's listener, DNS responder and DHCP server up. The returned error names
// the services whose bind failed; the others run all the same. A second Up while up starts
// the services that failed before (another process may have let go of the address) and
// leaves the running ones alone; with every service running it changes nothing. The SSID and
// passphrase are the radio's business (the network services are the same either way). The
// outcome goes to the health table (KeyBind) and to the caller; the station manager, which
// decides when the portal is up, logs it, so the portal does not log it a second time.
func (p *Portal) Up(_, _ string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.up && p.missing == 0 {
		return nil
	}
	if p.ip == nil {
		err := fmt.Errorf("portal address %q: not an IPv4 address", p.opts.IP)
		p.report("warn", err.Error())
		return err
	}
	if !p.up {
		p.ctx, p.cancel = context.WithCancel(context.Background())
		p.leases = newLeases(p.opts.Clock, p.ip, p.opts.LeaseTime)
		p.missing = svcAll
	}
	var errs []error
	for _, svc := range []struct {
		bit   int
		start func() error
	}{{svcHTTP, func() error { return p.startHTTP(p.ctx) }}, {svcDNS, p.startDNS}, {svcDHCP, p.startDHCP}} {
		if p.missing&svc.bit == 0 {
			continue
		}
		if err := svc.start(); err != nil {
			errs = append(errs, err)
			continue
		}
		p.missing &^= svc.bit
	}
	p.up = true
	s := p.ip.String()
	p.upIP.Store(&s)
	err := errors.Join(errs...)
	if err != nil {
		p.report("warn", err.Error())
	} else {
		p.report("normal", "")
	}
	return err
}

// Down takes the listener, DNS and DHCP down and forgets the leases. It is idempotent. Like
// Up it leaves the log line to the station manager; only the drop counters, when a packet was
// dropped, go to the debug log.
func (p *Portal) Down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.up {
		return
	}
	empty := ""
	p.upIP.Store(&empty)
	p.cancel()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.wg.Wait()
	p.conns = nil
	p.leases = nil
	p.up, p.missing, p.ctx = false, 0, nil
	p.report("normal", "")
	if st := p.Stats(); st.DNSDropped+st.DHCPDropped > 0 {
		p.log.Debug("portal packets dropped since boot", "dns_dropped", st.DNSDropped, "dhcp_dropped", st.DHCPDropped)
	}
}

// Clients is the number of DHCP clients holding a lease while the portal is up.
func (p *Portal) Clients() int {
	p.mu.Lock()
	l := p.leases
	p.mu.Unlock()
	if l == nil {
		return 0
	}
	return l.bound()
}

// IP is the portal's address while it is up and "" while it is down (auth's PortalIP).
func (p *Portal) IP() string { return *p.upIP.Load() }

// Stats returns the drop counters (they survive Down: they count since boot).
func (p *Portal) Stats() Stats {
	return Stats{DNSDropped: p.dnsDropped.Load(), DHCPDropped: p.dhcpDropped.Load()}
}

// RootURL is the portal's root page as a client on the portal network reaches it.
func (p *Portal) RootURL() string {
	host := p.opts.IP
	if port := p.httpPort(); port != 80 {
		host = net.JoinHostPort(host, strconv.Itoa(port))
	}
	return "http://" + host + "/"
}

func (p *Portal) httpPort() int {
	if p.opts.HTTPPort == nil {
		return 80
	}
	return p.opts.HTTPPort()
}

func (p *Portal) report(state, msg string) {
	if p.opts.Health == nil {
		return
	}
	// One line, within the health table's message limit (the errors are ASCII).
	msg = strings.ReplaceAll(msg, "\n", "; ")
	if len(msg) > health.MaxMessageLen {
		msg = msg[:health.MaxMessageLen]
	}
	if err := p.opts.Health.Report(KeyBind, state, msg); err != nil {
		p.log.Warn("health report", "key", KeyBind, "err", err)
	}
}

func (p *Portal) startHTTP(ctx context.Context) error {
	if p.opts.Serve == nil {
		return nil
	}
	addr := net.JoinHostPort(p.ip.String(), strconv.Itoa(p.httpPort()))
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		return fmt.Errorf("http %s: %w", addr, bindErr(err))
	}
	p.conns = append(p.conns, ln)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := p.opts.Serve(ctx, ln); err != nil && ctx.Err() == nil {
			p.log.Warn("portal http listener stopped", "err", err)
		}
	}()
	return nil
}

// bindErr shortens a listen error to its cause, for a health message that fits on a line.
func bindErr(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		msg := op.Err.Error()
		if i := strings.LastIndex(msg, ": "); i >= 0 {
			msg = msg[i+2:]
		}
		return errors.New(msg)
	}
	return err
}
