//go:build !wasip1

package sdk_test

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"devhost/abi"
	"devhost/sdk"
)

// manifest builds a test manifest asking for caps.
func manifest(caps ...abi.Capability) abi.Manifest {
	return abi.Manifest{ID: "demo", Name: "Demo", Version: "1.0.0", ABI: abi.Version, Capabilities: caps}
}

// A plugin publishes its state when it starts; the values reach the device in one call.
func ExamplePublish() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapSKPublish)}
	err := h.Start(&sdk.Plugin{OnInit: func(sdk.Info) error {
		if err := sdk.Publish("electrical.batteries.house.voltage", 12.8); err != nil {
			return err
		}
		return sdk.Publish("electrical.switches.pump.state", true)
	}})
	fmt.Println(err)
	for _, pv := range h.Published {
		fmt.Println(pv.Path, pv.Value)
	}
	// Output:
	// <nil>
	// electrical.batteries.house.voltage 12.8
	// electrical.switches.pump.state true
}

// An AIS target's values go to its own context (ABI 1.3); the empty path sets members of the
// context's root, such as the target's name.
func ExamplePublishTo() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapSKPublish)}
	const target = "vessels.urn:mrn:imo:mmsi:230123456"
	err := h.Start(&sdk.Plugin{OnInit: func(sdk.Info) error {
		if err := sdk.PublishTo(target, "navigation.speedOverGround", 3.2); err != nil {
			return err
		}
		return sdk.PublishTo(target, "", map[string]string{"name": "ILMATAR"})
	}})
	fmt.Println(err)
	for _, pv := range h.Contexts[target] {
		fmt.Printf("%q %v\n", pv.Path, pv.Value)
	}
	// Output:
	// <nil>
	// "navigation.speedOverGround" 3.2
	// "" {"name":"ILMATAR"}
}

// Non-standard paths get their metadata declared.
func ExampleDeclareMeta() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapSKPublish)}
	_ = h.Start(&sdk.Plugin{OnInit: func(sdk.Info) error {
		return sdk.DeclareMeta("tanks.bilge.level", map[string]string{"units": "m", "description": "Bilge water"})
	}})
	fmt.Println(h.Meta["tanks.bilge.level"])
	// Output:
	// {"description":"Bilge water","units":"m"}
}

// A plugin registers its namespace f_<id> with a table key and reads its rows.
func ExampleRegisterNamespace() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapConfig)}
	type light struct {
		Name string  `json:"name"`
		Pin  float64 `json:"pin"`
	}
	_ = h.Start(&sdk.Plugin{
		OnInit: func(sdk.Info) error {
			return sdk.RegisterNamespace(sdk.Namespace{Version: 1, Title: "Lights", Keys: []sdk.Key{
				{Name: "lights", Type: sdk.TypeString, Default: "[]",
					X: &sdk.Display{Format: sdk.FormatTable, Columns: []string{"name", "pin"}}},
				{Name: "dim", Type: sdk.TypeInt, Default: 50, Min: sdk.Float(0), Max: sdk.Float(100)},
			}})
		},
		OnConfig: func(cfg sdk.Config) {
			var rows []light
			_ = cfg.Table("lights", &rows)
			fmt.Println("dim", cfg.Int("dim"), "lights", rows)
		},
	})
	_ = h.SetConfig(map[string]any{"lights": `[{"name":"cabin","pin":4}]`})
	cfg, err := sdk.GetConfig()
	fmt.Println(cfg.String("lights"), err)
	// Output:
	// dim 50 lights [{cabin 4}]
	// [{"name":"cabin","pin":4}] <nil>
}

// Deltas of subscribed paths arrive in batches.
func ExampleSubscribe() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapSKSubscribe)}
	_ = h.Start(&sdk.Plugin{
		OnInit: func(sdk.Info) error { return sdk.Subscribe("navigation.*") },
		OnDelta: func(vs []sdk.PathValue) {
			for _, v := range vs {
				fmt.Println(v.Path, v.Value)
			}
		},
	})
	_ = h.Delta(
		sdk.PathValue{Path: "navigation.speedOverGround", Value: abi.Number(3.2)},
		sdk.PathValue{Path: "environment.depth.belowKeel", Value: abi.Number(4)},
		sdk.PathValue{Path: "navigation.position", Value: abi.JSON([]byte(`{"latitude":60.1,"longitude":24.9}`))},
	)
	// Output:
	// navigation.speedOverGround 3.2
	// navigation.position {"latitude":60.1,"longitude":24.9}
}

