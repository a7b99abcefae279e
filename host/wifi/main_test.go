package wifi

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the manager starts (its loop, the radio subscription) ends with its context.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
