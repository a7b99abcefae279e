// Command n2k is the NMEA 2000 gateway plugin: it listens to the board's CAN bus, reassembles
// and decodes the NMEA 2000 traffic from canboat's PGN database and publishes the values to
// Signal K with the paths, units and values of signalk-server's n2k-signalk. It is built as
// a WebAssembly plugin for the device:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o n2k.wasm ./plugins/n2k
//
// On the bus it is a good citizen (package node): it claims an address (f_n2k.address
// preferred) with the NAME of the f_n2k NAME fields (unique number, 0: derived from the
// device id; by default manufacturer code 2046, function 130 PC gateway, class 25
// internetwork device, instances 0, industry group 4 marine), claims again when they change,
// defends or moves it,
// answers ISO requests for its claim, product information and PGN lists and sends a
// heartbeat every 60 s. A Signal K PUT on electrical.switches.bank.<instance>.<switch>.state
// (true/false or 1/0) sends Switch Bank Control (127502) for that switch; the bank's status
// (127501) comes back as the state path.
//
// Configuration (namespace f_n2k): enabled (default false: the plugin idles), source (the
// board's CAN bus, or a network gateway: ydraw_udp, ydraw_tcp, actisense_tcp, at gateway_host
// and gateway_port; see netsource.go), address, the NAME fields unique_number, manufacturer,
// device_function, device_class, device_instance, system_instance and industry_group,
// pgn_allow and pgn_deny (comma-separated PGNs; an empty allow list allows all; a malformed
// list counts as empty and is named in the warn condition n2k.config, as are gateway settings
// that cannot work), rate_ms (at most one value per Signal K path and source per interval,
// the latest sent when it ends; default 0, every value, as n2k-signalk; see
// outflow.MaxStreams for its bound), path_overrides (a table of from/to path prefixes:
// electrical.batteries.1 → electrical.batteries.house; bad rows are left out and named in the
// warn condition n2k.config), deltas (also send each delta, $source and timestamp included,
// as the SSE event n2k_delta, in arrays of up to 8000 bytes sent when full, every second and
// before each status answer; a delta of a message from the CAN bus also carries frame, the
// count of CAN frames taken in since the start at the message's last frame, so that `devctl
// n2k decode`, which reads them, can stamp it with the time of that frame's log line).
// Overrides apply to the values and to n2k_delta; the rate limit to the values sent to Signal
// K only, so the delta events stay a full trace of the decoder. AIS targets (other vessels,
// aids to navigation, base stations, SAR transponders) go to Signal K under their own context
// (`vessels.urn:mrn:imo:mmsi:...`, ABI 1.3), their name, MMSI and call sign at the context's
// root; overrides and the rate limit are the own vessel's and leave them alone, and a report
// without a valid MMSI context (`vessels.unknown`) stays in the delta events.
//
// GET /api/v1/n2k/status and the SSE event n2k (retained, sent once a second while it
// changes) carry the status: state (disabled, listening, receiving, silent; connecting,
// connected, reconnecting for a gateway), source, address (the claimed one, or null), name
// (the NAME in hex while enabled), frames_in, frames_out, messages, deltas, errors by kind,
// pgns (PGN → messages), devices seen, for a gateway gateway and last_error, and while a rate
// limit is set rate_limit (its interval, the streams it limits and holds values of, and the
// values it let pass unlimited for want of room). The health
// condition n2k.bus warns while the source is enabled and silent for 10 s.
package main

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o n2k.wasm .

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"devhost/abi"
	"devhost/plugins/n2k/decode"
	"devhost/plugins/n2k/gateway"
	"devhost/plugins/n2k/node"
	"devhost/plugins/n2k/outflow"
	"devhost/plugins/n2k/skmap"
	"devhost/sdk"
)

func init() {
	// Decoding allocates per message and the guest's collector, single-threaded in Wasm,
	// runs inside the calls: collect at five times the live heap instead of twice, within
	// a bound well under the host's memory cap per plugin.
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(16 << 20)
	sdk.Register(newPlugin().handlers())
}

func main() {}

const (
	timerTick      = 1
	timerClaim     = 2
	timerHeartbeat = 3
	timerRate      = 4
	timerReconnect = 5
	silentFor      = 10 * time.Second
	condBus        = "bus"
	condConfig     = "config"
	eventState     = "n2k"
	eventDelta     = "n2k_delta"
)