// Inbound PUTs get one of four results; a deferred one is completed later.
func ExampleHandlePuts() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapSKPut, abi.CapSKPublish, abi.CapTimer)}
	_ = h.Start(&sdk.Plugin{
		OnInit: func(sdk.Info) error { return sdk.HandlePuts("steering.autopilot.*") },
		OnPut: func(req sdk.PutRequest) sdk.PutResult {
			switch req.Path {
			case "steering.autopilot.state":
				if req.Value.Str != "auto" && req.Value.Str != "standby" {
					return sdk.Invalid("auto or standby")
				}
				_ = sdk.Publish(req.Path, req.Value)
				return sdk.Success()
			case "steering.autopilot.target.headingMagnetic":
				_ = sdk.SetTimer(1, time.Second, 0) // the pilot answers later
				return sdk.Deferred()
			}
			return sdk.Failure("read-only")
		},
		OnTimer: func(uint32) { _ = sdk.CompletePut(2, sdk.Success()) },
	})
	for _, p := range []struct {
		path string
		v    any
	}{{"steering.autopilot.state", "auto"}, {"steering.autopilot.target.headingMagnetic", 1.2},
		{"steering.autopilot.state", "off"}, {"steering.autopilot.mode", "x"}, {"navigation.x", 1}} {
		r, _ := h.Put(p.path, p.v)
		fmt.Println(strings.TrimSpace(fmt.Sprintln(p.path, r.Result, r.Message)))
	}
	_ = h.Advance(time.Second)
	last := h.PutReplies[len(h.PutReplies)-1]
	fmt.Println("put", last.ID, last.Result)
	// Output:
	// steering.autopilot.state success
	// steering.autopilot.target.headingMagnetic deferred
	// steering.autopilot.state invalid argument auto or standby
	// steering.autopilot.mode failure read-only
	// navigation.x failure no handler
	// put 2 success
}

// An outbound PUT is answered by an event.
func ExampleSendPut() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapSKPutSend)}
	_ = h.Start(&sdk.Plugin{OnPutAnswer: func(a sdk.PutAnswer) { fmt.Println("answer", a.ID, a.State, a.Status) }})
	id, err := sdk.SendPut("electrical.switches.anchorLight.state", true)
	fmt.Println(id, err)
	_ = h.PutAnswer(sdk.PutAnswer{ID: id, State: "COMPLETED", Status: 200})
	// Output:
	// 1 <nil>
	// answer 1 COMPLETED 200
}

// Timers fire as events; nothing in a plugin sleeps.
func ExampleSetTimer() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapTimer, abi.CapClock)}
	_ = h.Start(&sdk.Plugin{
		OnInit: func(sdk.Info) error { return sdk.SetTimer(7, time.Second, 5*time.Second) },
		OnTimer: func(id uint32) {
			c, _ := sdk.Now()
			fmt.Println("timer", id, "at", c.Uptime)
		},
	})
	_ = h.Advance(12 * time.Second)
	// Output:
	// timer 7 at 1s
	// timer 7 at 6s
	// timer 7 at 11s
}

// The device's clock says whether it is synced and by which source.
func ExampleNow() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapClock),
		Clock: abi.Clock{UnixMs: 1700000000000, Synced: true, Source: abi.ClockSNTP}}
	_ = h.Start(&sdk.Plugin{})
	c, err := sdk.Now()
	fmt.Println(c.Time.Format(time.RFC3339), c.Synced, c.Source, err)
	// Output:
	// 2023-11-14T22:13:20Z true sntp <nil>
}

