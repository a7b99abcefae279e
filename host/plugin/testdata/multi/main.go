//go:build wasip1

// Command multi is the host's own test plugin, written against the ABI directly (no SDK) so
// the host is tested against the contract, not against one client of it. One module plays
// many parts, chosen by the plugin id in its manifest, so a test run builds it once:
//
//	trapinit  panics in dev_init
//	badinit   dev_init answers 7 (a malformed answer)
//	refused   registers its namespace without the config capability, logs the refusal at
//	          error level, as the SDK does, and answers dev_init 1
//	hog       allocates until memory runs out, in dev_init
//	spin*     loops forever when it receives an HTTP request
//	probe*    calls every host function once in dev_init and serves the results over HTTP
//	badns     registers a malformed namespace descriptor, then a foreign namespace
//	garbage   calls host functions with pointers outside its memory and malformed messages
//	periph    serves a GATT service and a portal path and uses the WiFi hand-off (ABI 1.2;
//	          see periph.go)
//	sleepy*   registers its namespace and asks to be dormant while level is 3 (ABI 1.4),
//	          again after every config event that leaves level at 3
//	napper*   asks to be dormant until the button is pressed (ABI 1.4) and stays awake once
//	          a press reaches it
//	anything else: a well-behaved plugin (see handle)
package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"unsafe"

	"devhost/abi"
	"devhost/abi/hostcall"
)

func main() {}

// call passes b to a (ptr, len) host function.
func call(f func(unsafe.Pointer, uint32) int32, b []byte) int32 { return f(hostcall.Mem(b)) }

// read fetches what a (ptr, cap) host function has, growing the buffer as the ABI says.
func read(f func(unsafe.Pointer, uint32) int32) ([]byte, int32) {
	buf := make([]byte, 256)
	for {
		n := f(hostcall.Mem(buf))
		if n < 0 {
			return nil, n
		}
		if int(n) <= len(buf) {
			return buf[:n], n
		}
		buf = make([]byte, n)
	}
}

// logAt logs s at level (0 debug to 3 error).
func logAt(level int32, s string) int32 {
	p, n := hostcall.Mem([]byte(s))
	return hostcall.Log(level, p, n)
}

func logf(s string) { logAt(1, s) }

var (
	id       string
	caps     map[string]bool
	lastCfg  string
	probes   = map[string]int32{}
	deferred uint32 // an inbound PUT answered deferred, completed at the next timer
	received int    // delta values received
	hoard    [][]byte
)

const descriptor = `{"namespace":"","version":1,"title":"Test plugin","keys":[
 {"name":"greeting","type":"string","default":"hello"},
 {"name":"rows","type":"string","default":"[]","x":{"format":"table","columns":["name","pin"]}},
 {"name":"level","type":"int","default":3,"min":0,"max":10}]}`

