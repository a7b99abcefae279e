//go:build wasip1

package sdk

import (
	"devhost/abi"
	"devhost/abi/hostcall"
)

// Inside the device the host functions are the module's imports, reached by their ABI names.

func callEventRead(buf []byte) int32 { return callIn(abi.FnEventRead, buf) }

func callLog(level int32, msg []byte) int32 {
	p, n := hostcall.Mem(msg)
	return hostcall.Log(level, p, n)
}

func callIn(fn string, in []byte) int32 { p, n := hostcall.Mem(in); return hostcall.Call(fn, p, n) }

// An output buffer is passed as an input is: the function tells the host which it is.
func callOut(fn string, out []byte) int32 { return callIn(fn, out) }

func callTimerSet(id int32, delayMs, periodMs int64) int32 {
	return hostcall.TimerSet(id, delayMs, periodMs)
}

func callArgs(fn string, a, b int32) int32 { return hostcall.Call(fn, nil, 0, int64(a), int64(b)) }

//go:wasmexport dev_init
func devInit() int32 { return dispatch(true) }

//go:wasmexport dev_event
func devEvent() int32 { return dispatch(false) }
