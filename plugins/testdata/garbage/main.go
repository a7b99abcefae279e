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

	"devhost/plugins/testdata/internal/hostcall"
)

var junk = []byte("\xff\xff\xff\x7fgarbage\x00\x01\x02{not json")

func logLine(s string) {
	b := []byte(s)
	hostcall.Log(2, hostcall.Addr(b), uint32(len(b)))
}

func spray() {
	fns := []struct {
		name string
		fn   func(ptr, n uint32) int32
	}{
		{"ns_register", hostcall.NsRegister}, {"sk_publish", hostcall.SKPublish},
		{"sk_meta", hostcall.SKMeta}, {"sk_put_reply", hostcall.SKPutReply},
		{"http_reply", hostcall.HTTPReply}, {"health_report", hostcall.HealthReport},
		{"sse_publish", hostcall.SSEPublish},
	}
	for _, f := range fns {
		a := f.fn(hostcall.Addr(junk), uint32(len(junk)))
		b := f.fn(0xfffffff0, 64)
		c := f.fn(hostcall.Addr(junk), 1<<30)
		logLine("garbage: " + f.name + " " + strconv.Itoa(int(a)) + " " + strconv.Itoa(int(b)) + " " + strconv.Itoa(int(c)))
	}
	// An output buffer outside memory: nothing may be written.
	logLine("garbage: event_read " + strconv.Itoa(int(hostcall.EventRead(0xfffffff0, 1<<20))))
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
