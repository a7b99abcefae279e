package sensors

import (
	"encoding/hex"
	"fmt"
	"testing"
)

// testAddr is the advertiser of the BTHome encryption example.
const testAddr = "54:48:E6:8F:80:A5"

// bthomeAD wraps BTHome service data (device information byte first) in its AD structure.
func bthomeAD(sd string) string { return serviceAD("d2fc", sd) }

func serviceAD(uuidLE, data string) string {
	return fmt.Sprintf("%02x16%s%s", 1+2+len(data)/2, uuidLE, data)
}

func mfrAD(companyLE, data string) string {
	return fmt.Sprintf("%02xff%s%s", 1+2+len(data)/2, companyLE, data)
}

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}