var descriptor = sdk.Namespace{
	Version:     1,
	Title:       "NMEA 2000 gateway",
	Description: "Decodes the NMEA 2000 bus into Signal K.",
	Keys: []sdk.Key{
		{Name: "enabled", Type: sdk.TypeBool, Default: false, Title: "Enabled",
			Description: "Listen to the source and publish its values to Signal K."},
		{Name: "source", Type: sdk.TypeString, Default: sourceCAN, Enum: []string{sourceCAN, sourceYDUDP, sourceYDTCP, sourceActisense}, Title: "Source",
			Description: "Where the NMEA 2000 traffic comes from: the board's CAN bus (can), or a gateway on the network: Yacht Devices RAW over UDP (ydraw_udp) or TCP (ydraw_tcp), Actisense N2K ASCII over TCP (actisense_tcp)."},
		{Name: "gateway_host", Type: sdk.TypeString, Default: "", MaxLength: 253, Pattern: `^[A-Za-z0-9.:_-]*$`, Title: "Gateway host",
			Description: "The gateway's address or name (TCP sources), or where ydraw_udp sends frames (empty: receive only).", Group: "Gateway"},
		{Name: "gateway_port", Type: sdk.TypeInt, Default: 0, Min: sdk.Float(0), Max: sdk.Float(65535), Title: "Gateway port",
			Description: "The gateway's TCP port, or the UDP port its datagrams arrive on; 0: 1456 for ydraw_udp, 1457 for ydraw_tcp (actisense_tcp needs one).", Group: "Gateway"},
		{Name: "address", Type: sdk.TypeInt, Default: 100, Min: sdk.Float(0), Max: sdk.Float(251), Title: "Preferred address",
			Description: "The bus address claimed first; another is taken when a device with a lower NAME holds it."},
		{Name: "unique_number", Type: sdk.TypeInt, Default: 0, Min: sdk.Float(0), Max: sdk.Float(2097151), Title: "NAME unique number",
			Description: "The unique number of the NAME; 0 derives it from the device id.", Group: "NAME"},
		{Name: "manufacturer", Type: sdk.TypeInt, Default: 2046, Min: sdk.Float(0), Max: sdk.Float(2047), Title: "NAME manufacturer code",
			Description: "The NMEA manufacturer code in the NAME (11 bits); 2046 names no registered manufacturer.", Group: "NAME"},
		{Name: "device_function", Type: sdk.TypeInt, Default: 130, Min: sdk.Float(0), Max: sdk.Float(255), Title: "NAME device function",
			Description: "The device function within its class (130: PC gateway).", Group: "NAME"},
		{Name: "device_class", Type: sdk.TypeInt, Default: 25, Min: sdk.Float(0), Max: sdk.Float(127), Title: "NAME device class",
			Description: "The device class (25: internetwork device).", Group: "NAME"},
		{Name: "device_instance", Type: sdk.TypeInt, Default: 0, Min: sdk.Float(0), Max: sdk.Float(255), Title: "NAME device instance",
			Description: "Tells devices of the same function apart (lower 3 bits instance, upper 5 bits ECU instance).", Group: "NAME"},
		{Name: "system_instance", Type: sdk.TypeInt, Default: 0, Min: sdk.Float(0), Max: sdk.Float(15), Title: "NAME system instance",
			Description: "Tells parallel networks (systems) apart.", Group: "NAME"},
		{Name: "industry_group", Type: sdk.TypeInt, Default: 4, Min: sdk.Float(0), Max: sdk.Float(7), Title: "NAME industry group",
			Description: "The ISO industry group (4: marine).", Group: "NAME"},
		{Name: "rate_ms", Type: sdk.TypeInt, Default: 0, Min: sdk.Float(0), Max: sdk.Float(60000), Unit: "ms", Title: "Rate limit per path and source",
			Description: "At most one value per Signal K path and source (each sender is its own source) in this interval; a faster one sends its latest value when the interval ends. 0 sends every value. Up to " + strconv.Itoa(outflow.MaxStreams) + " path and source pairs are limited at a time: while that many are active, a new one passes unlimited."},
		{Name: "path_overrides", Type: sdk.TypeString, Default: "[]", MaxLength: 3999, Title: "Path overrides",
			Description: "Rows of from (a path or its leading part, e.g. electrical.batteries.1) and to (e.g. electrical.batteries.house): values under from are published under to.",
			X:           &sdk.Display{Format: sdk.FormatTable, Columns: []string{"from", "to"}}},
		{Name: "pgn_allow", Type: sdk.TypeString, Default: "", MaxLength: 1000, Pattern: pgnListPattern, Title: "PGNs allowed",
			Description: "Comma-separated PGNs (decimal, 0..262143) to decode; empty decodes every PGN. A malformed list decodes every PGN and is named in the warn condition n2k.config."},
		{Name: "pgn_deny", Type: sdk.TypeString, Default: "", MaxLength: 1000, Pattern: pgnListPattern, Title: "PGNs denied",
			Description: "Comma-separated PGNs (decimal, 0..262143) never decoded. A malformed list denies none and is named in the warn condition n2k.config."},
		{Name: "deltas", Type: sdk.TypeBool, Default: false, Title: "Delta events",
			Description: "Also send every delta as the SSE event n2k_delta (for tools; costs time per message)."},
	},
}

