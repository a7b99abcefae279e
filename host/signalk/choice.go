package signalk

import (
	"context"
	"devhost/host/config"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// choiceInput is everything server choice depends on.
type choiceInput struct {
	host string // sk.server_host
	port int    // sk.server_port
	self string // sk.server_self
	pin  bool   // sk.server_pin
	// plain is sk.scheme http: of a server advertised both ways the http entry is kept.
	plain bool
	// current is the last choice (kept across reboots), used by pin.
	current *Server
	// discovered servers, at most MaxServers.
	discovered []Server
	// skipped maps skip keys (skipKeys) to the end of their skip.
	skipped map[string]time.Time
	now     time.Time
	// sticky holds the record keys (self URN, or "addr:" host:port for a server without one)
	// the device has a token or a pending request for.
	sticky map[string]bool
}

// choose applies the spec's server-choice table. The scheme of the result is not resolved yet.
func choose(in choiceInput) *Server {
	in.discovered = oneScheme(in.discovered, !in.plain)
	if in.host != "" {
		port := in.port
		if port == 0 {
			port = 80
		}
		return &Server{Host: in.host, Port: port, Source: "manual"}
	}
	if in.self != "" {
		for _, s := range in.discovered {
			if s.Self == in.self {
				return discoveredCopy(s)
			}
		}
		return nil
	}
	if in.pin && in.current != nil && in.current.Source == "discovered" {
		// Pinned: keep the server even when a pass misses it, at the address last seen.
		for _, s := range in.discovered {
			if s.Self == in.current.Self && in.current.Self != "" {
				return discoveredCopy(s)
			}
		}
		cp := *in.current
		return &cp
	}
	cands := make([]Server, 0, len(in.discovered))
	for _, s := range in.discovered {
		if until, ok := skippedUntil(in.skipped, s); ok && in.now.Before(until) {
			continue
		}
		cands = append(cands, s)
	}
	if len(cands) == 0 {
		// Every server is skipped: trying one again beats having none.
		cands = append(cands, in.discovered...)
	}
	if len(cands) == 0 {
		return nil
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].Self != cands[j].Self {
			return cands[i].Self < cands[j].Self
		}
		return cands[i].TLS() && !cands[j].TLS()
	})
	// Sticky: the server the token or pending request belongs to; the last choice first.
	if in.current != nil && in.sticky[stickyKey(*in.current)] {
		for _, s := range cands {
			if stickyKey(s) == stickyKey(*in.current) {
				return discoveredCopy(s)
			}
		}
	}
	for _, s := range cands {
		if in.sticky[stickyKey(s)] {
			return discoveredCopy(s)
		}
	}
	for _, s := range cands {
		if s.hasRole("master") {
			return discoveredCopy(s)
		}
	}
	return discoveredCopy(cands[0])
}

// sameServer reports two advertisements of one server: the same self URN, or without one the
// same host.
func sameServer(a, b Server) bool {
	if a.Self != "" || b.Self != "" {
		return a.Self == b.Self
	}
	return a.Host == b.Host
}

// oneScheme keeps one advertisement of a server advertised both ways: https (tls), so the
// token never goes out in clear to a server that offers TLS, unless sk.scheme forces http,
// whose port is the http advertisement's. Order is kept.
func oneScheme(list []Server, tls bool) []Server {
	drop := func(s Server) bool {
		if s.TLS() == tls {
			return false
		}
		for _, o := range list {
			if o.TLS() == tls && sameServer(s, o) {
				return true
			}
		}
		return false
	}
	n := 0
	for _, s := range list {
		if drop(s) {
			n++
		}
	}
	if n == 0 {
		return list
	}
	out := make([]Server, 0, len(list)-n)
	for _, s := range list {
		if !drop(s) {
			out = append(out, s)
		}
	}
	return out
}

// stickyKey names a discovered server among the sticky keys.
func stickyKey(s Server) string {
	if s.Self != "" {
		return s.Self
	}
	return "addr:" + addrKey(s.Host, s.Port)
}

// skipKeys are the keys a server is skipped under: its self URN when it has one (it may move
// to another address) and always its address (a server without a self TXT has nothing else).
func skipKeys(s Server) []string {
	keys := []string{"addr:" + addrKey(s.Host, s.Port)}
	if s.Self != "" {
		keys = append(keys, s.Self)
	}
	return keys
}

// skippedUntil answers the latest skip end recorded for s (ok false when none).
func skippedUntil(skipped map[string]time.Time, s Server) (until time.Time, ok bool) {
	for _, k := range skipKeys(s) {
		if v, found := skipped[k]; found && (!ok || v.After(until)) {
			until, ok = v, true
		}
	}
	return until, ok
}

func discoveredCopy(s Server) *Server {
	s.Source = "discovered"
	return &s
}

// parseRoles reads the TXT roles value ("master, main").
func parseRoles(v string) []string {
	var out []string
	for _, r := range strings.Split(v, ",") {
		if r = strings.TrimSpace(r); r != "" {
			out = append(out, r)
		}
	}
	return out
}

// skipList keeps unreachable discovered servers out of the choice for SkipUnreachable.
type skipList struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// add skips s until then; it answers false when every key was already skipped that long.
func (l *skipList) add(s Server, until time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.until == nil {
		l.until = map[string]time.Time{}
	}
	added := false
	for _, k := range skipKeys(s) {
		if old, ok := l.until[k]; ok && !old.Before(until) {
			continue
		}
		l.until[k] = until
		added = true
	}
	return added
}

