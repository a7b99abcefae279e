package main

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"devhost/plugins/n2k/decode"
	"devhost/plugins/n2k/input"
	"devhost/plugins/n2k/skmap"
	"devhost/sdk"
)

// The sources of f_n2k.source: the board's CAN bus, or a gateway on the network.
const (
	sourceCAN       = "can"
	sourceYDUDP     = "ydraw_udp"     // Yacht Devices RAW datagrams (the gateway broadcasts them)
	sourceYDTCP     = "ydraw_tcp"     // Yacht Devices RAW over a TCP connection
	sourceActisense = "actisense_tcp" // Actisense N2K ASCII over a TCP connection
)

// Default ports of the gateway sources (gateway_port 0).
const (
	defaultYDUDPPort = 1456
	defaultYDTCPPort = 1457
)

// Reconnection: the first retry after reconnectMin, doubling to reconnectMax.
const (
	reconnectMin = time.Second
	reconnectMax = 30 * time.Second
)

// Error kinds of the gateway sources, beside the pipeline's.
const (
	kindGatewayClosed   = "gateway_closed"   // the connection failed or was lost
	kindGatewaySend     = "gateway_send"     // a frame or message not handed to the gateway
	kindLineTooLong     = "line_too_long"    // a line over input.MaxLine, dropped
	kindGatewaySettings = "gateway_settings" // settings that cannot work (no port, no host, a bad host)
)

// Gateway connection states, as the status shows them.
const (
	gwConnecting   = "connecting"
	gwConnected    = "connected"
	gwReconnecting = "reconnecting"
	gwError        = "error" // the settings cannot work (last_error says why); no retry until they change
)

// gatewaySource reads NMEA 2000 from a network gateway: it keeps one socket open, cuts the
// stream into lines, parses them and reconnects with backoff after a drop.
type gatewaySource struct {
	kind     string
	host     string
	port     int
	sock     uint32 // 0: none open
	state    string
	lastErr  string
	failures int // in a row, for the backoff
	connects uint64
	lines    input.Lines
	parser   *input.Parser
}

func isGateway(source string) bool {
	return source == sourceYDUDP || source == sourceYDTCP || source == sourceActisense
}

// gatewayPort is the port a gateway source uses: the configured one, else its default (0
// when the source has none).
func gatewayPort(source string, configured int) int {
	switch {
	case configured != 0:
		return configured
	case source == sourceYDUDP:
		return defaultYDUDPPort
	case source == sourceYDTCP:
		return defaultYDTCPPort
	}
	return 0
}

func newGatewaySource(kind, host string, port int) *gatewaySource {
	format := input.YDRaw
	if kind == sourceActisense {
		format = input.Actisense
	}
	parser, _ := input.NewParser(format)
	return &gatewaySource{kind: kind, host: host, port: gatewayPort(kind, port), state: gwConnecting, parser: parser}
}

// settingsError says what in the gateway settings cannot work ("" when they can).
func (g *gatewaySource) settingsError() string { return gatewaySettingsError(g.kind, g.host, g.port) }

