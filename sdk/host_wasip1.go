//go:build wasip1

package sdk

import (
	"unsafe"

	"devhost/abi"
)

// The host functions, imported from abi.Module ("extism:host/user"). Pointers are addresses
// in this module's linear memory; the host reads and writes there directly.

//go:wasmimport extism:host/user event_read
func hEventRead(ptr unsafe.Pointer, cap uint32) int32

//go:wasmimport extism:host/user log
func hLog(level int32, ptr unsafe.Pointer, n uint32) int32

//go:wasmimport extism:host/user ns_register
func hNsRegister(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport extism:host/user config_get
func hConfigGet(ptr unsafe.Pointer, cap uint32) int32

//go:wasmimport extism:host/user sk_publish
func hSKPublish(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport extism:host/user sk_meta
func hSKMeta(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport extism:host/user sk_subscribe
func hSKSubscribe(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport extism:host/user sk_unsubscribe
func hSKUnsubscribe(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport extism:host/user sk_put_handle
func hSKPutHandle(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport extism:host/user sk_put_reply
func hSKPutReply(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport extism:host/user sk_put_send
func hSKPutSend(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport extism:host/user health_report
func hHealthReport(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport extism:host/user timer_set
func hTimerSet(id int32, delayMs, periodMs int64) int32

//go:wasmimport extism:host/user timer_cancel
func hTimerCancel(id int32) int32

//go:wasmimport extism:host/user power_hold
func hPowerHold(on int32) int32

//go:wasmimport extism:host/user power_sleep
func hPowerSleep(reserved int32) int32

//go:wasmimport extism:host/user clock_now
func hClockNow(ptr unsafe.Pointer, cap uint32) int32

//go:wasmimport extism:host/user http_reply
func hHTTPReply(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport extism:host/user sse_publish
func hSSEPublish(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport extism:host/user gpio_read
func hGPIORead(pin int32) int32

//go:wasmimport extism:host/user gpio_write
func hGPIOWrite(pin, level int32) int32

//go:wasmimport extism:host/user gpio_watch
func hGPIOWatch(pin, edges int32) int32

//go:wasmimport extism:host/user can_send
func hCANSend(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport extism:host/user can_filter
func hCANFilter(ptr unsafe.Pointer, n uint32) int32

//go:wasmimport extism:host/user ble_scan
func hBLEScan(on int32) int32

//go:wasmimport extism:host/user ble_advertise
func hBLEAdvertise(ptr unsafe.Pointer, n uint32) int32

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
	}
	return int32(abi.ErrInternal)
}

//go:wasmexport dev_init
func devInit() int32 { return dispatch(true) }

//go:wasmexport dev_event
func devEvent() int32 { return dispatch(false) }
