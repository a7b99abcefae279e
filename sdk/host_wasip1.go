//go:build wasip1

package sdk

import (
	"unsafe"

	"devhost/abi"
)

func ptr(b []byte) (unsafe.Pointer, uint32) {
	return unsafe.Pointer(unsafe.SliceData(b)), uint32(len(b))
}

func callEventRead(buf []byte) int32 { p, n := ptr(buf); return hEventRead(p, n) }

func callLog(level int32, msg []byte) int32 { p, n := ptr(msg); return hLog(level, p, n) }

func callIn(fn string, in []byte) int32 {
	p, n := ptr(in)
	switch fn {
	case abi.FnSKPublish:
		return hSKPublish(p, n)
	case abi.FnSKPutReply:
		return hSKPutReply(p, n)
	case abi.FnNsRegister:
		return hNsRegister(p, n)
	case abi.FnSKMeta:
		return hSKMeta(p, n)
	case abi.FnSKSubscribe:
		return hSKSubscribe(p, n)
	case abi.FnSKUnsub:
		return hSKUnsubscribe(p, n)
	case abi.FnSKPutHandle:
		return hSKPutHandle(p, n)
	case abi.FnSKPutSend:
		return hSKPutSend(p, n)
	case abi.FnHealthReport:
		return hHealthReport(p, n)
	case abi.FnHTTPReply:
		return hHTTPReply(p, n)
	case abi.FnSSEPublish:
		return hSSEPublish(p, n)
	case abi.FnCANSend:
		return hCANSend(p, n)
	case abi.FnCANFilter:
		return hCANFilter(p, n)
	case abi.FnBLEAdvertise:
		return hBLEAdvertise(p, n)
	case abi.FnMDNSService:
		return hMDNSService(p, n)
	case abi.FnNetOpen:
		return hNetOpen(p, n)
	case abi.FnNetSend:
		return hNetSend(p, n)
	case abi.FnDormant:
		return hDormant(p, n)
	}
	if f := periphIn[fn]; f != nil {
		return f(p, n)
	}
	return int32(abi.ErrInternal)
}

func callOut(fn string, out []byte) int32 {
	p, n := ptr(out)
	switch fn {
	case abi.FnConfigGet:
		return hConfigGet(p, n)
	case abi.FnClockNow:
		return hClockNow(p, n)
	}
	if f := periphOut[fn]; f != nil {
		return f(p, n)
	}
	return int32(abi.ErrInternal)
}

func callTimerSet(id int32, delayMs, periodMs int64) int32 { return hTimerSet(id, delayMs, periodMs) }

func callArgs(fn string, a, b int32) int32 {
	switch fn {
	case abi.FnTimerCancel:
		return hTimerCancel(a)
	case abi.FnPowerHold:
		return hPowerHold(a)
	case abi.FnPowerSleep:
		return hPowerSleep(a)
	case abi.FnGPIORead:
		return hGPIORead(a)
	case abi.FnGPIOWrite:
		return hGPIOWrite(a, b)
	case abi.FnGPIOWatch:
		return hGPIOWatch(a, b)
	case abi.FnBLEScan:
		return hBLEScan(a)
	case abi.FnNetClose:
		return hNetClose(a)
	}
	if f := periphArgs[fn]; f != nil {
		return f(a)
	}
	return int32(abi.ErrInternal)
}

// The functions of ABI minor 2 by name: (ptr, len) inputs, (ptr, cap) outputs, one i32.
var (
	periphIn = map[string]func(unsafe.Pointer, uint32) int32{
		abi.FnGATTServe: hGATTServe, abi.FnGATTReply: hGATTReply, abi.FnGATTNotify: hGATTNotify,
		abi.FnBLEScanResponse: hBLEScanResponse, abi.FnPortalServe: hPortalServe, abi.FnPortalReply: hPortalReply,
		abi.FnWiFiProvision: hWifiProvision,
	}
	periphOut  = map[string]func(unsafe.Pointer, uint32) int32{abi.FnWiFiStatus: hWifiStatus, abi.FnWiFiScan: hWifiScan, abi.FnProvPoP: hProvPop}
	periphArgs = map[string]func(int32) int32{abi.FnWiFiWatch: hWifiWatch, abi.FnPortalHold: hPortalHold, abi.FnButtonWatch: hButtonWatch}
)

//go:wasmexport dev_init
func devInit() int32 { return dispatch(true) }

//go:wasmexport dev_event
func devEvent() int32 { return dispatch(false) }
