package plugin

import (
	"sync"

	"devhost/abi"
	sktypes "devhost/host/sk"
)

// valueBufs holds the decoding buffers of sk_publish: a batch of values decodes into a
// reused slice instead of one grown anew for every call (at 100 values a call, growing it
// cost about as much as decoding the values).
var valueBufs = sync.Pool{New: func() any {
	b := make([]abi.PathValue, 0, 128)
	return &b
}}

// decodePublished decodes an sk_publish message and converts it for the Signal K client.
// The result is the client's to keep.
func decodePublished(b []byte) ([]sktypes.Value, error) {
	buf := valueBufs.Get().(*[]abi.PathValue)
	defer func() {
		clear(*buf) // keep no strings alive
		*buf = (*buf)[:0]
		valueBufs.Put(buf)
	}()
	vals, err := abi.AppendDecodedValues((*buf)[:0], b, abi.MaxValuesPerCall)
	if err != nil {
		return nil, err
	}
	*buf = vals
	out := make([]sktypes.Value, len(vals))
	for i, v := range vals {
		out[i] = sktypes.Value{Path: v.Path, Value: valueToSK(v.Value)}
	}
	return out, nil
}
