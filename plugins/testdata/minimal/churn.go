//go:build churn

package main

import "devhost/sdk"

// sink keeps the last block, so the compiler cannot drop the allocations.
var sink []byte

func init() {
	onInit = append(onInit, func(sdk.Info) error {
		for i := range 64 {
			b := make([]byte, 256<<10)
			for j := 0; j < len(b); j += 4096 {
				b[j] = byte(i)
			}
			sink = b
		}
		return nil
	})
}