type plugin struct {
	sources    sourceCache // the sources of the messages relayed, checked once each
	gw         *gateway.Gateway
	enabled    bool
	deltas     bool
	source     string
	lastFrame  time.Duration // uptime of the last frame
	started    time.Duration // uptime when enabled
	uptime     time.Duration // at the last clock reading
	framesOut  uint64
	lastState  string
	warned     bool
	node       *node.Node
	waiting    []waitingSwitch // switch PUTs deferred while the address is claimed
	deviceID   string
	address    uint8
	name       nameFields
	overrides  outflow.Overrides
	cfgIssue   string           // the n2k.config message last reported
	metaDone   map[string]bool  // paths whose meta was considered
	metaSent   int              // meta declarations made
	metaStop   bool             // no more meta declarations this run
	seq        map[uint32]uint8 // fast-packet sequence counters of sent PGNs
	gwHost     string           // f_n2k.gateway_host
	gwPort     int              // f_n2k.gateway_port
	gwSrc      *gatewaySource   // the network gateway while one is the enabled source
	netErrs    map[string]uint64
	one        []byte // a delta's JSON
	pending    []byte // deltas not yet sent as an event: "[d1,d2"
	val        []byte // a composite value's JSON
	spans      []int  // where each value's JSON is in one (AppendJSONSpans), while deltas is on
	statusJSON []byte // the status document, written for each request and event
	stamp      string // the last delta timestamp, of the millisecond stampMs
	stampMs    int64
	stampBat   uint64 // the batch (sdk.Batch) stamp was read in; stamped: the reading worked
	stamped    bool
	clock      stamper // writes stamp

	// canFrames counts the CAN frames taken in since the start; deltaFrame is the count at
	// the frame whose message is being published (0: not one from the CAN bus).
	canFrames, deltaFrame uint64

	// limiter is kept by path and $source (the source without its PGN: limitStream);
	// unlimitedBefore counts the values earlier limiters (before rate_ms last changed) let
	// pass unlimited because MaxStreams streams were active.
	limiter         outflow.Limiter[sdk.Source]
	unlimitedBefore uint64
}

func newPlugin() *plugin {
	return &plugin{gw: gateway.New(), source: sourceCAN, seq: map[uint32]uint8{}, netErrs: map[string]uint64{}}
}

func (p *plugin) handlers() *sdk.Plugin {
	return &sdk.Plugin{OnInit: p.start, OnConfig: p.reconfigure, OnCAN: p.frame, OnTimer: p.timer, OnHTTP: p.serve, OnPut: p.put,
		OnNetData: p.netData, OnNetState: p.netState}
}

func (p *plugin) start(info sdk.Info) error {
	*p = *newPlugin()
	p.deviceID = info.DeviceID
	p.gw.Now = func() int64 { return int64(p.uptime / time.Millisecond) }
	p.gw.OnMessage = p.busMessage
	if err := sdk.RegisterNamespace(descriptor); err != nil {
		return err
	}
	if err := sdk.HandlePuts(switchPrefix + "*"); err != nil {
		return err
	}
	cfg, err := sdk.GetConfig()
	if err != nil {
		return err
	}
	p.readClock()
	p.configure(cfg)
	if err := sdk.SetTimer(timerTick, time.Second, time.Second); err != nil {
		return err
	}
	p.sleepIfOff()
	return nil
}

// reconfigure is OnConfig: configure, then sleep while disabled.
func (p *plugin) reconfigure(cfg sdk.Config) {
	p.configure(cfg)
	p.settleWaiting() // a gateway disabled or moved mid-claim fails the switch PUTs it held
	p.sleepIfOff()
}

// sleepOff is the dormant request of a disabled gateway: f_n2k.enabled turning true wakes it.
var sleepOff = sdk.Wake{Config: map[string]json.RawMessage{"enabled": json.RawMessage("false")}}

// sleepIfOff asks the host to close the plugin while it is disabled: its compiled code and
// memory go back to the device, f_n2k stays served, and enabling it starts it again.
func (p *plugin) sleepIfOff() {
	if p.enabled {
		return
	}
	if err := sdk.Dormant(sleepOff); err != nil {
		_ = sdk.Log(sdk.LevelWarn, "dormant: "+err.Error())
	}
}

func (p *plugin) readClock() {
	if c, err := sdk.Now(); err == nil {
		p.uptime = c.Uptime
	}
}

// maxPGN is the largest PGN (18 bits).
const maxPGN = 0x3FFFF

// pgnPattern is one PGN in decimal, 0..262143, without leading zeros.
const pgnPattern = `(?:0|[1-9][0-9]{0,4}|1[0-9]{5}|2[0-5][0-9]{4}|26[01][0-9]{3}|2620[0-9]{2}|2621[0-3][0-9]|26214[0-3])`