// Conditions are keyed <id>.<name>; the reboot flag needs its own capability.
func ExampleReportHealth() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapHealth)}
	_ = h.Start(&sdk.Plugin{})
	fmt.Println(sdk.ReportHealth("sensor", sdk.Warn, "no reading for 60 s"))
	fmt.Println(sdk.ReportHealthReboot("sensor", sdk.Alarm, "bus stuck"))
	fmt.Println(h.Health["demo.sensor"].State, h.Health["demo.sensor"].Message)
	// Output:
	// <nil>
	// sdk: health: permission denied
	// warn no reading for 60 s
}

// Log lines are tagged with the plugin id by the device.
func ExampleLogf() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapLog)}
	_ = h.Start(&sdk.Plugin{OnInit: func(info sdk.Info) error {
		return sdk.Logf(sdk.LevelInfo, "%s %s started on %s", info.ID, info.Version, info.DeviceID)
	}})
	fmt.Println(h.Logs)
	// Output:
	// [INFO demo 1.0.0 started on beef]
}

// HTTP endpoints are declared in the manifest and answered by OnHTTP.
func ExampleRequest() {
	m := manifest(abi.CapHTTP)
	m.Routes = []abi.Route{{Method: "GET", Path: "/demo/tanks/:name"}}
	h := &sdk.FakeHost{Manifest: m}
	_ = h.Start(&sdk.Plugin{OnHTTP: func(req *sdk.Request) sdk.Response {
		if req.Param("name") != "fuel" {
			return sdk.ErrorResponse(404, "not_found")
		}
		return sdk.JSONResponse(200, map[string]any{"tank": "fuel", "level": 0.8, "unit": req.Query().Get("unit")})
	}})
	for _, target := range []string{"/demo/tanks/fuel?unit=ratio", "/demo/tanks/water", "/demo/other"} {
		r, _ := h.HTTP("GET", target, "")
		fmt.Println(r.Status, string(r.Body))
	}
	// Output:
	// 200 {"level":0.8,"tank":"fuel","unit":"ratio"}
	// 404 {"error":"not_found"}
	// 404 {"error":"not_found"}
}

// SSE events must be declared in the manifest.
func ExampleEmit() {
	m := manifest(abi.CapEvents)
	m.Events = []string{"demo"}
	h := &sdk.FakeHost{Manifest: m}
	_ = h.Start(&sdk.Plugin{})
	fmt.Println(sdk.Emit("demo", map[string]int{"count": 3}, true))
	fmt.Println(sdk.Emit("wifi", nil, false))
	fmt.Println(h.SSE[0].Event, string(h.SSE[0].Data), h.SSE[0].Retain)
	// Output:
	// <nil>
	// sdk: event: permission denied
	// demo {"count":3} true
}

// A document the plugin wrote itself goes as it is; the host refuses one that is not JSON.
func ExampleEmitJSON() {
	m := manifest(abi.CapEvents)
	m.Events = []string{"demo"}
	h := &sdk.FakeHost{Manifest: m}
	_ = h.Start(&sdk.Plugin{})
	fmt.Println(sdk.EmitJSON("demo", []byte(`[{"a":1},{"b":2}]`), false))
	fmt.Println(sdk.EmitJSON("demo", []byte(`[{"a":`), false))
	fmt.Println(h.SSE[0].Event, string(h.SSE[0].Data), len(h.SSE))
	// Output:
	// <nil>
	// sdk: event: invalid argument
	// demo [{"a":1},{"b":2}] 1
}

// A plugin can keep the power duty cycle awake while it works.
func ExampleHoldPower() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapPowerHold)}
	_ = h.Start(&sdk.Plugin{OnInit: func(sdk.Info) error { return sdk.HoldPower(true) }})
	fmt.Println(h.PowerHeld)
	_ = sdk.HoldPower(false)
	fmt.Println(h.PowerHeld)
	// Output:
	// true
	// false
}

