package plugin

import (
	"devhost/abi"
	sktypes "devhost/host/sk"
)

// publisher decodes the sk_publish messages of one session. It runs on the plugin's worker
// goroutine only (host functions run there), so it keeps its buffers and the paths it has
// seen from call to call without a lock: at 100 values a call, a plugin publishing the same
// few paths over and over paid more for making the paths and the slices anew than for
// decoding the values (BenchmarkPublishDecode).
type publisher struct {
	paths abi.PathTable
	vals  []abi.PathValue
	out   []sktypes.Value
}

// decode decodes an sk_publish message and converts it for the Signal K client. b may alias
// the plugin's memory: nothing of it is kept. The result is valid until the next decode; the
// client does not keep the slice (SignalK.Publish).
func (p *publisher) decode(b []byte) ([]sktypes.Value, error) {
	vals, err := p.paths.AppendDecodedValues(p.vals[:0], b, abi.MaxValuesPerCall)
	if err != nil {
		return nil, err
	}
	out := p.out[:0]
	for _, v := range vals {
		out = append(out, sktypes.Value{Path: v.Path, Value: valueToSK(v.Value)})
	}
	clear(vals) // keep no value strings alive between calls
	p.vals, p.out = vals[:0], out
	return out, nil
}

// release drops what the last batch referred to, once the client has taken it.
func (p *publisher) release() { clear(p.out) }
