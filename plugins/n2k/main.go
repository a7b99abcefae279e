// Command n2k is the NMEA 2000 gateway plugin: it listens to the board's CAN bus, reassembles
// and decodes the NMEA 2000 traffic from canboat's PGN database and publishes the values to
// Signal K with the paths, units and values of signalk-server's n2k-signalk. It is built as
// a WebAssembly plugin for the device:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o n2k.wasm ./plugins/n2k
//
// Configuration (namespace f_n2k): enabled (default false: the plugin idles), source (the
// board's CAN bus), pgn_allow and pgn_deny (comma-separated PGNs; an empty allow list
// allows all), deltas (also send each delta, $source and timestamp included, as the SSE
// event n2k_delta, in arrays of up to 8000 bytes sent when full, every second and before
// each status answer; `devctl n2k decode` reads them).
//
// GET /api/v1/n2k/status and the SSE event n2k (retained, sent once a second while it
// changes) carry the status: state (disabled, listening, receiving, silent), source, address
// (null: the plugin listens without claiming one), name (null likewise), frames_in,
// frames_out, messages, deltas, errors by kind, pgns (PGN → messages) and devices seen. The
// health condition n2k.bus warns while the source is enabled and silent for 10 s.
package main

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o n2k.wasm .

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"devhost/plugins/n2k/decode"
	"devhost/plugins/n2k/gateway"
	"devhost/plugins/n2k/skmap"
	"devhost/sdk"
)

func init() { sdk.Register(newPlugin().handlers()) }

func main() {}

const (
	timerTick  = 1
	silentFor  = 10 * time.Second
	condBus    = "bus"
	eventState = "n2k"
	eventDelta = "n2k_delta"
)

var descriptor = sdk.Namespace{
	Version:     1,
	Title:       "NMEA 2000 gateway",
	Description: "Decodes the NMEA 2000 bus into Signal K.",
	Keys: []sdk.Key{
		{Name: "enabled", Type: sdk.TypeBool, Default: false, Title: "Enabled",
			Description: "Listen to the source and publish its values to Signal K."},
		{Name: "source", Type: sdk.TypeString, Default: "can", Enum: []string{"can"}, Title: "Source",
			Description: "Where the NMEA 2000 traffic comes from: the board's CAN bus."},
		{Name: "pgn_allow", Type: sdk.TypeString, Default: "", MaxLength: 1000, Pattern: `^[0-9, ]*$`, Title: "PGNs allowed",
			Description: "Comma-separated PGNs to decode; empty decodes every PGN."},
		{Name: "pgn_deny", Type: sdk.TypeString, Default: "", MaxLength: 1000, Pattern: `^[0-9, ]*$`, Title: "PGNs denied",
			Description: "Comma-separated PGNs never decoded."},
		{Name: "deltas", Type: sdk.TypeBool, Default: false, Title: "Delta events",
			Description: "Also send every delta as the SSE event n2k_delta (for tools; costs time per message)."},
	},
}

type plugin struct {
	gw        *gateway.Gateway
	enabled   bool
	deltas    bool
	source    string
	lastFrame time.Duration // uptime of the last frame
	started   time.Duration // uptime when enabled
	uptime    time.Duration // at the last clock reading
	framesOut uint64
	lastState string
	warned    bool
	one       []byte // a delta's JSON
	pending   []byte // deltas not yet sent as an event: "[d1,d2"
}

func newPlugin() *plugin { return &plugin{gw: gateway.New(), source: "can"} }

func (p *plugin) handlers() *sdk.Plugin {
	return &sdk.Plugin{OnInit: p.start, OnConfig: p.configure, OnCAN: p.frame, OnTimer: p.tick, OnHTTP: p.serve}
}

func (p *plugin) start(sdk.Info) error {
	*p = *newPlugin()
	p.gw.Now = func() int64 { return int64(p.uptime / time.Millisecond) }
	if err := sdk.RegisterNamespace(descriptor); err != nil {
		return err
	}
	cfg, err := sdk.GetConfig()
	if err != nil {
		return err
	}
	p.readClock()
	p.configure(cfg)
	return sdk.SetTimer(timerTick, time.Second, time.Second)
}

