package board

import (
	"fmt"
	"net"
	"strings"
)

// RealPortalIP is the portal address on a real interface when the board file names none:
// the spec's setup access point address (192.168.4.1/24).
const RealPortalIP = "192.168.4.1"

// checkPortal checks and completes portal_ip and portal_iface. Without an interface the
// simulated portal listens on loopback, so portal_ip must be an IPv4 loopback address
// (derived from the MAC when empty). With one, portal_ip is an address assigned to that
// interface by its owner (any unicast IPv4 address; RealPortalIP when empty); the portal's
// DHCP server binds to the interface. Whether the interface exists is learnt when the portal
// comes up: a bind that fails raises a health condition, as on the loopback portal.
func (f *File) checkPortal(mac net.HardwareAddr) error {
	if f.PortalIface != "" {
		if err := checkIfaceName("portal_iface", f.PortalIface); err != nil {
			return err
		}
		if f.PortalIP == "" {
			f.PortalIP = RealPortalIP
		}
		ip := net.ParseIP(f.PortalIP)
		if ip == nil || ip.To4() == nil || ip.IsUnspecified() || ip.IsMulticast() || ip.Equal(net.IPv4bcast) {
			return fmt.Errorf("portal_ip %q: the portal on %s needs a unicast IPv4 address such as %s", f.PortalIP, f.PortalIface, RealPortalIP)
		}
		return nil
	}
	if f.PortalIP == "" {
		f.PortalIP = DerivedPortalIP(mac)
	}
	ip := net.ParseIP(f.PortalIP)
	if ip == nil || ip.To4() == nil || !ip.IsLoopback() {
		return fmt.Errorf("portal_ip %q: the simulated portal needs an IPv4 loopback address (127.x.y.z), or portal_iface naming a real interface", f.PortalIP)
	}
	return nil
}

// checkIfaceName checks a Linux interface name given as the board file's member key: 1..15
// bytes, no slash, colon or white space, not "." or "..".
func checkIfaceName(key, name string) error {
	if len(name) > 15 || name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n\r\v\f") {
		return fmt.Errorf("%s %q: want a network interface name (1..15 characters, no '/', ':' or spaces)", key, name)
	}
	return nil
}
