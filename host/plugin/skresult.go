package plugin

import (
	"devhost/abi"
	"devhost/host/sk"
)

// putResult maps a plugin's sk_put_reply result (the ABI's wire byte) to the host's handler
// result by name, so neither numbering has to follow the other. DecodePutReply refuses unknown
// bytes; one that got here anyway fails the request.
func putResult(r abi.PutResult) sk.PutResult {
	switch r {
	case abi.PutSuccess:
		return sk.PutSuccess
	case abi.PutInvalid:
		return sk.PutInvalid
	case abi.PutDeferred:
		return sk.PutDeferred
	}
	return sk.PutFailure
}