func (p *plugin) readClock() {
	if c, err := sdk.Now(); err == nil {
		p.uptime = c.Uptime
	}
}

// parsePGNs reads a comma-separated PGN list; malformed entries are skipped.
func parsePGNs(s string) map[uint32]bool {
	out := map[uint32]bool{}
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32); err == nil {
			out[uint32(n)] = true
		}
	}
	return out
}

func (p *plugin) configure(cfg sdk.Config) {
	allow, deny := parsePGNs(cfg.String("pgn_allow")), parsePGNs(cfg.String("pgn_deny"))
	p.gw.Allow = func(pgn uint32) bool { return (len(allow) == 0 || allow[pgn]) && !deny[pgn] }
	p.deltas = cfg.Bool("deltas")
	if s := cfg.String("source"); s != "" {
		p.source = s
	}
	enabled := cfg.Bool("enabled")
	if enabled == p.enabled {
		return
	}
	p.enabled = enabled
	var err error
	if enabled {
		p.started = p.uptime
		err = sdk.CANReceive(sdk.CANFilter{ID: 0, Mask: 0}) // every frame
	} else {
		err = sdk.CANReceive()
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
	id := f.ID
	if !f.Extended || f.Remote {
		id = 1 << 31 // not an NMEA 2000 frame: counted as a bad frame
	}
	d := p.gw.Frame(decode.Frame{ID: id, Data: f.Data}, "")
	if d == nil {
		return
	}
	p.publish(d)
}

// publish sends a delta's values to Signal K, and the whole delta as an event when asked.
func (p *plugin) publish(d *skmap.Delta) {
	if d.Updates[0].Timestamp == "" {
		if c, err := sdk.Now(); err == nil {
			p.uptime = c.Uptime
			d.Updates[0].Timestamp = c.Time.UTC().Format("2006-01-02T15:04:05.000Z")
		}
	}
	for _, v := range d.Updates[0].Values {
		var err error
		switch x := v.Value.(type) {
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				err = sdk.Publish(v.Path, nil)
			} else {
				err = sdk.PublishNumber(v.Path, x)
			}
		default:
			err = sdk.Publish(v.Path, x)
		}
		if err != nil {
			sdk.Logf(sdk.LevelWarn, "publish %s: %v", v.Path, err)
		}
	}
	if p.deltas {
		p.one = d.AppendJSON(p.one[:0])
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
	if err := sdk.Emit(eventDelta, json.RawMessage(p.pending), false); err != nil {
		sdk.Logf(sdk.LevelWarn, "delta event: %v", err)
	}
	p.pending = p.pending[:0]
}

func (p *plugin) tick(uint32) {
	p.flushDeltas()
	p.readClock()
	st := p.status()
	if st.State != p.lastState || st.State == "receiving" {
		if err := sdk.Emit(eventState, st, true); err != nil {
			sdk.Logf(sdk.LevelWarn, "status event: %v", err)
		}
		p.lastState = st.State
	}
	silent := st.State == "silent"
	if silent != p.warned {
		state, msg := sdk.Normal, ""
		if silent {
			state, msg = sdk.Warn, "no frames from "+p.source+" for 10 s"
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
}

func (p *plugin) status() status {
	s := p.gw.Stats()
	st := status{Source: p.source, FramesIn: s.FramesIn, FramesOut: p.framesOut, Messages: s.Messages,
		Deltas: s.Deltas, Errors: s.Errors, PGNs: s.PGNs, Devices: []deviceView{}}
	switch {
	case !p.enabled:
		st.State = "disabled"
	case s.FramesIn == 0 && p.uptime-p.started < silentFor:
		st.State = "listening"
	case s.FramesIn == 0 && p.uptime-p.started >= silentFor, p.uptime-p.lastFrame >= silentFor:
		st.State = "silent"
	default:
		st.State = "receiving"
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

func (p *plugin) serve(req *sdk.Request) sdk.Response {
	if req.Method != "GET" || req.Path != "/n2k/status" {
		return sdk.ErrorResponse(404, "not_found")
	}
	p.flushDeltas() // a reader of the status sees the deltas of every frame it counts
	p.readClock()
	return sdk.JSONResponse(200, p.status())
}
