package prov

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
)

// ServiceName is the default service name: "PROV_" and the last 3 bytes of the base MAC in
// upper-case hex, as ESP-IDF's examples name the device.
func ServiceName(mac string) (string, error) {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 {
		return "", fmt.Errorf("prov: base MAC %q: not a 6-byte address", mac)
	}
	return "PROV_" + strings.ToUpper(hex.EncodeToString(hw[3:])), nil
}

// PoPFromSecret derives the device's proof of possession from its secret: 8 hex characters
// of HMAC-SHA256(secret, "prov-pop"), short enough to type from a label, per device, and
// not guessable from anything the device broadcasts.
func PoPFromSecret(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("prov-pop"))
	return hex.EncodeToString(m.Sum(nil)[:4])
}
