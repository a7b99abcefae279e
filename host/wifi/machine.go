package wifi

import (
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"

	"devhost/host/board"
	"devhost/host/netroute"
)

// machine is the station state machine. Every method is one input of the spec's table; the
// comment above it quotes the rows it implements. Only the Manager's Run goroutine calls
// them, under Manager.mu.
type machine struct {
	clk    clockwork.Clock
	log    *slog.Logger
	radio  Radio
	jitter func() float64

	settings Settings
	state    string
	idx      int     // slot tried or held; -1 when none
	cur      Network // the network of idx as it was when the attempt started
	attempt  uint64  // the driver's number of the attempt in progress

	round, attempts           int
	connects, disconnects     int
	reason                    int
	ssid, bssid               string
	channel, rssi             int
	ip, netmask, gateway      string
	connectedAt, backoffUntil time.Time

	timer       clockwork.Timer // the state's timer: connect, DHCP or backoff
	portalTimer clockwork.Timer // wifi.portal_after_s since retrying began
	failingAt   time.Time       // when retrying without success began; zero when not
	portalDue   bool            // the portal delay ran out while retrying
	portalUp    bool            // the portal was decided up and stays up while retrying

	warnedPSK    [Slots]bool
	warnedStatic map[string]bool
}

// snap is what the Manager compares before and after an input: the status without its
// running counters, and the station as the network layer sees it.
type snap struct {
	key   stateKey
	netUp bool
	net   netroute.Iface
}

type stateKey struct {
	state                                  string
	sta                                    bool
	idx, reason                            int
	attempts, round, connects, disconnects int
	ssid, bssid                            string
	channel, rssi                          int
	ip, netmask, gateway                   string
}

func (m *machine) snapshot() snap {
	s := snap{key: stateKey{state: m.state, sta: m.settings.StaEnabled, idx: m.idx, reason: m.reason,
		attempts: m.attempts, round: m.round, connects: m.connects, disconnects: m.disconnects}}
	if m.state == StateObtainingIP || m.state == StateConnected {
		s.key.ssid, s.key.bssid, s.key.channel, s.key.rssi = m.ssid, m.bssid, m.channel, m.rssi
	}
	s.net = netroute.Iface{Name: board.IfaceWiFiSTA}
	if m.state == StateConnected {
		s.key.ip, s.key.netmask, s.key.gateway = m.ip, m.netmask, m.gateway
		rssi := m.rssi
		s.netUp = true
		s.net = netroute.Iface{Name: board.IfaceWiFiSTA, Up: true, IP: m.ip, Netmask: m.netmask, Gateway: m.gateway, RSSI: &rssi}
	}
	return s
}

func (m *machine) status() Status {
	st := Status{State: m.state, StaEnabled: m.settings.StaEnabled, NetworkIndex: m.idx, Reason: ReasonFor(m.reason),
		Attempt: m.attempts, Round: m.round, ConnectCount: m.connects, DisconnectCount: m.disconnects}
	if m.state == StateObtainingIP || m.state == StateConnected {
		ssid, bssid, ch, rssi := m.ssid, m.bssid, m.channel, m.rssi
		st.SSID, st.BSSID, st.Channel, st.RSSI = &ssid, &bssid, &ch, &rssi
	}
	if m.state == StateConnected {
		ip, mask, gw := m.ip, m.netmask, m.gateway
		secs := int64(m.clk.Since(m.connectedAt) / time.Second)
		st.IP, st.Netmask, st.Gateway, st.ConnectedS = &ip, &mask, &gw, &secs
	}
	if m.state == StateBackoff {
		ms := max(int64(m.backoffUntil.Sub(m.clk.Now())/time.Millisecond), 0)
		st.BackoffMS = &ms
	}
	return st
}

func (m *machine) stopTimers() {
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
	if m.portalTimer != nil {
		m.portalTimer.Stop()
		m.portalTimer = nil
	}
}

func (m *machine) arm(d time.Duration) {
	if m.timer != nil {
		m.timer.Stop()
	}
	m.timer = m.clk.NewTimer(d)
}

func (m *machine) disarm() {
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
}

// usable reports whether slot i can be tried: it has an SSID and a password that is empty or
// 8..63 characters (a bad one is skipped with one warning per configuration).
func (m *machine) usable(i int) bool {
	n := m.settings.Networks[i]
	if n.SSID == "" {
		return false
	}
	if l := len(n.PSK); l != 0 && (l < 8 || l > 63) {
		if !m.warnedPSK[i] {
			m.warnedPSK[i] = true
			m.log.Warn("network slot skipped: password outside 8..63 characters", "slot", i, "ssid", n.SSID)
		}
		return false
	}
	return true
}

func (m *machine) configured() bool {
	for _, n := range m.settings.Networks {
		if n.SSID != "" {
			return true
		}
	}
	return false
}

