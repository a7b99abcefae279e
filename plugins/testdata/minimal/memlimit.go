//go:build memlimit

package main

import "runtime/debug"

func init() { debug.SetMemoryLimit(8 << 20) }