// GPIO: drive outputs, watch inputs; a faulty pin answers ErrIO.
func ExampleGPIOWrite() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapGPIO),
		Pins: map[int]*sdk.FakePin{4: {}, 5: {Fault: true}, 12: {}}}
	_ = h.Start(&sdk.Plugin{
		OnInit: func(sdk.Info) error { return sdk.GPIOWatch(12, sdk.EdgeBoth) },
		OnGPIO: func(pin int, level bool) { fmt.Println("edge", pin, level) },
	})
	fmt.Println(sdk.GPIOWrite(4, true), h.Pins[4].Level)
	err := sdk.GPIOWrite(5, true)
	fmt.Println(err, errors.Is(err, sdk.ErrIO))
	_ = h.GPIOEdge(12, true)
	// Output:
	// <nil> true
	// sdk: gpio write: hardware fault true
	// edge 12 true
}

// CAN: send frames, receive those the filters pass.
func ExampleCANSend() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapCAN)}
	_ = h.Start(&sdk.Plugin{
		OnInit: func(sdk.Info) error { return sdk.CANReceive(sdk.CANFilter{ID: 0x100, Mask: 0x700}) },
		OnCAN:  func(f sdk.CANFrame) { fmt.Printf("got %#x % x\n", f.ID, f.Data) },
	})
	fmt.Println(sdk.CANSend(sdk.CANFrame{ID: 0x18eeff00, Extended: true, Data: []byte{1, 2}}))
	_ = h.CANReceive(sdk.CANFrame{ID: 0x123, Data: []byte{9}})
	_ = h.CANReceive(sdk.CANFrame{ID: 0x223, Data: []byte{8}})
	fmt.Printf("sent %#x\n", h.CANSent[0].ID)
	// Output:
	// <nil>
	// got 0x123 09
	// sent 0x18eeff00
}

// The frames of one batch share one reading of the clock.
func ExampleBatch() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapCAN, abi.CapClock)}
	var seen uint64
	reads := 0
	_ = h.Start(&sdk.Plugin{
		OnInit: func(sdk.Info) error { return sdk.CANReceive(sdk.CANFilter{}) },
		OnCAN: func(f sdk.CANFrame) {
			if b := sdk.Batch(); b != seen {
				seen = b
				_, _ = sdk.Now()
				reads++
			}
		},
	})
	frame := abi.AppendCANFrame(nil, sdk.CANFrame{ID: 0x100, Data: []byte{1}})
	_ = h.Deliver(abi.Event{Kind: abi.EvCAN, Data: frame}, abi.Event{Kind: abi.EvCAN, Data: frame})
	_ = h.Deliver(abi.Event{Kind: abi.EvCAN, Data: frame})
	fmt.Println(reads, "clock readings for 3 frames in 2 batches")
	// Output:
	// 2 clock readings for 3 frames in 2 batches
}

// BLE: scan for adverts, set an advertising payload.
func ExampleBLEScan() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapBLE)}
	_ = h.Start(&sdk.Plugin{
		OnInit: func(sdk.Info) error { return sdk.BLEScan(true) },
		OnBLE:  func(a sdk.BLEAdvert) { fmt.Println(a.Addr, a.RSSI, len(a.Data)) },
	})
	_ = h.BLEAdvert(sdk.BLEAdvert{Addr: "c4:7c:8d:6a:1b:2e", RSSI: -67, Data: []byte{2, 1, 6}})
	fmt.Println(sdk.BLEAdvertise(make([]byte, 32)))
	// Output:
	// c4:7c:8d:6a:1b:2e -67 3
	// sdk: ble advertise: limit exceeded
}

// A test drives a plugin through its whole life, stop included.
func ExampleFakeHost() {
	h := &sdk.FakeHost{Manifest: manifest(abi.CapLog, abi.CapTimer)}
	_ = h.Start(&sdk.Plugin{
		OnInit: func(sdk.Info) error { return sdk.SetTimer(1, time.Minute, 0) },
		OnStop: func() { _ = sdk.Log(sdk.LevelInfo, "bye") },
	})
	fmt.Println(len(h.Timers), h.Stop(), h.Logs, len(h.Timers))
	fmt.Println(sdk.Log(sdk.LevelInfo, "too late"))
	// Output:
	// 1 <nil> [INFO bye] 0
	// sdk: log: plugin stopped
}
