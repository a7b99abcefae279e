//go:build !wasip1

package sdk

import "devhost/abi"

// Outside the device the host functions go to the running FakeHost (none: ErrStopped).

func callEventRead(buf []byte) int32 {
	if current == nil {
		return int32(abi.ErrStopped)
	}
	return current.eventRead(buf)
}

func callLog(level int32, msg []byte) int32 {
	if current == nil {
		return int32(abi.ErrStopped)
	}
	return current.log(level, msg)
}

func callIn(fn string, in []byte) int32 {
	if current == nil {
		return int32(abi.ErrStopped)
	}
	return current.in(fn, in)
}

func callOut(fn string, out []byte) int32 {
	if current == nil {
		return int32(abi.ErrStopped)
	}
	return current.out(fn, out)
}

func callTimerSet(id int32, delayMs, periodMs int64) int32 {
	if current == nil {
		return int32(abi.ErrStopped)
	}
	return current.timerSet(id, delayMs, periodMs)
}

func callArgs(fn string, a, b int32) int32 {
	if current == nil {
		return int32(abi.ErrStopped)
	}
	return current.args(fn, a, b)
}
