package sktls

import (
	"context"
	"crypto/tls"
	"devhost/host/config"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// ProbeTimeout bounds each leg of the scheme probe, as the HTTP helper's default timeout.
const ProbeTimeout = 6 * time.Second

// Endpoint sources.
const (
	SourceForced     = "forced"     // sk.scheme is http or https
	SourceAdvertised = "advertised" // the discovered service type
	SourceProbe      = "probe"      // the probe's answer, remembered
	SourceGuess      = "guess"      // nothing answered: plain http for this attempt only
)

// Endpoint is where and how to reach a server.
type Endpoint struct {
	Scheme string `json:"scheme"` // http or https
	Host   string `json:"host"`
	Port   int    `json:"port"`
	// Guess is set when neither probe was answered: plain http is tried, nothing is
	// remembered, and the next Resolve asks again.
	Guess  bool   `json:"guess"`
	Source string `json:"source"`
}

// Addr is host:port.
func (e Endpoint) Addr() string { return net.JoinHostPort(e.Host, strconv.Itoa(e.Port)) }

// TLS reports whether the endpoint is https (and its stream wss).
func (e Endpoint) TLS() bool { return e.Scheme == "https" }

// Resolve decides the scheme of host:port. sk.scheme `http` and `https` force it; under
// `auto` a discovered server's advertised type ("http" or "https", from the service it was
// found under) decides; a manual host (advertised "") is probed once and the answer is
// remembered until ForgetScheme or a change of sk.scheme, sk.server_host or sk.server_port. A
// guess is never remembered: calling Resolve before every attempt re-asks after each attempt
// on the guess and at network-up.
func (m *Manager) Resolve(ctx context.Context, host string, port int, advertised string) (Endpoint, error) {
	if host == "" || port < 1 || port > 65535 {
		return Endpoint{}, fmt.Errorf("sktls: resolve: bad server %q port %d", host, port)
	}
	switch s := m.cfg.String(config.NsSK, config.SKScheme); s {
	case "http", "https":
		return Endpoint{Scheme: s, Host: host, Port: port, Source: SourceForced}, nil
	}
	if advertised == "http" || advertised == "https" {
		return Endpoint{Scheme: advertised, Host: host, Port: port, Source: SourceAdvertised}, nil
	}
	key := normAddr(net.JoinHostPort(host, strconv.Itoa(port)))
	m.probeMu.Lock()
	ep, ok := m.probed[key]
	gen := m.probeGen
	m.probeMu.Unlock()
	if ok {
		return ep, nil
	}
	ep, err := m.Probe(ctx, host, port)
	if err != nil {
		return Endpoint{}, err
	}
	m.probeMu.Lock()
	// An answer that arrives after ForgetScheme was asked about an older setting.
	if !ep.Guess && gen == m.probeGen {
		m.probed[key] = ep
	}
	m.probeMu.Unlock()
	return ep, nil
}

// ForgetScheme drops every remembered probe answer.
func (m *Manager) ForgetScheme() {
	m.probeMu.Lock()
	clear(m.probed)
	m.probeGen++
	m.probeMu.Unlock()
}

// Probe asks host:port once, without credentials, how it wants to be spoken to: GET
// http://host:port/signalk with redirects off. A 30x whose Location is https means TLS, on the
// Location's port when it names one (else on port). Any other HTTP answer means plain http. No
// answer is retried once over https on the same port; a completed TLS handshake is the answer
// there. With neither answered the result is a plain-http Guess. It fails only when ctx ends.
func (m *Manager) Probe(ctx context.Context, host string, port int) (Endpoint, error) {
	ep := Endpoint{Scheme: "http", Host: host, Port: port, Source: SourceProbe}
	resp, err := m.probeGet(ctx, "http", host, port, nil)
	if err == nil {
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			if loc, lerr := resp.Request.URL.Parse(resp.Header.Get("Location")); lerr == nil && loc.Scheme == "https" {
				ep.Scheme = "https"
				if p, perr := strconv.Atoi(loc.Port()); perr == nil && p >= 1 && p <= 65535 {
					ep.Port = p
				}
			}
		}
		m.log.Info("Signal K scheme probed", "server", net.JoinHostPort(host, strconv.Itoa(port)), "status", resp.StatusCode, "scheme", ep.Scheme, "port", ep.Port)
		return ep, nil
	}
	if ctx.Err() != nil {
		return Endpoint{}, fmt.Errorf("sktls: probe: %w", context.Cause(ctx))
	}
	m.log.Info("plain http probe unanswered; trying https", "server", net.JoinHostPort(host, strconv.Itoa(port)), "err", err)
	var shook atomic.Bool
	if _, err := m.probeGet(ctx, "https", host, port, &shook); err == nil || shook.Load() {
		ep.Scheme = "https"
		return ep, nil
	}
	if ctx.Err() != nil {
		return Endpoint{}, fmt.Errorf("sktls: probe: %w", context.Cause(ctx))
	}
	m.log.Info("no answer over http or https; plain http guessed", "server", net.JoinHostPort(host, strconv.Itoa(port)))
	return Endpoint{Scheme: "http", Host: host, Port: port, Guess: true, Source: SourceGuess}, nil
}

// probeGet makes the probe's GET. Its body is read (bounded) and closed before it returns.
func (m *Manager) probeGet(ctx context.Context, scheme, host string, port int, shook *atomic.Bool) (*http.Response, error) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timer := m.clock.AfterFunc(m.probeTimeout, cancel)
	defer timer.Stop()

	tr := &http.Transport{Proxy: nil, DisableKeepAlives: true}
	if scheme == "https" {
		tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			raw, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// The probe only learns whether the port speaks TLS. It sends no credential and
			// nothing it sees is trusted or pinned; the real connection is judged by the
			// anchors of sk.tls_trust.
			cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}
			if net.ParseIP(host) == nil {
				cfg.ServerName = host
			}
			tc, err := m.handshake(ctx, raw, cfg)
			if err != nil {
				return nil, err
			}
			shook.Store(true)
			return tc, nil
		}
	}
	defer tr.CloseIdleConnections()
	cl := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	u := scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/signalk"
	req, err := http.NewRequestWithContext(pctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("probe request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 16<<10))
	_ = resp.Body.Close()
	if resp.Request == nil {
		return nil, errors.New("probe: response without request")
	}
	return resp, nil
}