// start: "start | station enabled | at least one network configured → connecting (network 0)",
// "(any) | station disabled → disabled", "(any) | no network has an SSID → unconfigured".
func (m *machine) start(s Settings) {
	m.settings = s
	m.evaluate(0)
}

// evaluate applies the settings from the top: disabled, unconfigured, or a new round from
// network 0 with reason (0: keep the last).
func (m *machine) evaluate(reason int) {
	switch {
	case !m.settings.StaEnabled:
		m.leave(StateDisabled)
		m.reason = ReasonDisabled
	case !m.configured():
		m.leave(StateUnconfigured)
	default:
		if m.state == StateConnected || m.state == StateObtainingIP || m.state == StateConnecting {
			m.radio.Disconnect()
		}
		if reason != 0 {
			m.reason = reason
		}
		m.round, m.attempts = 0, 0
		m.beginRetrying()
		m.tryFrom(0)
	}
}

// leave stops the station in an idle state (disabled or unconfigured).
func (m *machine) leave(state string) {
	if m.state == StateConnected || m.state == StateObtainingIP || m.state == StateConnecting {
		m.radio.Disconnect()
	}
	m.disarm()
	m.state, m.idx = state, -1
	m.round, m.attempts = 0, 0
	m.endRetrying()
}

// tryFrom: "a round tries each configured network once with no backoff between": the first
// usable slot from i is tried; past the last one the round is complete and the station backs
// off.
func (m *machine) tryFrom(i int) {
	for ; i < Slots; i++ {
		if m.usable(i) {
			m.connect(i)
			return
		}
	}
	m.backoff()
}

// connect starts an attempt on slot i: state connecting with the connect timer.
func (m *machine) connect(i int) {
	n := m.settings.Networks[i]
	m.state, m.idx, m.cur = StateConnecting, i, n
	m.attempts++
	_, _, _, static := m.static()
	m.arm(m.settings.ConnectTimeout)
	m.attempt = m.radio.Connect(board.StaRequest{SSID: n.SSID, PSK: n.PSK, BSSID: n.BSSID, DHCP: !static})
}

// static is the static address when wifi.ip_mode is static; one that does not parse falls
// back to DHCP with one warning per value.
func (m *machine) static() (ip, mask, gw string, ok bool) {
	if m.settings.IPMode != "static" {
		return "", "", "", false
	}
	ip, mask, gw, ok = staticAddress(m.settings)
	if !ok {
		k := m.settings.IP + "/" + m.settings.Netmask
		if !m.warnedStatic[k] {
			m.warnedStatic[k] = true
			m.log.Warn("static address does not parse: using DHCP", "ip", m.settings.IP, "netmask", m.settings.Netmask)
		}
	}
	return ip, mask, gw, ok
}

// backoff: "connecting | disconnect or connect timeout | round complete → backoff";
// "backoff | timer → connecting (network 0) | delay is 1 s * 2^round, capped at
// wifi.backoff_max_s, plus or minus 25 % jitter".
func (m *machine) backoff() {
	d := time.Second
	for r := 0; r < m.round && d < m.settings.BackoffMax; r++ {
		d *= 2
	}
	d = min(d, m.settings.BackoffMax)
	d = time.Duration(float64(d) * (0.75 + 0.5*m.jitter()))
	m.state = StateBackoff
	m.backoffUntil = m.clk.Now().Add(d)
	m.arm(d)
}

// fail ends the attempt in progress with a reason and moves on: "another network in the list
// → connecting (next network)", else backoff. A failed retry of a dropped network continues
// the same way, with the slots after it.
func (m *machine) fail(reason int) {
	m.reason = reason
	m.disarm()
	m.beginRetrying()
	m.tryFrom(m.idx + 1)
}

