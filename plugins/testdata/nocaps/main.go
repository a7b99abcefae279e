//go:build wasip1

// Command nocaps is a test plugin that calls every host function; install it with only the
// log capability granted (its manifest asks for everything). Each call but event_read and
// log must answer permission denied (-1) and be counted by the host. At start it logs the
// answers as lines "nocaps: <fn>=<rc> <fn>=<rc> ..." (functions sorted by name, lines under
// 256 bytes) and answers dev_init 0.
package main

import (
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"devhost/abi"
)

//go:wasmimport extism:host/user event_read
func eventRead(ptr, cap uint32) int32

//go:wasmimport extism:host/user log
func hlog(level int32, ptr, n uint32) int32

//go:wasmimport extism:host/user ns_register
func nsRegister(ptr, n uint32) int32

//go:wasmimport extism:host/user config_get
func configGet(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_publish
func skPublish(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_meta
func skMeta(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_subscribe
func skSubscribe(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_unsubscribe
func skUnsubscribe(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_put_handle
func skPutHandle(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_put_reply
func skPutReply(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_put_send
func skPutSend(ptr, n uint32) int32

//go:wasmimport extism:host/user health_report
func healthReport(ptr, n uint32) int32

//go:wasmimport extism:host/user timer_set
func timerSet(id int32, delay, period int64) int32

//go:wasmimport extism:host/user timer_cancel
func timerCancel(id int32) int32

//go:wasmimport extism:host/user power_hold
func powerHold(on int32) int32

//go:wasmimport extism:host/user power_sleep
func powerSleep(reserved int32) int32

//go:wasmimport extism:host/user clock_now
func clockNow(ptr, n uint32) int32

//go:wasmimport extism:host/user http_reply
func httpReply(ptr, n uint32) int32

//go:wasmimport extism:host/user sse_publish
func ssePublish(ptr, n uint32) int32

//go:wasmimport extism:host/user gpio_read
func gpioRead(pin int32) int32

//go:wasmimport extism:host/user gpio_write
func gpioWrite(pin, level int32) int32

//go:wasmimport extism:host/user gpio_watch
func gpioWatch(pin, edges int32) int32

//go:wasmimport extism:host/user can_send
func canSend(ptr, n uint32) int32

//go:wasmimport extism:host/user can_filter
func canFilter(ptr, n uint32) int32

//go:wasmimport extism:host/user ble_scan
func bleScan(on int32) int32

//go:wasmimport extism:host/user ble_advertise
func bleAdvertise(ptr, n uint32) int32

//go:wasmimport extism:host/user mdns_service
func mdnsService(ptr, n uint32) int32

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

func in(fn func(ptr, n uint32) int32, b []byte) func() int32 {
	return func() int32 { return fn(addr(b), uint32(len(b))) }
}

//go:wasmexport dev_init
func devInit() int32 {
	buf := make([]byte, 4096)
	values := abi.AppendValue(nil, "nocaps.value", abi.Number(1))
	calls := map[string]func() int32{
		abi.FnEventRead:    func() int32 { return eventRead(addr(buf), uint32(len(buf))) },
		abi.FnNsRegister:   in(nsRegister, []byte(`{"version":1,"title":"No caps","keys":[]}`)),
		abi.FnConfigGet:    in(configGet, buf),
		abi.FnSKPublish:    in(skPublish, values),
		abi.FnSKMeta:       in(skMeta, abi.AppendMeta(nil, []abi.Meta{{Path: "nocaps.value", JSON: []byte(`{"units":"m"}`)}})),
		abi.FnSKSubscribe:  in(skSubscribe, abi.AppendStrings(nil, []string{"*"})),
		abi.FnSKUnsub:      in(skUnsubscribe, abi.AppendStrings(nil, []string{"*"})),
		abi.FnSKPutHandle:  in(skPutHandle, abi.AppendStrings(nil, []string{"nocaps.*"})),
		abi.FnSKPutReply:   in(skPutReply, abi.AppendPutReply(nil, abi.PutReply{ID: 1})),
		abi.FnSKPutSend:    in(skPutSend, values),
		abi.FnHealthReport: in(healthReport, abi.AppendHealthReport(nil, abi.HealthReport{Name: "x", State: abi.HealthWarn})),
		abi.FnTimerSet:     func() int32 { return timerSet(1, 10, 0) },
		abi.FnTimerCancel:  func() int32 { return timerCancel(1) },
		abi.FnPowerHold:    func() int32 { return powerHold(1) },
		abi.FnPowerSleep:   func() int32 { return powerSleep(0) },
		abi.FnClockNow:     in(clockNow, buf),
		abi.FnHTTPReply:    in(httpReply, abi.AppendHTTPResponse(nil, abi.HTTPResponse{ID: 1, Status: 200})),
		abi.FnSSEPublish:   in(ssePublish, abi.AppendSSEEvent(nil, abi.SSEEvent{Event: "nocaps", Data: []byte("{}")})),
		abi.FnGPIORead:     func() int32 { return gpioRead(1) },
		abi.FnGPIOWrite:    func() int32 { return gpioWrite(1, 1) },
		abi.FnGPIOWatch:    func() int32 { return gpioWatch(1, 3) },
		abi.FnCANSend:      in(canSend, abi.AppendCANFrame(nil, abi.CANFrame{ID: 1})),
		abi.FnCANFilter:    in(canFilter, nil),
		abi.FnBLEScan:      func() int32 { return bleScan(1) },
		abi.FnBLEAdvertise: in(bleAdvertise, []byte{2, 1, 6}),
		abi.FnMDNSService:  in(mdnsService, abi.AppendMDNSService(nil, abi.MDNSService{Type: "_nocaps", Proto: "_tcp", Port: 1})),
	}
	names := make([]string, 0, len(calls))
	for n := range calls {
		names = append(names, n)
	}
	sort.Strings(names)
	// Lines stay under the 256-byte log line limit.
	var line strings.Builder
	flush := func() {
		b := []byte("nocaps:" + line.String())
		hlog(1, addr(b), uint32(len(b)))
		line.Reset()
	}
	for _, n := range names {
		item := " " + n + "=" + strconv.Itoa(int(calls[n]()))
		if line.Len()+len(item) > 200 {
			flush()
		}
		line.WriteString(item)
	}
	flush()
	return 0
}

//go:wasmexport dev_event
func devEvent() int32 { return 0 }

func main() {}
