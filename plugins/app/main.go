// Command app is the switch-bank plugin: a boat's bank of GPIO-driven switches (pumps,
// lights, fans) that the owner configures as a table, switches from Signal K with PUTs and
// watches from the web UI. It is built as a WebAssembly plugin for the device:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o app.wasm ./plugins/app
//
// Configuration (namespace f_app): `switches`, a table with the columns name, pin and
// default. Each switch publishes electrical.switches.<name>.state (a bool) at start and on
// every change, takes PUTs on that path (true/false or 1/0; anything else is an invalid
// argument; a pin that fails to switch answers failure and raises the health condition
// app.pinFault) and is listed by GET /api/v1/app/switches.
//
// Choices:
//   - A switch's name is 1 to 32 characters of letters, digits, '_' and '-' (one Signal K
//     path segment); its pin 0..1023; its default true/false, 1/0 or "on"/"off" (missing:
//     off). Rows breaking these rules, or repeating a name or pin, are skipped and reported in
//     the warn condition app.config; the other rows work.
//   - A switch starts at its default when the plugin starts and when it first appears in
//     the configuration; a configuration change keeps the state of switches that stay (moving
//     a switch to another pin drives the new pin to the current state).
//   - The published state is what the plugin last drove the pin to (off until the first
//     successful write); a failed write leaves it unchanged. app.pinFault is an alarm naming
//     the faulted switches; a configuration change retries a faulted pin with the switch's
//     last wanted state (its default, or the last successful PUT), and the condition returns
//     to normal once every switch has been driven successfully again.
//   - electrical.switches.<name>.state is not in the Signal K specification, so each path gets
//     its meta (displayName, description) declared.
package main

//go:generate env GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o app.wasm .

import (
	"fmt"
	"sort"
	"strings"

	"devhost/sdk"
)

func init() { sdk.Register(newBank().plugin()) }

func main() {}

// Health condition names (keys app.pinFault and app.config).
const (
	condFault  = "pinFault"
	condConfig = "config"
)

const pathPrefix = "electrical.switches."