// driverEvent takes a station event; events of an attempt no longer in progress are stale.
func (m *machine) driverEvent(ev board.StaEvent) {
	if ev.Attempt != m.attempt {
		return
	}
	switch {
	// connecting | driver connected → obtaining_ip | DHCP timer
	case m.state == StateConnecting && ev.Kind == board.StaConnected:
		m.state = StateObtainingIP
		m.ssid, m.bssid, m.channel, m.rssi = ev.SSID, ev.BSSID, ev.Channel, ev.RSSI
		if ip, mask, gw, ok := m.static(); ok {
			// A static address still raises the got-IP event.
			m.connected(ip, mask, gw)
			return
		}
		m.arm(m.settings.DHCPTimeout)
	// connecting | disconnect → next network or backoff | reason code recorded
	case m.state == StateConnecting && ev.Kind == board.StaDisconnected:
		m.fail(ev.Reason)
	// obtaining_ip | got IP → connected | reports up to the network layer
	case m.state == StateObtainingIP && ev.Kind == board.StaGotIP:
		m.connected(ev.IP, ev.Netmask, ev.Gateway)
	// obtaining_ip | drop → next network, or backoff when the round is complete
	case m.state == StateObtainingIP && ev.Kind == board.StaDisconnected:
		m.disconnects++
		m.fail(ev.Reason)
	// An RSSI refresh: no transition; the network layer hears it on the station route.
	case (m.state == StateObtainingIP || m.state == StateConnected) && ev.Kind == board.StaRSSI:
		m.rssi = ev.RSSI
	// connected | drop or IP lost → retry the same network once, then move on as above
	case m.state == StateConnected && (ev.Kind == board.StaDisconnected || ev.Kind == board.StaLostIP):
		reason := ev.Reason
		if ev.Kind == board.StaLostIP {
			reason = ReasonIPLost
			m.radio.Disconnect()
		}
		m.disconnects++
		m.reason = reason
		m.attempts = 0
		m.beginRetrying()
		m.connect(m.idx)
	}
}

// connected: "obtaining_ip | got IP → connected"; "round resets on success".
func (m *machine) connected(ip, mask, gw string) {
	m.disarm()
	m.state, m.ip, m.netmask, m.gateway = StateConnected, ip, mask, gw
	m.connectedAt = m.clk.Now()
	m.round = 0
	m.connects++
	m.endRetrying()
}

// timerFired: the state's timer ran out.
func (m *machine) timerFired() {
	m.timer = nil
	switch m.state {
	// connecting | connect timeout → next network or backoff
	case StateConnecting:
		m.radio.Disconnect()
		m.fail(ReasonConnectTimeout)
	// obtaining_ip | DHCP timeout → next network or backoff | reason 1001 on timeout
	case StateObtainingIP:
		m.radio.Disconnect()
		m.disconnects++
		m.fail(ReasonNoIP)
	// backoff | timer → connecting (network 0)
	case StateBackoff:
		m.round++
		m.tryFrom(0)
	}
}

// configChanged: "a live connection is kept when the config changes if its network (SSID,
// password, BSSID pin) still appears in the new list; changing the current network's password
// reconnects from the top."
func (m *machine) configChanged(s Settings) {
	old := m.settings
	m.settings = s
	if s.Networks != old.Networks {
		m.warnedPSK = [Slots]bool{}
	}
	if s.PortalAfter != old.PortalAfter && !m.failingAt.IsZero() {
		// The delay counts from when retrying began, whatever it is now.
		if m.portalTimer != nil {
			m.portalTimer.Stop()
		}
		m.portalTimer = m.clk.NewTimer(max(s.PortalAfter-m.clk.Since(m.failingAt), 0))
	}
	if !s.StaEnabled || !m.configured() {
		m.evaluate(0)
		return
	}
	switch m.state {
	case StateConnected, StateObtainingIP, StateConnecting:
		for i, n := range s.Networks {
			if n == m.cur && m.usable(i) {
				m.idx = i
				return
			}
		}
		m.evaluate(ReasonConfigChange)
	case StateBackoff:
		if s.Networks != old.Networks || s.IPMode != old.IPMode || s.IP != old.IP || s.Netmask != old.Netmask {
			m.evaluate(ReasonConfigChange)
		}
	default:
		m.evaluate(ReasonConfigChange)
	}
}

// beginRetrying starts the portal delay when the station starts trying (at boot, after a
// configuration change or a drop) unless it is already running.
func (m *machine) beginRetrying() {
	if !m.failingAt.IsZero() {
		return
	}
	m.failingAt = m.clk.Now()
	if m.portalTimer != nil {
		m.portalTimer.Stop()
	}
	m.portalTimer = m.clk.NewTimer(m.settings.PortalAfter)
	m.portalDue = false
}

// endRetrying: the station is connected or idle.
func (m *machine) endRetrying() {
	m.failingAt = time.Time{}
	m.portalDue = false
	if m.portalTimer != nil {
		m.portalTimer.Stop()
		m.portalTimer = nil
	}
}

// portalWanted is the spec's "Setup portal" table: never when wifi.portal_enabled is false;
// up immediately with no network configured or the station disabled; up after
// wifi.portal_after_s of retrying without success (and kept up while retrying); down when
// connected.
func (m *machine) portalWanted() bool {
	switch {
	case !m.settings.PortalEnabled:
		m.portalUp = false
	case m.state == StateDisabled || m.state == StateUnconfigured:
		m.portalUp = true
	case m.state == StateConnected:
		m.portalUp = false
	case m.portalDue || (!m.failingAt.IsZero() && m.clk.Since(m.failingAt) >= m.settings.PortalAfter):
		m.portalUp = true
	}
	return m.portalUp
}