//go:wasmexport dev_init
func devInit() int32 {
	batch, _ := read(hostcall.EventRead)
	evs, err := abi.DecodeEvents(batch)
	if err != nil || len(evs) != 1 || evs[0].Kind != abi.EvInit {
		return 3
	}
	in, err := abi.UnmarshalInit(evs[0].Data)
	if err != nil {
		return 4
	}
	id = in.ID
	caps = map[string]bool{}
	for _, c := range in.Capabilities {
		caps[string(c)] = true
	}
	switch {
	case id == "trapinit":
		panic("trap in init")
	case id == "badinit":
		return 7
	case id == "refused":
		if rc := call(hostcall.NsRegister, []byte(descriptor)); rc != 0 {
			msg := "sdk: register namespace: " + abi.Errno(rc).Error()
			logAt(3, msg)
			return 1
		}
		return 0
	case id == "hog":
		for {
			b := make([]byte, 1<<20)
			for i := range b {
				b[i] = 1
			}
			hoard = append(hoard, b)
		}
	case strings.HasPrefix(id, "probe"):
		probe()
		return 0
	case id == "badns":
		logf("bad descriptor rc=" + strconv.Itoa(int(call(hostcall.NsRegister, []byte(`{"namespace":"","keys":[{"name":"x","type":"nonsense"}]}`)))))
		logf("foreign namespace rc=" + strconv.Itoa(int(call(hostcall.NsRegister, []byte(`{"namespace":"f_other","version":1,"title":"x","keys":[]}`)))))
		return 0
	case id == "periph":
		periphInit()
		return 0
	case strings.HasPrefix(id, "sleepy"):
		call(hostcall.NsRegister, []byte(descriptor))
		if v, n := read(hostcall.ConfigGet); n >= 0 {
			lastCfg = string(v)
		}
		logf("started " + id)
		logf("no condition rc=" + strconv.Itoa(int(call(hostcall.Dormant, []byte(`{}`)))))
		logf("unknown key rc=" + strconv.Itoa(int(call(hostcall.Dormant, []byte(`{"config":{"nope":1}}`)))))
		logf("button rc=" + strconv.Itoa(int(call(hostcall.Dormant, []byte(`{"button":true}`)))))
		logf("holds now rc=" + strconv.Itoa(int(call(hostcall.Dormant, []byte(`{"config":{"level":4}}`)))))
		if strings.Contains(lastCfg, `"level":3`) {
			sleep()
		}
		return 0
	case strings.HasPrefix(id, "napper"):
		logf("started " + id)
		logf("nap rc=" + strconv.Itoa(int(call(hostcall.Dormant, []byte(`{"button":true}`)))))
		return 0
	case id == "garbage":
		logf("outside rc=" + strconv.Itoa(int(hostcall.SKPublish(unsafe.Add(unsafe.Pointer(nil), 0x7ffffff0), 4096))))
		logf("malformed rc=" + strconv.Itoa(int(call(hostcall.SKPublish, []byte{1, 2, 3}))))
		logf("huge rc=" + strconv.Itoa(int(hostcall.Log(1, nil, 1<<30))))
		logf("badlevel rc=" + strconv.Itoa(int(logAt(9, "x"))))
		return 0
	}
	if caps["config"] {
		rc := call(hostcall.NsRegister, []byte(descriptor))
		logf("ns_register rc=" + strconv.Itoa(int(rc)))
		if rc == 0 {
			logf("second ns_register rc=" + strconv.Itoa(int(call(hostcall.NsRegister, []byte(descriptor)))))
		}
		if v, n := read(hostcall.ConfigGet); n >= 0 {
			lastCfg = string(v)
		}
	}
	if caps["signalk.subscribe"] {
		call(hostcall.SKSubscribe, abi.AppendStrings(nil, []string{"environment.*"}))
	}
	if caps["signalk.put"] {
		call(hostcall.SKPutHandle, abi.AppendStrings(nil, []string{"electrical.switches.*", "bench.publish"}))
	}
	if caps["health"] {
		call(hostcall.HealthReport, abi.AppendHealthReport(nil, abi.HealthReport{Name: "state", State: abi.HealthNormal, Message: "started"}))
	}
	if caps["gpio"] {
		hostcall.GPIOWatch(4, abi.EdgeBoth)
	}
	if caps["can"] {
		call(hostcall.CANFilter, abi.AppendCANFilters(nil, []abi.CANFilter{{ID: 0x100, Mask: 0x700}}))
	}
	logf("started " + id)
	return 0
}

// sleep asks to be dormant until level is not 3.
func sleep() {
	logf("dormant rc=" + strconv.Itoa(int(call(hostcall.Dormant, []byte(`{"config":{"level":3}}`)))))
}