// validName reports whether s is 1 to 32 characters of letters, digits, '_' and '-'.
func validName(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// descriptor is the namespace f_app.
var descriptor = sdk.Namespace{
	Version:     1,
	Title:       "Switch bank",
	Description: "GPIO-driven switches published to Signal K as electrical.switches.<name>.state.",
	Keys: []sdk.Key{{
		Name:        "switches",
		Type:        sdk.TypeString,
		Default:     "[]",
		MaxLength:   3999,
		Title:       "Switches",
		Description: "One row per switch: its name in Signal K, its GPIO pin and its state at start (on or off).",
		X:           &sdk.Display{Format: sdk.FormatTable, Columns: []string{"name", "pin", "default"}},
	}},
}

type switchState struct {
	Name    string
	Pin     int
	Default bool
	On      bool   // what the pin was last driven to (off before the first success)
	Target  bool   // the state to drive: the default, then each successful PUT
	Fault   string // last write failure, "" when none
}

type bank struct {
	switches []*switchState
	byName   map[string]*switchState
	reported map[string]string // conditions reported so far: "<state> <message>"
}

func newBank() *bank {
	return &bank{byName: map[string]*switchState{}, reported: map[string]string{}}
}

func (b *bank) plugin() *sdk.Plugin {
	return &sdk.Plugin{
		OnInit:   b.start,
		OnConfig: b.configure,
		OnPut:    b.put,
		OnHTTP:   b.serve,
	}
}

func (b *bank) start(sdk.Info) error {
	*b = *newBank()
	if err := sdk.RegisterNamespace(descriptor); err != nil {
		return err
	}
	cfg, err := sdk.GetConfig()
	if err != nil {
		return err
	}
	if err := sdk.HandlePuts(pathPrefix + "*"); err != nil {
		return err
	}
	b.configure(cfg)
	return nil
}

// row is one table row as the configuration holds it.
type row struct {
	Name    any `json:"name"`
	Pin     any `json:"pin"`
	Default any `json:"default"`
}

// parseRows turns the table into switches, skipping rows that break the rules.
func parseRows(cfg sdk.Config) ([]switchState, []string) {
	var rows []row
	if err := cfg.Table("switches", &rows); err != nil {
		return nil, []string{err.Error()}
	}
	var out []switchState
	var problems []string
	names, pins := map[string]bool{}, map[int]bool{}
	for i, r := range rows {
		name, _ := r.Name.(string)
		pinF, okPin := r.Pin.(float64)
		pin := int(pinF)
		def, okDef := parseState(r.Default)
		switch {
		case !validName(name):
			problems = append(problems, fmt.Sprintf("row %d: bad name", i+1))
		case !okPin || pinF != float64(pin) || pin < 0 || pin > 1023:
			problems = append(problems, fmt.Sprintf("row %d: bad pin", i+1))
		case r.Default != nil && !okDef:
			problems = append(problems, fmt.Sprintf("row %d: bad default", i+1))
		case names[name]:
			problems = append(problems, fmt.Sprintf("row %d: name %s repeated", i+1, name))
		case pins[pin]:
			problems = append(problems, fmt.Sprintf("row %d: pin %d repeated", i+1, pin))
		default:
			names[name], pins[pin] = true, true
			out = append(out, switchState{Name: name, Pin: pin, Default: def})
		}
	}
	return out, problems
}

// parseState reads an on/off value: a bool, 1/0, or "on"/"off"/"true"/"false".
func parseState(v any) (bool, bool) {
	switch x := v.(type) {
	case bool:
		return x, true
	case float64:
		if x == 0 || x == 1 {
			return x == 1, true
		}
	case string:
		switch strings.ToLower(x) {
		case "on", "true", "1":
			return true, true
		case "off", "false", "0":
			return false, true
		}
	case nil:
		return false, true
	}
	return false, false
}

// configure applies the switch table: new switches start at their default, kept switches
// keep their state, moved switches drive their new pin.
func (b *bank) configure(cfg sdk.Config) {
	rows, problems := parseRows(cfg)
	old := b.byName
	b.switches, b.byName = nil, map[string]*switchState{}
	for i := range rows {
		s := &rows[i]
		prev, kept := old[s.Name]
		s.Target = s.Default
		if kept {
			s.On, s.Target, s.Fault = prev.On, prev.Target, prev.Fault
		}
		b.switches = append(b.switches, s)
		b.byName[s.Name] = s
		if !kept || prev.Pin != s.Pin || prev.Fault != "" {
			_ = b.drive(s, s.Target)
		}
		if !kept {
			meta := map[string]string{"displayName": s.Name,
				"description": fmt.Sprintf("Switch %s on GPIO pin %d (true: on)", s.Name, s.Pin)}
			if err := sdk.DeclareMeta(statePath(s.Name), meta); err != nil {
				sdk.Logf(sdk.LevelWarn, "meta for %s: %v", s.Name, err)
			}
		}
		if err := sdk.Publish(statePath(s.Name), s.On); err != nil {
			sdk.Logf(sdk.LevelWarn, "publish %s: %v", s.Name, err)
		}
	}
	if len(problems) > 0 {
		b.report(condConfig, sdk.Warn, "switches: "+strings.Join(problems, "; "))
		sdk.Logf(sdk.LevelWarn, "switches: %s", strings.Join(problems, "; "))
	} else {
		b.report(condConfig, sdk.Normal, "")
	}
	b.reportFaults()
	sdk.Logf(sdk.LevelInfo, "%d switches configured", len(b.switches))
}

func statePath(name string) string { return pathPrefix + name + ".state" }

// drive writes the pin and records the outcome; the state changes only on success.
func (b *bank) drive(s *switchState, on bool) error {
	if err := sdk.GPIOWrite(s.Pin, on); err != nil {
		s.Fault = err.Error()
		sdk.Logf(sdk.LevelError, "switch %s pin %d: %v", s.Name, s.Pin, err)
		return err
	}
	s.On, s.Target, s.Fault = on, on, ""
	return nil
}

func (b *bank) put(req sdk.PutRequest) sdk.PutResult {
	rest, ok := strings.CutPrefix(req.Path, pathPrefix)
	name, ok2 := strings.CutSuffix(rest, ".state")
	s := b.byName[name]
	if !ok || !ok2 || s == nil {
		return sdk.Invalid("no such switch")
	}
	on, isBool := req.Bool()
	if !isBool {
		n, isNum := req.Number()
		if !isNum || (n != 0 && n != 1) {
			return sdk.Invalid("state must be true, false, 1 or 0")
		}
		on = n == 1
	}
	err := b.drive(s, on)
	b.reportFaults()
	if err != nil {
		return sdk.Failure(fmt.Sprintf("pin %d fault", s.Pin))
	}
	if err := sdk.Publish(statePath(s.Name), s.On); err != nil {
		sdk.Logf(sdk.LevelWarn, "publish %s: %v", s.Name, err)
	}
	sdk.Logf(sdk.LevelInfo, "switch %s %s", s.Name, onOff(on))
	return sdk.Success()
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// reportFaults keeps app.pinFault in step with the switches' faults.
func (b *bank) reportFaults() {
	var names []string
	for _, s := range b.switches {
		if s.Fault != "" {
			names = append(names, fmt.Sprintf("%s (pin %d)", s.Name, s.Pin))
		}
	}
	if len(names) == 0 {
		b.report(condFault, sdk.Normal, "")
		return
	}
	sort.Strings(names)
	b.report(condFault, sdk.Alarm, "fault: "+strings.Join(names, ", "))
}

// report sends a condition when its state or message changed; a normal state is sent only
// to clear one that was raised, so a healthy bank takes no slot in the device's table.
func (b *bank) report(name string, state sdk.HealthState, msg string) {
	if len(msg) > 95 {
		msg = msg[:92] + "..."
	}
	prev, seen := b.reported[name]
	now := state.String() + " " + msg
	if prev == now || state == sdk.Normal && !seen {
		return
	}
	if err := sdk.ReportHealth(name, state, msg); err != nil {
		sdk.Logf(sdk.LevelWarn, "health %s: %v", name, err)
		return
	}
	b.reported[name] = now
}

// switchView is one switch in GET /app/switches.
type switchView struct {
	Name  string `json:"name"`
	Pin   int    `json:"pin"`
	State bool   `json:"state"`
	Fault string `json:"fault,omitempty"`
}

func (b *bank) serve(req *sdk.Request) sdk.Response {
	if req.Method != "GET" || req.Path != "/app/switches" {
		return sdk.ErrorResponse(404, "not_found")
	}
	list := make([]switchView, 0, len(b.switches))
	for _, s := range b.switches {
		list = append(list, switchView{Name: s.Name, Pin: s.Pin, State: s.On, Fault: s.Fault})
	}
	return sdk.JSONResponse(200, map[string]any{"switches": list})
}