// pgnListPattern is the descriptor's pattern of pgn_allow and pgn_deny: PGNs separated by
// commas, spaces around them and empty entries (a trailing comma) allowed, or nothing. The
// UI checks it; the device does not check a plugin key's pattern (only its type, length and
// enum), so parsePGNs checks the same and the plugin names a malformed list in n2k.config.
const pgnListPattern = `^[ ,]*(?:` + pgnPattern + `(?: *,[ ,]*` + pgnPattern + `)*)?[ ,]*$`

// parsePGNs reads a comma-separated PGN list; empty entries (only spaces, or none) are
// skipped. An entry that is not a PGN in decimal (0..262143, no sign, no leading zero)
// makes the whole list an error naming it.
func parsePGNs(s string) (map[uint32]bool, error) {
	out := map[uint32]bool{}
	for i, f := range strings.Split(s, ",") {
		f = strings.Trim(f, " ")
		if f == "" {
			continue
		}
		n, err := strconv.ParseUint(f, 10, 32)
		if err != nil || n > maxPGN || f[0] == '0' && len(f) > 1 {
			return nil, fmt.Errorf("entry %d %s is not a PGN (0..%d)", i+1, strconv.Quote(truncate(f, 20)), maxPGN)
		}
		out[uint32(n)] = true
	}
	return out, nil
}

// pgnLists reads pgn_allow and pgn_deny; a malformed one counts as empty, its default (as
// the device reads a stored value it cannot use), and is named in issues.
func pgnLists(cfg sdk.Config, issues []string) (allow, deny map[uint32]bool, _ []string) {
	var err error
	if allow, err = parsePGNs(cfg.String("pgn_allow")); err != nil {
		issues = append(issues, "pgn_allow: "+err.Error())
	}
	if deny, err = parsePGNs(cfg.String("pgn_deny")); err != nil {
		issues = append(issues, "pgn_deny: "+err.Error())
	}
	return allow, deny, issues
}

func (p *plugin) configure(cfg sdk.Config) {
	allow, deny, issues := pgnLists(cfg, nil)
	p.gw.Allow = func(pgn uint32) bool { return (len(allow) == 0 || allow[pgn]) && !deny[pgn] }
	p.deltas = cfg.Bool("deltas")
	source := cfg.String("source")
	if source == "" {
		source = sourceCAN
	}
	host, port := cfg.String("gateway_host"), int(cfg.Int("gateway_port"))
	if isGateway(source) {
		if msg := gatewaySettingsError(source, host, gatewayPort(source, port)); msg != "" {
			issues = append(issues, msg)
		}
	}
	p.shape(cfg, issues)
	address, name := uint8(cfg.Int("address")), readName(cfg)
	enabled := cfg.Bool("enabled")
	moved := source != p.source || isGateway(source) && (host != p.gwHost || port != p.gwPort)
	if enabled == p.enabled && (!enabled || address == p.address && name == p.name && !moved) {
		p.source, p.gwHost, p.gwPort = source, host, port
		return
	}
	was := p.enabled
	p.enabled, p.address, p.name = enabled, address, name
	p.source, p.gwHost, p.gwPort = source, host, port
	var err error
	switch {
	case !enabled:
		p.closeGateway()
		p.node = nil
		_ = sdk.CancelTimer(timerHeartbeat)
		err = sdk.CANReceive()
	case was && !moved: // a new address or NAME: claim again
		if p.gwSrc == nil || p.gwSrc.state == gwConnected {
			p.startNode()
		}
	default: // enabled now, or on another source
		p.closeGateway()
		p.node = nil
		_ = sdk.CancelTimer(timerHeartbeat)
		p.started = p.uptime
		if isGateway(source) {
			// The node claims its address once the gateway is connected.
			err = sdk.CANReceive()
			p.gwSrc = newGatewaySource(source, host, port)
			p.openGateway()
		} else {
			err = sdk.CANReceive(sdk.CANFilter{ID: 0, Mask: 0}) // every frame
			if err == nil {
				p.startNode()
			}
		}
	}
	if err != nil {
		sdk.Logf(sdk.LevelError, "can: %v", err)
		return
	}
	sdk.Logf(sdk.LevelInfo, "n2k gateway %s", map[bool]string{true: "enabled", false: "disabled"}[enabled])
}

func (p *plugin) frame(f sdk.CANFrame) {
	if !p.enabled {
		return
	}
	p.lastFrame = p.uptime
	p.canFrames++
	id := f.ID
	if !f.Extended || f.Remote {
		id = 1 << 31 // not an NMEA 2000 frame: counted as a bad frame
	}
	d := p.gw.Frame(decode.Frame{ID: id, Data: f.Data}, "")
	if d == nil {
		return
	}
	p.deltaFrame = p.canFrames
	p.publish(d)
	p.deltaFrame = 0
}

