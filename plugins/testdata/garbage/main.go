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
)

//go:wasmimport extism:host/user event_read
func eventRead(ptr, cap uint32) int32

//go:wasmimport extism:host/user log
func hlog(level int32, ptr, n uint32) int32

//go:wasmimport extism:host/user ns_register
func nsRegister(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_publish
func skPublish(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_meta
func skMeta(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_put_reply
func skPutReply(ptr, n uint32) int32

//go:wasmimport extism:host/user http_reply
func httpReply(ptr, n uint32) int32

//go:wasmimport extism:host/user health_report
func healthReport(ptr, n uint32) int32

//go:wasmimport extism:host/user sse_publish
func ssePublish(ptr, n uint32) int32

var junk = []byte("\xff\xff\xff\x7fgarbage\x00\x01\x02{not json")

func addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

func logLine(s string) {
	b := []byte(s)
	hlog(2, addr(b), uint32(len(b)))
}

func spray() {
	fns := []struct {
		name string
		fn   func(ptr, n uint32) int32
	}{
		{"ns_register", nsRegister}, {"sk_publish", skPublish}, {"sk_meta", skMeta},
		{"sk_put_reply", skPutReply}, {"http_reply", httpReply}, {"health_report", healthReport},
		{"sse_publish", ssePublish},
	}
	for _, f := range fns {
		a := f.fn(addr(junk), uint32(len(junk)))
		b := f.fn(0xfffffff0, 64)
		c := f.fn(addr(junk), 1<<30)
		logLine("garbage: " + f.name + " " + strconv.Itoa(int(a)) + " " + strconv.Itoa(int(b)) + " " + strconv.Itoa(int(c)))
	}
	// An output buffer outside memory: nothing may be written.
	logLine("garbage: event_read " + strconv.Itoa(int(eventRead(0xfffffff0, 1<<20))))
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
