package portal

import (
	"testing"

	"go.uber.org/goleak"
)

// Down must stop every goroutine Up started; keep-alive connections of the tests' own HTTP
// clients are not the portal's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}
