package plugin

import (
	"testing"

	"devhost/abi"
	"devhost/host/sk"
)

// A plugin's reply keeps its meaning on the way to the Signal K server: each ABI result maps
// to the handler result of the same name, and a byte outside the table fails the request.
func TestPutResultByName(t *testing.T) {
	for _, tc := range []struct {
		in   abi.PutResult
		want sk.PutResult
	}{
		{abi.PutSuccess, sk.PutSuccess},
		{abi.PutInvalid, sk.PutInvalid},
		{abi.PutFailure, sk.PutFailure},
		{abi.PutDeferred, sk.PutDeferred},
		{abi.PutDeferred + 1, sk.PutFailure},
	} {
		if got := putResult(tc.in); got != tc.want {
			t.Errorf("%v → %v, want %v", tc.in, got, tc.want)
		}
	}
}