// appendFrameNumber adds the member frame (n) to the delta object that ends b.
func appendFrameNumber(b []byte, n uint64) []byte {
	b = append(b[:len(b)-1], `,"frame":`...)
	b = strconv.AppendUint(b, n, 10)
	return append(b, '}')
}

// publish sends a delta's values to Signal K, and the whole delta as an event when asked.
func (p *plugin) publish(d *skmap.Delta) {
	if d.Updates[0].Timestamp == "" {
		// The messages of one batch share a reading of the clock (a host call each cost
		// as much as a quarter of decoding a message): they came within the same few
		// milliseconds, and the device hands them over together.
		if b := sdk.Batch(); b != p.stampBat {
			p.stampBat, p.stamped = b, false
			if c, err := sdk.Now(); err == nil {
				p.uptime, p.stamped = c.Uptime, true
				if ms := c.Time.UnixMilli(); ms != p.stampMs || p.stamp == "" {
					p.stampMs, p.stamp = ms, p.clock.stamp(c.Time)
				}
			}
		}
		if p.stamped {
			d.Updates[0].Timestamp = p.stamp
		}
	}
	values := d.Updates[0].Values
	if d.Context == "" && p.overrides.Len() > 0 {
		for i := range values {
			v := &values[i]
			v.Path = p.overrides.Path(v.Path)
		}
	}
	// The delta's JSON first: a composite value's text in it is the text published.
	p.spans = p.spans[:0]
	if p.deltas {
		p.one, p.spans = d.AppendJSONSpans(p.one[:0], p.spans)
		if p.deltaFrame != 0 {
			p.one = appendFrameNumber(p.one, p.deltaFrame)
		}
	}
	src := p.sources.of(&d.Updates[0].Source)
	if d.Context != "" {
		// An AIS target's values are about another vessel, an aid to navigation or a base
		// station: they go to the server under that context, as n2k-signalk sends them. The
		// own vessel's path overrides, meta and rate limit leave them as they are.
		p.publishTarget(d.Context, src, values)
		values = nil
	}
	for i, v := range values {
		p.declareMeta(v.Path)
		if p.limiter.Interval > 0 && !p.limiter.Offer(limitStream(v.Path, src), held{src, v.Value}, p.uptime) {
			continue // held: the rate timer sends the latest
		}
		p.publishIn("", src, v.Path, v.Value, p.valueText(i))
	}
	if p.deltas {
		if len(p.pending)+len(p.one)+2 > maxDeltaEvent {
			p.flushDeltas()
		}
		if len(p.one)+2 > maxDeltaEvent {
			sdk.Logf(sdk.LevelWarn, "delta of %d bytes not sent as an event", len(p.one))
			return
		}
		if len(p.pending) == 0 {
			p.pending = append(p.pending, '[')
		} else {
			p.pending = append(p.pending, ',')
		}
		p.pending = append(p.pending, p.one...)
	}
}

// maxDeltaEvent bounds an n2k_delta event's data (the ABI allows 8 KiB).
const maxDeltaEvent = 8000

// flushDeltas sends the deltas gathered so far as one n2k_delta event, a JSON array: one
// event per delta would cost a host call each.
func (p *plugin) flushDeltas() {
	if len(p.pending) == 0 {
		return
	}
	p.pending = append(p.pending, ']')
	if err := sdk.EmitJSON(eventDelta, p.pending, false); err != nil {
		sdk.Logf(sdk.LevelWarn, "delta event: %v", err)
	}
	p.pending = p.pending[:0]
}

// nameUnique is the NAME's unique number: configured, or derived from the device id.
func (p *plugin) nameUnique() uint32 {
	if p.name.unique != 0 {
		return p.name.unique
	}
	h := fnv.New32a()
	h.Write([]byte(p.deviceID))
	return h.Sum32() & 0x1fffff
}

// startNode claims an address for the plugin on the bus.
func (p *plugin) startNode() {
	p.readClock()
	rx := append(skmap.PGNs(), 59904, 60928)
	p.node = &node.Node{
		Name: node.NewName(p.nameUnique(), p.name.manufacturer, p.name.devInstance, p.name.function, p.name.class,
			p.name.sysInstance, p.name.industry),
		Product:  node.Product{Code: 1, Model: "devhost n2k", SoftwareVersion: "0.2.0", ModelVersion: "1", Serial: p.deviceID},
		Transmit: []uint32{59392, 59904, 60928, 126464, 126993, 126996, 127502},
		Receive:  rx,
	}
	p.send(p.node.Start(p.address, p.uptime))
	p.armClaim()
}

func (p *plugin) armClaim() {
	if err := sdk.SetTimer(timerClaim, node.ClaimWait, 0); err != nil {
		sdk.Logf(sdk.LevelWarn, "claim timer: %v", err)
	}
}

