package skplugin

import (
	"errors"
	"testing"

	"devhost/abi"
	"devhost/host/signalk"
)

// The client's errors reach plugins as the ABI's codes.
func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		in   error
		want abi.Errno
	}{{signalk.ErrInvalidState, abi.ErrState}, {signalk.ErrBusy, abi.ErrBusy}, {signalk.ErrInvalidArgument, abi.ErrInvalid}} {
		var e abi.Errno
		if !errors.As(errno(tc.in), &e) || e != tc.want {
			t.Fatalf("%v → %v, want %v", tc.in, e, tc.want)
		}
	}
}
