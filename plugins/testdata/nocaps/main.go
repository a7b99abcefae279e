//go:build wasip1

// Command nocaps is a test plugin that calls every host function of abi.Signatures, a new one
// included without a change here; install it with only the log capability granted (its
// manifest asks for everything). Each call but event_read and log must answer permission
// denied (-1) and be counted by the host: the host checks the grant before it reads any
// argument, so every function gets the same 4 KiB buffer and 1 for each number. At start it
// logs the answers as lines "nocaps: <fn>=<rc> <fn>=<rc> ..." (functions sorted by name, lines
// under 256 bytes; log itself, which writes them, is left out) and answers dev_init 0.
package main

import (
	"sort"
	"strconv"
	"strings"

	"devhost/abi"
	"devhost/abi/hostcall"
)

func logLine(s string) {
	p, n := hostcall.Mem([]byte(s))
	hostcall.Log(1, p, n)
}

//go:wasmexport dev_init
func devInit() int32 {
	names := make([]string, 0, len(abi.Signatures))
	for name := range abi.Signatures {
		if name != abi.FnLog {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	p, n := hostcall.Mem(make([]byte, 4096))
	// Lines stay under the 256-byte log line limit.
	var line strings.Builder
	for _, name := range names {
		item := " " + name + "=" + strconv.Itoa(int(hostcall.Call(name, p, n, 1, 1, 1)))
		if line.Len()+len(item) > 200 {
			logLine("nocaps:" + line.String())
			line.Reset()
		}
		line.WriteString(item)
	}
	logLine("nocaps:" + line.String())
	return 0
}

//go:wasmexport dev_event
func devEvent() int32 { return 0 }

func main() {}