// busMessage lets the node answer a whole message from the bus.
func (p *plugin) busMessage(m decode.Message) {
	if p.node == nil || m.PGN != 60928 && m.PGN != 59904 {
		return
	}
	if m.PGN == 60928 {
		p.readClock() // a conflict may start a new claim: its wait starts now
	}
	out := p.node.Message(m, p.uptime)
	p.send(out)
	if st, _ := p.node.State(); st == node.StateClaiming && len(out) > 0 {
		p.armClaim()
	}
	p.settleWaiting()
}

// send puts messages on the bus, in the frames that carry them.
func (p *plugin) send(msgs []decode.Message) {
	for _, m := range msgs {
		seq := p.seq[m.PGN]
		p.seq[m.PGN] = seq + 1
		frames := decode.Frames(m, seq, nil)
		if p.gwSrc != nil {
			n := p.sendGateway(m, frames)
			p.framesOut += uint64(n)
			if n == 0 {
				return
			}
			continue
		}
		for _, f := range frames {
			if err := sdk.CANSend(sdk.CANFrame{ID: f.ID, Extended: true, Data: f.Data}); err != nil {
				sdk.Logf(sdk.LevelWarn, "can send: %v", err)
				return
			}
			p.framesOut++
		}
	}
}

func (p *plugin) timer(id uint32) {
	switch id {
	case timerClaim:
		p.readClock()
		if p.node != nil && p.node.Tick(p.uptime) {
			a, _ := p.node.Address()
			sdk.Logf(sdk.LevelInfo, "n2k: address %d claimed", a)
			p.send(p.node.Heartbeat())
			if err := sdk.SetTimer(timerHeartbeat, node.HeartbeatEvery, node.HeartbeatEvery); err != nil {
				sdk.Logf(sdk.LevelWarn, "heartbeat timer: %v", err)
			}
		}
		p.settleWaiting()
	case timerHeartbeat:
		if p.node != nil {
			p.send(p.node.Heartbeat())
		}
	case timerReconnect:
		if p.gwSrc != nil && p.enabled {
			p.openGateway()
		}
	case timerRate:
		p.readClock()
		for _, h := range p.limiter.Due(p.uptime) {
			p.publishHeld(h)
		}
	default:
		p.tick()
	}
}

const switchPrefix = "electrical.switches.bank."

// put switches one switch of a bank: 127502 with that switch set and the others unchanged.
func (p *plugin) put(req sdk.PutRequest) sdk.PutResult {
	rest, _ := strings.CutPrefix(req.Path, switchPrefix)
	parts := strings.Split(rest, ".")
	if len(parts) != 3 || parts[2] != "state" {
		return sdk.Invalid("path must be electrical.switches.bank.<instance>.<switch>.state")
	}
	inst, err1 := strconv.Atoi(parts[0])
	sw, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || inst < 0 || inst > 252 || sw < 1 || sw > 28 {
		return sdk.Invalid("instance 0..252 and switch 1..28")
	}
	on, isBool := req.Bool()
	if !isBool {
		n, isNum := req.Number()
		if !isNum || n != 0 && n != 1 {
			return sdk.Invalid("state must be true, false, 1 or 0")
		}
		on = n == 1
	}
	state := 0.0
	if on {
		state = 1
	}
	data, err := decode.Encode(127502, map[string]any{"instance": float64(inst), "switch" + strconv.Itoa(sw): state})
	if err != nil {
		return sdk.Failure(err.Error())
	}
	m := decode.Message{Header: decode.Header{Prio: 3, PGN: 127502, Dst: 255}, Data: data}
	if p.node != nil {
		if st, _ := p.node.State(); st == node.StateClaiming {
			// The address is being claimed (250 ms, or a little more after a conflict): the
			// command waits for it rather than failing a PUT made just after the gateway
			// started. The host fails it after abi.PutDeferMs should the claim never end.
			if len(p.waiting) >= maxWaiting {
				return sdk.Failure("claiming an address on the bus; too many switch commands waiting")
			}
			p.readClock()
			p.waiting = append(p.waiting, waitingSwitch{id: req.ID, msg: m, at: p.uptime})
			return sdk.Deferred()
		}
	}
	if msg := p.sendSwitch(m); msg != "" {
		return sdk.Failure(msg)
	}
	return sdk.Success()
}

// maxWaiting bounds the switch commands held while the address is claimed.
const maxWaiting = 16

// waitingSwitch is a switch command (127502, source address not yet set) whose PUT was
// deferred until the node holds an address.
type waitingSwitch struct {
	id  uint32
	msg decode.Message
	at  time.Duration // uptime when deferred
}

// waitLimit is how long the host keeps a deferred PUT open (abi.PutDeferMs): a command
// held longer was already answered 502 and is dropped, not sent.
const waitLimit = time.Duration(abi.PutDeferMs) * time.Millisecond

