// Command bench is a test plugin for speed figures: every timer event publishes one number
// (bench.value = the timer id), so a batch of N timer events yields one sk_publish of N
// values; GET /bench/publish?n=N publishes N values within one call and answers {"n": N}.
//
// It publishes a fixed path, as a plugin serving a sensor or a switch bank does (its paths
// are known or built once at start), with the typed PublishNumber; the request's query and
// answer are handled without url.Values or encoding/json so that the figure is the cost of
// publishing, not of the request that triggers it.
package main

import (
	"strconv"
	"strings"

	"devhost/sdk"
)

const path = "bench.value"

func init() {
	sdk.Register(&sdk.Plugin{
		OnTimer: func(id uint32) { _ = sdk.PublishNumber(path, float64(id)) },
		OnHTTP: func(req *sdk.Request) sdk.Response {
			q, ok := strings.CutPrefix(req.RawQuery, "n=")
			n, err := strconv.Atoi(q)
			if !ok || err != nil || n < 0 || n > 100000 {
				return sdk.ErrorResponse(400, "validation")
			}
			for i := 0; i < n; i++ {
				if err := sdk.PublishNumber(path, float64(i)); err != nil {
					return sdk.ErrorResponse(500, "internal")
				}
			}
			body := strconv.AppendInt([]byte(`{"n":`), int64(n), 10)
			return sdk.Response{Status: 200, Body: append(body, '}')}
		},
	})
}

func main() {}
