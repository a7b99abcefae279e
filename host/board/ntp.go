package board

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// NTPServer is the NTP server (DHCP option 42) the lease of the interface carrying the
// default route offered, as the board file names it: Ethernet's `eth.ntp_server` while
// Ethernet is up (it is preferred over the station), else the access points'
// `wifi.ntp_server` while the station holds a DHCP lease. A station with a static address,
// Thread (its addresses come from the border router, not DHCP) or no route offer none: "".
// host/sntp reads it through its DHCPServer interface.
func (s *Sim) NTPServer() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.eth.Up:
		return s.ethNTP
	case s.sta.state == "got_ip":
		// got_ip is reached only through DHCP: a static station stays "associated".
		return s.wifi.NTPServer
	}
	return ""
}

// checkNTPServer checks an offered NTP server: empty (none offered), an IP address or a host
// name, optionally with a port ("192.168.1.5:123", "[fd00::1]:123").
func checkNTPServer(v string) error {
	if v == "" {
		return nil
	}
	host := v
	if h, port, err := net.SplitHostPort(v); err == nil {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("ntp_server %q: port %q: want 1..65535", v, port)
		}
		host = h
	}
	if net.ParseIP(host) != nil || validHostname(host) {
		return nil
	}
	return fmt.Errorf("ntp_server %q: want an IP address or a host name, optionally with :port", v)
}

// validHostname is a DNS name of letters, digits and hyphens in dot-separated labels of
// 1..63 characters, at most 253 in all.
func validHostname(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