// sendSwitch sends a switch command from the node's address, or answers why it could not.
func (p *plugin) sendSwitch(m decode.Message) string {
	if p.node == nil || !p.node.Usable() {
		return "no address on the bus"
	}
	m.Src, _ = p.node.Address()
	before := p.framesOut
	p.send([]decode.Message{m})
	if p.framesOut == before {
		return "bus write failed"
	}
	return ""
}

// settleWaiting completes the deferred switch PUTs once the claim has ended: sent when the
// address is ours, failed when it was lost or the node stopped. While the claim goes on they
// keep waiting.
func (p *plugin) settleWaiting() {
	if len(p.waiting) == 0 {
		return
	}
	if p.node != nil {
		if st, _ := p.node.State(); st == node.StateClaiming {
			return
		}
	}
	waiting := p.waiting
	p.waiting = nil
	p.readClock()
	for _, w := range waiting {
		if p.uptime-w.at >= waitLimit {
			continue
		}
		res := sdk.Success()
		if msg := p.sendSwitch(w.msg); msg != "" {
			res = sdk.Failure(msg)
		}
		if err := sdk.CompletePut(w.id, res); err != nil {
			sdk.Logf(sdk.LevelWarn, "switch PUT %d: %v", w.id, err)
		}
	}
}

func (p *plugin) tick() {
	p.flushDeltas()
	p.readClock()
	st := p.status()
	if st.State != p.lastState || st.State == "receiving" {
		p.statusJSON = st.appendJSON(p.statusJSON[:0])
		if err := sdk.EmitJSON(eventState, p.statusJSON, true); err != nil {
			sdk.Logf(sdk.LevelWarn, "status event: %v", err)
		}
		p.lastState = st.State
	}
	silent := p.dataState(p.gw.Stats()) == "silent"
	if silent != p.warned {
		state, msg := sdk.Normal, ""
		if silent {
			state, msg = sdk.Warn, "no frames from "+p.source+" for 10 s"
			if g := p.gwSrc; g != nil && g.state != gwConnected && g.lastErr != "" {
				msg = truncate(msg+": "+g.lastErr, 95)
			}
		}
		if err := sdk.ReportHealth(condBus, state, msg); err != nil {
			sdk.Logf(sdk.LevelWarn, "health: %v", err)
			return
		}
		p.warned = silent
	}
}

// deviceView is one device in the status.
type deviceView struct {
	Address  uint8   `json:"address"`
	Name     *string `json:"name"`
	Product  *string `json:"product"`
	LastSeen float64 `json:"last_seen_s"`
}

// status is GET /n2k/status and the n2k event.
type status struct {
	State     string            `json:"state"`
	Source    string            `json:"source"`
	Address   *int              `json:"address"`
	Name      *string           `json:"name"`
	FramesIn  uint64            `json:"frames_in"`
	FramesOut uint64            `json:"frames_out"`
	Messages  uint64            `json:"messages"`
	Deltas    uint64            `json:"deltas"`
	Errors    map[string]uint64 `json:"errors"`
	PGNs      map[string]uint64 `json:"pgns"`
	Devices   []deviceView      `json:"devices"`
	// The network gateway source: where, how often connected, the last failure.
	Gateway   *gatewayView `json:"gateway,omitempty"`
	LastError *string      `json:"last_error,omitempty"`
	// RateLimit is the per-path rate limit at work; absent while rate_ms is 0.
	RateLimit *rateView `json:"rate_limit,omitempty"`
}

// rateView is the rate limit's state: its interval, the path and source pairs it limits
// now (at most outflow.MaxStreams), the values it holds for the end of their interval, and
// the values it let pass unlimited since the plugin started because that many pairs were
// active (a value of a pair it had no room for).
type rateView struct {
	IntervalMs int64  `json:"interval_ms"`
	Streams    int    `json:"streams"`
	Held       int    `json:"held"`
	Unlimited  uint64 `json:"unlimited"`
}

func (p *plugin) status() status {
	s := p.gw.Stats()
	st := status{Source: p.source, FramesIn: s.FramesIn, FramesOut: p.framesOut, Messages: s.Messages,
		Deltas: s.Deltas, Errors: s.Errors, PGNs: s.PGNs, Devices: []deviceView{}, State: p.dataState(s)}
	for k, n := range p.netErrs {
		st.Errors[k] += n
	}
	if g := p.gwSrc; g != nil {
		st.Gateway = g.view()
		if g.lastErr != "" {
			last := g.lastErr
			st.LastError = &last
		}
		switch {
		case g.state != gwConnected:
			st.State = g.state // connecting, or reconnecting after last_error
		case st.State == "listening":
			st.State = gwConnected
		}
	}
	if p.node != nil {
		if a, ok := p.node.Address(); ok {
			addr := int(a)
			st.Address = &addr
		}
		name := strconv.FormatUint(uint64(p.node.Name), 16)
		st.Name = &name
	}
	if l := &p.limiter; l.Interval > 0 {
		st.RateLimit = &rateView{IntervalMs: l.Interval.Milliseconds(), Streams: l.Tracked(), Held: l.Pending(),
			Unlimited: p.unlimitedBefore + l.Untracked()}
	}
	nowMs := int64(p.uptime / time.Millisecond)
	for _, d := range p.gw.Devices() {
		v := deviceView{Address: d.Address, LastSeen: float64(nowMs-d.LastSeen) / 1000}
		if d.Name != "" {
			name := d.Name
			v.Name = &name
		}
		if d.Product != "" {
			prod := d.Product
			v.Product = &prod
		}
		st.Devices = append(st.Devices, v)
	}
	return st
}

