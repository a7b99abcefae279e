//go:build lowgc

package main

import "runtime/debug"

func init() { debug.SetGCPercent(25) }