// snapshot answers the live skips and the earliest end among them.
func (l *skipList) snapshot(now time.Time) (map[string]time.Time, time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]time.Time{}
	var next time.Time
	for k, v := range l.until {
		if !now.Before(v) {
			delete(l.until, k)
			continue
		}
		out[k] = v
		if next.IsZero() || v.Before(next) {
			next = v
		}
	}
	return out, next
}

// chooser runs server choice whenever an input changes and hands the result to the token
// machine.
func (c *Client) runChooser(ctx context.Context) {
	var changed <-chan struct{}
	if c.disc != nil {
		changed = c.disc.Changed()
	}
	for {
		next := c.choose(ctx)
		var t clockwork.Timer
		var skipEnd <-chan time.Time
		if !next.IsZero() {
			t = c.clk.NewTimer(next.Sub(c.clk.Now()))
			skipEnd = t.Chan()
		}
		select {
		case <-ctx.Done():
		case <-c.kick:
		case <-changed:
			c.publishServers()
		case <-skipEnd:
			c.publishServers()
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// kickChoice asks the chooser to run again.
func (c *Client) kickChoice() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// choose runs one choice and answers when the next skip ends (zero: none).
func (c *Client) choose(ctx context.Context) time.Time {
	now := c.clk.Now()
	skipped, next := c.skips.snapshot(now)
	in := choiceInput{
		host:  strings.TrimSpace(c.cfg.String(config.NsSK, config.SKServerHost)),
		port:  c.cfg.Int(config.NsSK, config.SKServerPort),
		self:  strings.TrimSpace(c.cfg.String(config.NsSK, config.SKServerSelf)),
		pin:   c.cfg.Bool(config.NsSK, config.SKServerPin),
		plain: strings.TrimSpace(c.cfg.String(config.NsSK, config.SKScheme)) == "http",
		now:   now, skipped: skipped, discovered: c.discovered(),
		sticky: map[string]bool{},
	}
	if cur, ok := c.st.current(); ok {
		in.current = &cur
	}
	for k, r := range c.st.records() {
		if r.Token != "" || r.Href != "" {
			in.sticky[k] = true
		}
	}
	// A server without a self TXT whose self URN was learned keeps its record under the URN.
	for _, s := range in.discovered {
		if s.Self == "" && in.sticky[c.st.recordKey(s)] {
			in.sticky[stickyKey(s)] = true
		}
	}
	s := choose(in)
	if s != nil {
		c.resolveScheme(ctx, s)
	}
	c.setChoice(ctx, s)
	return next
}

// resolveScheme fills in the scheme under sk.scheme.
func (c *Client) resolveScheme(ctx context.Context, s *Server) {
	advertised := s.Scheme
	if s.Source == "manual" {
		advertised = ""
	}
	if c.tls != nil {
		rctx, cancel := context.WithTimeout(ctx, 2*c.http.timeout+time.Second)
		scheme, port, guess, err := c.tls.Resolve(rctx, s.Host, s.Port, advertised)
		cancel()
		if err == nil && (scheme == "http" || scheme == "https") {
			s.Scheme, s.Guess = scheme, guess
			if port > 0 {
				s.Port = port
			}
			return
		}
		if err != nil {
			c.log.Warn("signalk: scheme probe failed, assuming http", "server", s.Addr(), "err", err)
		}
	}
	switch c.cfg.String(config.NsSK, config.SKScheme) {
	case "http", "https":
		s.Scheme = c.cfg.String(config.NsSK, config.SKScheme)
	default:
		if advertised != "http" && advertised != "https" {
			advertised, s.Guess = "http", s.Source == "manual"
		}
		s.Scheme = advertised
	}
}

// setChoice hands a new choice to the token machine and remembers it.
func (c *Client) setChoice(ctx context.Context, s *Server) {
	c.mu.Lock()
	old := c.server
	same := (old == nil && s == nil) || (old != nil && s != nil && old.same(*s) && old.Guess == s.Guess)
	c.server = s
	c.mu.Unlock()
	if same {
		return
	}
	if s != nil {
		c.log.Info("signalk: server chosen", "server", s.Addr(), "scheme", s.Scheme, "self", s.Self, "source", s.Source)
		_ = c.st.setCurrent(s)
		if c.tls != nil {
			c.tls.SetServer(s.Addr())
		}
	} else {
		c.log.Info("signalk: no server")
	}
	var cp *Server
	if s != nil {
		v := *s
		cp = &v
	}
	c.tm.send(ctx, func() { c.tm.setServer(cp) })
}

// discovered answers the discovery list, bounded and with parsed roles.
func (c *Client) discovered() []Server {
	if c.disc == nil {
		return nil
	}
	list := c.disc.Servers()
	out := make([]Server, 0, len(list))
	for _, s := range list {
		if s.Host == "" || s.Port <= 0 {
			continue
		}
		if len(s.Roles) == 0 && s.TXT != nil {
			s.Roles = parseRoles(s.TXT["roles"])
		}
		if s.Self == "" && s.TXT != nil {
			s.Self = s.TXT["self"]
		}
		s.Source = "discovered"
		out = append(out, s)
		if len(out) == MaxServers {
			break
		}
	}
	return out
}

// markUnreachable skips a discovered server that did not answer, by self URN and address.
func (c *Client) markUnreachable(s Server) {
	if s.Source != "discovered" {
		return
	}
	if c.skips.add(s, c.clk.Now().Add(SkipUnreachable)) {
		c.log.Warn("signalk: server unreachable, skipped for 5 minutes", "server", s.Addr(), "self", s.Self)
		c.kickChoice()
		c.publishServers()
	}
}
