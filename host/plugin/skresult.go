package plugin

import (
	"devhost/abi"
	"devhost/host/sk"
)

// putResults maps a plugin's sk_put_reply result (the ABI's wire byte) to the host's handler
// result by name, so neither numbering has to follow the other.
var putResults = map[abi.PutResult]sk.PutResult{
	abi.PutSuccess:  sk.PutSuccess,
	abi.PutInvalid:  sk.PutInvalid,
	abi.PutFailure:  sk.PutFailure,
	abi.PutDeferred: sk.PutDeferred,
}

// putResult is the handler result of r. DecodePutReply refuses unknown bytes; one that got
// here anyway fails the request.
func putResult(r abi.PutResult) sk.PutResult {
	if res, ok := putResults[r]; ok {
		return res
	}
	return sk.PutFailure
}
