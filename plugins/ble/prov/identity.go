package prov

import (
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