// probe calls every host function once with a valid argument and records the answers.
func probe() {
	v := abi.AppendValues(nil, []abi.PathValue{{Path: "test.value", Value: abi.Number(1)}})
	probes["log"] = logAt(1, "probe")
	probes["ns_register"] = call(hostcall.NsRegister, []byte(descriptor))
	_, probes["config_get"] = read(hostcall.ConfigGet)
	probes["sk_publish"] = call(hostcall.SKPublish, v)
	probes["sk_publish_ctx"] = call(hostcall.SKPublishCtx, abi.AppendValues(abi.AppendContextValues(nil, "vessels.urn:mrn:imo:mmsi:230123456"),
		[]abi.PathValue{{Path: "test.value", Value: abi.Number(3)}, {Value: abi.JSON([]byte(`{"name":"PROBE"}`))}}))
	probes["sk_meta"] = call(hostcall.SKMeta, abi.AppendMeta(nil, []abi.Meta{{Path: "test.value", JSON: []byte(`{"units":"m"}`)}}))
	probes["sk_subscribe"] = call(hostcall.SKSubscribe, abi.AppendStrings(nil, []string{"test.*"}))
	probes["sk_unsubscribe"] = call(hostcall.SKUnsubscribe, abi.AppendStrings(nil, []string{"test.*"}))
	probes["sk_put_handle"] = call(hostcall.SKPutHandle, abi.AppendStrings(nil, []string{"test.put"}))
	probes["sk_put_reply"] = call(hostcall.SKPutReply, abi.AppendPutReply(nil, abi.PutReply{ID: 99}))
	probes["sk_put_send"] = call(hostcall.SKPutSend, abi.AppendPutSend(nil, "test.value", abi.Number(2)))
	probes["health_report"] = call(hostcall.HealthReport, abi.AppendHealthReport(nil, abi.HealthReport{Name: "probe", State: abi.HealthWarn, Message: "probing"}))
	probes["health_reboot"] = call(hostcall.HealthReport, abi.AppendHealthReport(nil, abi.HealthReport{Name: "probe", State: abi.HealthAlarm, Reboot: true}))
	probes["timer_set"] = hostcall.TimerSet(1, 1000, 0)
	probes["timer_cancel"] = hostcall.TimerCancel(1)
	probes["power_hold"] = hostcall.PowerHold(1)
	_, probes["clock_now"] = read(hostcall.ClockNow)
	probes["http_reply"] = call(hostcall.HTTPReply, abi.AppendHTTPResponse(nil, abi.HTTPResponse{ID: 12345, Status: 200}))
	probes["sse_publish"] = call(hostcall.SSEPublish, abi.AppendSSEEvent(nil, abi.SSEEvent{Event: id, Retain: true, Data: []byte(`{"probe":true}`)}))
	probes["gpio_read"] = hostcall.GPIORead(1)
	probes["gpio_write"] = hostcall.GPIOWrite(2, 1)
	probes["gpio_watch"] = hostcall.GPIOWatch(3, abi.EdgeBoth)
	probes["can_send"] = call(hostcall.CANSend, abi.AppendCANFrame(nil, abi.CANFrame{ID: 0x123, Data: []byte{1, 2}}))
	probes["can_filter"] = call(hostcall.CANFilter, abi.AppendCANFilters(nil, []abi.CANFilter{{ID: 0, Mask: 0}}))
	probes["ble_scan"] = hostcall.BLEScan(1)
	probes["ble_advertise"] = call(hostcall.BLEAdvertise, []byte{2, 1, 6})
	probes["mdns_service"] = call(hostcall.MDNSService, abi.AppendMDNSService(nil, abi.MDNSService{Instance: id, Type: "_probe", Proto: "_tcp", Port: 8080, TXT: []string{"v=1"}}))
	// A receive-only UDP socket on a free port, left open for the stop to close.
	probes["net_open"] = call(hostcall.NetOpen, abi.AppendNetOpen(nil, abi.NetOpen{Proto: abi.NetUDP}))
	probes["net_send"] = call(hostcall.NetSend, abi.AppendNetData(nil, abi.NetData{ID: 1, Data: []byte("x")}))
	probes["net_close"] = hostcall.NetClose(99)
}

//go:wasmexport dev_event
func devEvent() int32 {
	batch, n := read(hostcall.EventRead)
	if n < 0 {
		return 2
	}
	evs, err := abi.DecodeEvents(batch)
	if err != nil {
		return 3
	}
	for _, e := range evs {
		handle(e)
	}
	return 0
}

