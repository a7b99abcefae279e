//go:build wasip1

// Command garbage is a test plugin that gives the host garbage: every input host function
// gets malformed bytes, a pointer outside the module's memory and an oversized length, and
// dev_event answers 7. The host must answer each call invalid argument (-2) or limit
// exceeded (-4), never act on it, keep the instance (dev_init answers 0), count dev_event's
// non-zero answer as an error, and keep answering HTTP. The answers it got are logged in
// one line per call, "garbage: <fn> <rc> <rc> <rc>" (malformed, out of memory, oversized).
package main

import (
	"strconv"
	"unsafe"

	"devhost/abi"
	"devhost/abi/hostcall"
)

var junk = []byte("\xff\xff\xff\x7fgarbage\x00\x01\x02{not json")

// outside is an address beyond the module's memory.
var outside = unsafe.Add(unsafe.Pointer(nil), 0xfffffff0)

func logLine(s string) {
	p, n := hostcall.Mem([]byte(s))
	hostcall.Log(2, p, n)
}

func spray() {
	for _, fn := range []string{abi.FnNsRegister, abi.FnSKPublish, abi.FnSKMeta, abi.FnSKPutReply,
		abi.FnHTTPReply, abi.FnHealthReport, abi.FnSSEPublish} {
		p, n := hostcall.Mem(junk)
		a := hostcall.Call(fn, p, n)
		b := hostcall.Call(fn, outside, 64)
		c := hostcall.Call(fn, p, 1<<30)
		logLine("garbage: " + fn + " " + strconv.Itoa(int(a)) + " " + strconv.Itoa(int(b)) + " " + strconv.Itoa(int(c)))
	}
	// An output buffer outside memory: nothing may be written.
	logLine("garbage: event_read " + strconv.Itoa(int(hostcall.EventRead(outside, 1<<20))))
}

//go:wasmexport dev_init
func devInit() int32 {
	spray()
	return 0
}

//go:wasmexport dev_event
func devEvent() int32 {
	spray()
	return 7
}

func main() {}