// gatewaySettingsError says what in the settings of a gateway source of kind at host and
// port (the one it uses: gatewayPort) cannot work, naming the key, or "". The device checks
// the port's range and the host's length; the host's characters only the UI checks, so the
// plugin does too.
func gatewaySettingsError(kind, host string, port int) string {
	switch {
	case port == 0:
		return "gateway_port must be set for " + kind
	case host == "" && kind != sourceYDUDP:
		return "gateway_host must be set for " + kind
	case strings.Trim(host, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.:_-") != "":
		return "gateway_host " + strconv.Quote(truncate(host, 40)) + " is not an address or a name"
	}
	return ""
}

// openGateway opens the socket; a refusal is a failed attempt, retried later. Settings
// that cannot work put the source in the error state until they change.
func (p *plugin) openGateway() {
	g := p.gwSrc
	g.lines.Reset()
	if msg := g.settingsError(); msg != "" {
		g.sock, g.state, g.lastErr = 0, gwError, msg
		p.netErrs[kindGatewaySettings]++ // logged once, by the n2k.config condition
		return
	}
	var err error
	switch {
	case g.kind == sourceYDUDP && g.host == "":
		g.sock, err = sdk.NetListenUDP(g.port, "", 0)
	case g.kind == sourceYDUDP:
		g.sock, err = sdk.NetListenUDP(g.port, g.host, g.port)
	default:
		g.sock, err = sdk.NetDial(g.host, g.port)
	}
	if err != nil {
		g.sock = 0
		p.gatewayFailed(err.Error())
	}
}

// closeGateway closes the socket and forgets the source (source changed or disabled).
func (p *plugin) closeGateway() {
	if p.gwSrc == nil {
		return
	}
	if p.gwSrc.sock != 0 {
		_ = sdk.NetClose(p.gwSrc.sock)
	}
	_ = sdk.CancelTimer(timerReconnect)
	p.gwSrc = nil
}

// gatewayFailed records a failed or lost connection and arms the retry.
func (p *plugin) gatewayFailed(reason string) {
	g := p.gwSrc
	g.sock, g.state, g.lastErr = 0, gwReconnecting, reason
	g.failures++
	p.netErrs[kindGatewayClosed]++
	d := reconnectMin
	for i := 1; i < g.failures && d < reconnectMax; i++ {
		d *= 2
	}
	d = min(d, reconnectMax)
	if err := sdk.SetTimer(timerReconnect, d, 0); err != nil {
		sdk.Logf(sdk.LevelError, "n2k: reconnect timer: %v", err)
	}
	sdk.Logf(sdk.LevelWarn, "n2k: gateway %s: %s; again in %s", g.endpoint(), reason, d)
}

// netState follows the socket: open means connected (the bus node claims its address
// through the gateway), closed means reconnecting.
func (p *plugin) netState(s sdk.NetState) {
	g := p.gwSrc
	if g == nil || s.ID != g.sock {
		return
	}
	if s.State == sdk.NetClosed {
		p.gatewayFailed(s.Reason)
		return
	}
	g.state, g.failures = gwConnected, 0
	g.connects++
	sdk.Logf(sdk.LevelInfo, "n2k: gateway %s connected", g.endpoint())
	if g.kind == sourceYDUDP && g.host == "" {
		return // receive only: nothing can be sent, so no address is claimed
	}
	p.startNode()
}

// netData takes the gateway's bytes: whole lines are parsed; a datagram ends its last line.
func (p *plugin) netData(id uint32, b []byte) {
	g := p.gwSrc
	if g == nil || id != g.sock || !p.enabled {
		return
	}
	g.lines.Write(b, p.gatewayLine)
	if g.kind == sourceYDUDP {
		g.lines.Flush(p.gatewayLine)
	}
	if n := g.lines.Overlong; n > 0 {
		p.netErrs[kindLineTooLong] += n
		g.lines.Overlong = 0
	}
}

// gatewayLine handles one line of the gateway's stream.
func (p *plugin) gatewayLine(line []byte) {
	s := string(line)
	if p.gwSrc.kind != sourceActisense && isYDTransmitted(s) {
		return // the gateway's echo of a frame sent to the bus (ours among them)
	}
	r, err := p.gwSrc.parser.Parse(s)
	switch {
	case errors.Is(err, input.ErrSkip):
		return
	case err != nil:
		p.gw.CountBadLine()
		return
	}
	p.lastFrame = p.uptime
	var delta *skmap.Delta
	if r.Frame != nil {
		delta = p.gw.Frame(*r.Frame, "")
	} else {
		delta = p.gw.Message(*r.Msg, "")
	}
	if delta != nil {
		p.publish(delta)
	}
}

// isYDTransmitted tells a Yacht Devices RAW line of direction T (sent by the gateway).
func isYDTransmitted(line string) bool {
	fs := strings.Fields(line)
	return len(fs) > 1 && fs[1] == "T"
}

// sendGateway hands a message to the gateway in its format: Yacht Devices RAW takes each CAN
// frame as "IIIIIIII B0 B1 ...", Actisense N2K ASCII the whole message as
// "A000000.000 SSDDP PPPPP DATA". It answers the frames the message takes on the bus, 0 when
// the gateway did not take it.
func (p *plugin) sendGateway(m decode.Message, frames []decode.Frame) int {
	g := p.gwSrc
	if g == nil || g.sock == 0 || g.state != gwConnected && g.kind != sourceYDUDP {
		p.netErrs[kindGatewaySend]++
		return 0
	}
	var out []byte
	if g.kind == sourceActisense {
		out = appendActisense(out, m)
		if err := sdk.NetSend(g.sock, out); err != nil {
			p.netErrs[kindGatewaySend]++
			return 0
		}
		return len(frames)
	}
	for _, f := range frames {
		out = appendYDRaw(out[:0], f)
		if err := sdk.NetSend(g.sock, out); err != nil {
			p.netErrs[kindGatewaySend]++
			return 0
		}
	}
	return len(frames)
}

const hexUpper = "0123456789ABCDEF"

func appendHex(b []byte, v uint64, digits int) []byte {
	for i := digits - 1; i >= 0; i-- {
		b = append(b, hexUpper[(v>>(4*uint(i)))&15])
	}
	return b
}

// appendYDRaw writes a frame as Yacht Devices RAW takes it: "09F80100 01 02\r\n".
func appendYDRaw(b []byte, f decode.Frame) []byte {
	b = appendHex(b, uint64(f.ID), 8)
	for _, c := range f.Data {
		b = append(b, ' ')
		b = appendHex(b, uint64(c), 2)
	}
	return append(b, '\r', '\n')
}

// appendActisense writes a message as an Actisense N2K ASCII line: time (zero: the gateway
// stamps it), source, destination and priority, PGN, data.
func appendActisense(b []byte, m decode.Message) []byte {
	b = append(b, "A000000.000 "...)
	b = appendHex(b, uint64(m.Src), 2)
	b = appendHex(b, uint64(m.Dst), 2)
	b = append(b, '0'+m.Prio&7, ' ')
	b = appendHex(b, uint64(m.PGN), 5)
	b = append(b, ' ')
	for _, c := range m.Data {
		b = appendHex(b, uint64(c), 2)
	}
	return append(b, '\r', '\n')
}

// gatewayView is the gateway part of the status.
type gatewayView struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Connects uint64 `json:"connects"`
}

func (g *gatewaySource) view() *gatewayView {
	return &gatewayView{Host: g.host, Port: g.port, Connects: g.connects}
}

// endpoint names the gateway in messages.
func (g *gatewaySource) endpoint() string {
	return g.kind + " " + g.host + ":" + strconv.Itoa(g.port)
}

// truncate cuts s to at most n bytes without splitting a character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