func handle(e abi.Event) {
	switch e.Kind {
	case abi.EvConfig:
		lastCfg = string(e.Data)
		logf("config " + lastCfg)
		if strings.HasPrefix(id, "sleepy") && strings.Contains(lastCfg, `"level":3`) {
			sleep()
		}
	case abi.EvDelta:
		vs, err := abi.DecodeValues(e.Data, 0)
		if err == nil {
			received += len(vs)
		}
	case abi.EvPut:
		p, err := abi.DecodePutRequest(e.Data)
		if err != nil {
			return
		}
		reply := abi.PutReply{ID: p.ID, Result: abi.PutSuccess}
		switch {
		case p.Path == "bench.publish":
			publishBench(p.Value)
		case strings.Contains(p.Path, "fault"):
			reply.Result, reply.Message = abi.PutFailure, "pin fault"
		case strings.Contains(p.Path, "later"):
			reply.Result = abi.PutDeferred
			deferred = p.ID
			hostcall.TimerSet(7, 100, 0)
		case p.Value.Kind != abi.KindBool:
			reply.Result, reply.Message = abi.PutInvalid, "want a bool"
		default:
			call(hostcall.SKPublish, abi.AppendValues(nil, []abi.PathValue{{Path: p.Path, Value: p.Value}}))
		}
		call(hostcall.SKPutReply, abi.AppendPutReply(nil, reply))
	case abi.EvTimer:
		if deferred != 0 {
			call(hostcall.SKPutReply, abi.AppendPutReply(nil, abi.PutReply{ID: deferred, Result: abi.PutSuccess, Message: "done later"}))
			deferred = 0
		}
	case abi.EvHTTP:
		h, err := abi.DecodeHTTPRequest(e.Data)
		if err != nil {
			return
		}
		serveHTTP(h)
	case abi.EvGPIO:
		g, err := abi.DecodeGPIOEdge(e.Data)
		if err == nil {
			hostcall.GPIOWrite(int32(g.Pin)+1, int32(g.Level))
		}
	case abi.EvCAN:
		f, err := abi.DecodeCANFrame(e.Data)
		if err == nil {
			f.ID++
			call(hostcall.CANSend, abi.AppendCANFrame(nil, f))
		}
	case abi.EvButton:
		if strings.HasPrefix(id, "napper") {
			logf("napper pressed rc=" + strconv.Itoa(int(call(hostcall.Dormant, nil))))
			return
		}
		periphEvent(e)
	case abi.EvGATT, abi.EvPortal, abi.EvWiFi:
		periphEvent(e)
	case abi.EvStop:
		logf("stopping " + id)
		call(hostcall.HealthReport, abi.AppendHealthReport(nil, abi.HealthReport{Name: "state", State: abi.HealthNormal, Message: "stopped"}))
	}
}

// publishBench publishes n values, in one call or one call each ({"n":100,"batch":true}).
func publishBench(v abi.Value) {
	var req struct {
		N     int  `json:"n"`
		Batch bool `json:"batch"`
	}
	if json.Unmarshal([]byte(v.Str), &req) != nil {
		return
	}
	vals := make([]abi.PathValue, req.N)
	for i := range vals {
		vals[i] = abi.PathValue{Path: "bench.value" + strconv.Itoa(i%10), Value: abi.Number(float64(i))}
	}
	if req.Batch {
		call(hostcall.SKPublish, abi.AppendValues(nil, vals))
		return
	}
	for _, pv := range vals {
		call(hostcall.SKPublish, abi.AppendValue(nil, pv.Path, pv.Value))
	}
}

func serveHTTP(h abi.HTTPRequest) {
	if strings.HasPrefix(id, "spin") {
		for {
		}
	}
	var body []byte
	switch {
	case strings.HasSuffix(h.Path, "/panic"):
		panic("trap in a request")
	case strings.HasSuffix(h.Path, "/noreply"):
		return
	case strings.HasPrefix(id, "probe"):
		body, _ = json.Marshal(probes)
	default:
		body, _ = json.Marshal(map[string]any{"id": id, "method": h.Method, "route": h.Route, "path": h.Path,
			"query": h.Query, "body": string(h.Body), "config": lastCfg, "received": received})
	}
	call(hostcall.HTTPReply, abi.AppendHTTPResponse(nil, abi.HTTPResponse{ID: h.ID, Status: 200, Body: body}))
}
