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

	"devhost/abi"
	"devhost/plugins/testdata/internal/hostcall"
)

func in(fn func(ptr, n uint32) int32, b []byte) func() int32 {
	return func() int32 { return fn(hostcall.Addr(b), uint32(len(b))) }
}

//go:wasmexport dev_init
func devInit() int32 {
	buf := make([]byte, 4096)
	values := abi.AppendValue(nil, "nocaps.value", abi.Number(1))
	calls := map[string]func() int32{
		abi.FnEventRead:       func() int32 { return hostcall.EventRead(hostcall.Addr(buf), uint32(len(buf))) },
		abi.FnNsRegister:      in(hostcall.NsRegister, []byte(`{"version":1,"title":"No caps","keys":[]}`)),
		abi.FnConfigGet:       in(hostcall.ConfigGet, buf),
		abi.FnSKPublish:       in(hostcall.SKPublish, values),
		abi.FnSKPublishCtx:    in(hostcall.SKPublishCtx, abi.AppendValue(abi.AppendContextValues(nil, "vessels.urn:mrn:imo:mmsi:230123456"), "nocaps.value", abi.Number(1))),
		abi.FnSKMeta:          in(hostcall.SKMeta, abi.AppendMeta(nil, []abi.Meta{{Path: "nocaps.value", JSON: []byte(`{"units":"m"}`)}})),
		abi.FnSKSubscribe:     in(hostcall.SKSubscribe, abi.AppendStrings(nil, []string{"*"})),
		abi.FnSKUnsub:         in(hostcall.SKUnsubscribe, abi.AppendStrings(nil, []string{"*"})),
		abi.FnSKPutHandle:     in(hostcall.SKPutHandle, abi.AppendStrings(nil, []string{"nocaps.*"})),
		abi.FnSKPutReply:      in(hostcall.SKPutReply, abi.AppendPutReply(nil, abi.PutReply{ID: 1})),
		abi.FnSKPutSend:       in(hostcall.SKPutSend, values),
		abi.FnHealthReport:    in(hostcall.HealthReport, abi.AppendHealthReport(nil, abi.HealthReport{Name: "x", State: abi.HealthWarn})),
		abi.FnTimerSet:        func() int32 { return hostcall.TimerSet(1, 10, 0) },
		abi.FnTimerCancel:     func() int32 { return hostcall.TimerCancel(1) },
		abi.FnPowerHold:       func() int32 { return hostcall.PowerHold(1) },
		abi.FnPowerSleep:      func() int32 { return hostcall.PowerSleep(0) },
		abi.FnClockNow:        in(hostcall.ClockNow, buf),
		abi.FnHTTPReply:       in(hostcall.HTTPReply, abi.AppendHTTPResponse(nil, abi.HTTPResponse{ID: 1, Status: 200})),
		abi.FnSSEPublish:      in(hostcall.SSEPublish, abi.AppendSSEEvent(nil, abi.SSEEvent{Event: "nocaps", Data: []byte("{}")})),
		abi.FnGPIORead:        func() int32 { return hostcall.GPIORead(1) },
		abi.FnGPIOWrite:       func() int32 { return hostcall.GPIOWrite(1, 1) },
		abi.FnGPIOWatch:       func() int32 { return hostcall.GPIOWatch(1, 3) },
		abi.FnCANSend:         in(hostcall.CANSend, abi.AppendCANFrame(nil, abi.CANFrame{ID: 1})),
		abi.FnCANFilter:       in(hostcall.CANFilter, nil),
		abi.FnBLEScan:         func() int32 { return hostcall.BLEScan(1) },
		abi.FnBLEAdvertise:    in(hostcall.BLEAdvertise, []byte{2, 1, 6}),
		abi.FnMDNSService:     in(hostcall.MDNSService, abi.AppendMDNSService(nil, abi.MDNSService{Type: "_nocaps", Proto: "_tcp", Port: 1})),
		abi.FnNetOpen:         in(hostcall.NetOpen, buf[:64]),
		abi.FnNetSend:         in(hostcall.NetSend, buf[:64]),
		abi.FnNetClose:        func() int32 { return hostcall.NetClose(1) },
		abi.FnGATTServe:       in(hostcall.GATTServe, buf[:64]),
		abi.FnGATTReply:       in(hostcall.GATTReply, buf[:64]),
		abi.FnGATTNotify:      in(hostcall.GATTNotify, buf[:64]),
		abi.FnBLEScanResponse: in(hostcall.BLEScanResponse, buf[:64]),
		abi.FnPortalServe:     in(hostcall.PortalServe, buf[:64]),
		abi.FnPortalReply:     in(hostcall.PortalReply, buf[:64]),
		abi.FnWiFiProvision:   in(hostcall.WiFiProvision, buf[:64]),
		abi.FnWiFiStatus:      in(hostcall.WiFiStatus, buf[:64]),
		abi.FnWiFiWatch:       func() int32 { return hostcall.WiFiWatch(1) },
		abi.FnWiFiScan:        in(hostcall.WiFiScan, buf[:64]),
		abi.FnPortalHold:      func() int32 { return hostcall.PortalHold(1) },
		abi.FnProvPoP:         in(hostcall.ProvPoP, buf[:64]),
		abi.FnButtonWatch:     func() int32 { return hostcall.ButtonWatch(1) },
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
		hostcall.Log(1, hostcall.Addr(b), uint32(len(b)))
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
