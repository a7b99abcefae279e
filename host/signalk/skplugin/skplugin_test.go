package skplugin

import (
	"errors"
	"testing"

	"devhost/abi"
	"devhost/host/plugin"
	"devhost/host/signalk"
)

// The client's errors reach plugins as the ABI's codes; handler results keep their meaning.
func TestErrorsAndResults(t *testing.T) {
	for _, tc := range []struct {
		in   error
		want abi.Errno
	}{{signalk.ErrInvalidState, abi.ErrState}, {signalk.ErrBusy, abi.ErrBusy}, {signalk.ErrInvalidArgument, abi.ErrInvalid}} {
		var e abi.Errno
		if !errors.As(errno(tc.in), &e) || e != tc.want {
			t.Fatalf("%v → %v, want %v", tc.in, e, tc.want)
		}
	}
	pairs := map[plugin.PutResult]signalk.PutResult{plugin.PutSuccess: signalk.PutSuccess,
		plugin.PutInvalid: signalk.PutInvalid, plugin.PutFailure: signalk.PutFailure, plugin.PutDeferred: signalk.PutDeferred}
	for p, s := range pairs {
		if signalk.PutResult(p) != s {
			t.Fatalf("result %v maps to %v", p, signalk.PutResult(p))
		}
	}
}
