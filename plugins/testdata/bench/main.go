// Command bench is a test plugin for speed figures: every timer event publishes one number
// (bench.value = the timer id), so a batch of N timer events yields one sk_publish of N
// values; GET /bench/publish?n=N publishes N values within one call and answers {"n": N}.
package main

import (
	"strconv"

	"devhost/sdk"
)

func init() {
	sdk.Register(&sdk.Plugin{
		OnTimer: func(id uint32) { _ = sdk.Publish("bench.value", float64(id)) },
		OnHTTP: func(req *sdk.Request) sdk.Response {
			n, err := strconv.Atoi(req.Query().Get("n"))
			if err != nil || n < 0 || n > 100000 {
				return sdk.ErrorResponse(400, "validation")
			}
			for i := 0; i < n; i++ {
				if err := sdk.Publish("bench.value", float64(i)); err != nil {
					return sdk.ErrorResponse(500, "internal")
				}
			}
			return sdk.JSONResponse(200, map[string]int{"n": n})
		},
	})
}

func main() {}