// dataState is what the source delivers: disabled, listening (nothing yet), receiving, or
// silent (nothing for silentFor). Frames and whole messages (Actisense) both count.
func (p *plugin) dataState(s gateway.Stats) string {
	none := s.FramesIn == 0 && s.Messages == 0
	switch {
	case !p.enabled:
		return "disabled"
	case none && p.uptime-p.started < silentFor:
		return "listening"
	case none && p.uptime-p.started >= silentFor, p.uptime-p.lastFrame >= silentFor:
		return "silent"
	}
	return "receiving"
}

func (p *plugin) serve(req *sdk.Request) sdk.Response {
	if req.Method != "GET" || req.Path != "/n2k/status" {
		return sdk.ErrorResponse(404, "not_found")
	}
	p.flushDeltas() // a reader of the status sees the deltas of every frame it counts
	p.readClock()
	st := p.status()
	p.statusJSON = st.appendJSON(p.statusJSON[:0])
	return sdk.Response{Status: 200, Body: p.statusJSON}
}

// appendJSON appends the status as json.Marshal writes it (map keys in order), without
// reflection: the status is asked for often while a log is decoded (devctl polls it), and
// encoding/json's reflection cost as much as decoding a few dozen messages inside the
// sandbox.
func (st *status) appendJSON(b []byte) []byte {
	b = append(b, `{"state":`...)
	b = skmap.AppendValue(b, st.State)
	b = append(b, `,"source":`...)
	b = skmap.AppendValue(b, st.Source)
	b = append(b, `,"address":`...)
	if st.Address != nil {
		b = strconv.AppendInt(b, int64(*st.Address), 10)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"name":`...)
	b = appendOptString(b, st.Name)
	for _, c := range [...]struct {
		key string
		n   uint64
	}{{`,"frames_in":`, st.FramesIn}, {`,"frames_out":`, st.FramesOut}, {`,"messages":`, st.Messages}, {`,"deltas":`, st.Deltas}} {
		b = append(b, c.key...)
		b = strconv.AppendUint(b, c.n, 10)
	}
	b = append(b, `,"errors":`...)
	b = appendCounts(b, st.Errors)
	b = append(b, `,"pgns":`...)
	b = appendCounts(b, st.PGNs)
	b = append(b, `,"devices":[`...)
	for i, d := range st.Devices {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"address":`...)
		b = strconv.AppendUint(b, uint64(d.Address), 10)
		b = append(b, `,"name":`...)
		b = appendOptString(b, d.Name)
		b = append(b, `,"product":`...)
		b = appendOptString(b, d.Product)
		b = append(b, `,"last_seen_s":`...)
		b = skmap.AppendValue(b, d.LastSeen)
		b = append(b, '}')
	}
	b = append(b, ']')
	if g := st.Gateway; g != nil {
		b = append(b, `,"gateway":{"host":`...)
		b = skmap.AppendValue(b, g.Host)
		b = append(b, `,"port":`...)
		b = strconv.AppendInt(b, int64(g.Port), 10)
		b = append(b, `,"connects":`...)
		b = strconv.AppendUint(b, g.Connects, 10)
		b = append(b, '}')
	}
	if st.LastError != nil {
		b = append(b, `,"last_error":`...)
		b = appendOptString(b, st.LastError)
	}
	if r := st.RateLimit; r != nil {
		b = append(b, `,"rate_limit":{`...)
		for _, c := range [...]struct {
			key string
			n   uint64
		}{{`"interval_ms":`, uint64(r.IntervalMs)}, {`,"streams":`, uint64(r.Streams)}, {`,"held":`, uint64(r.Held)}, {`,"unlimited":`, r.Unlimited}} {
			b = append(b, c.key...)
			b = strconv.AppendUint(b, c.n, 10)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendOptString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return skmap.AppendValue(b, *s)
}

// appendCounts appends counts by name as a JSON object, names in order (as json.Marshal).
func appendCounts(b []byte, m map[string]uint64) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = skmap.AppendValue(b, k)
		b = append(b, ':')
		b = strconv.AppendUint(b, m[k], 10)
	}
	return append(b, '}')
}
