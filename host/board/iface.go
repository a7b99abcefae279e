package board

import (
	"errors"
	"fmt"
	"net"
)

// Interface names as the network layer knows them.
const (
	IfaceEth     = "eth"
	IfaceWiFiSTA = "wifi_sta"
	IfaceThread  = "thread"
)

// IfState is a wired interface (Ethernet or Thread) as the hardware reports it. A down
// interface keeps its address so that "up" comes back on it.
type IfState struct {
	Name    string `json:"name"` // eth or thread
	Up      bool   `json:"up"`
	IP      string `json:"ip"`
	Netmask string `json:"netmask"`
	Gateway string `json:"gateway"`
}

// IfUpdate changes a wired interface; nil members keep their value.
type IfUpdate struct {
	Up      *bool   `json:"up,omitempty"`
	IP      *string `json:"ip,omitempty"`
	Netmask *string `json:"netmask,omitempty"`
	Gateway *string `json:"gateway,omitempty"`
}

// FileIface is a wired interface in the board file.
type FileIface struct {
	Up      bool   `json:"up"`
	IP      string `json:"ip"`
	Netmask string `json:"netmask"`
	Gateway string `json:"gateway"`
	// NTPServer is the NTP server the interface's DHCP lease offers ("" none); only
	// Ethernet has a DHCP lease (see Sim.NTPServer).
	NTPServer string `json:"ntp_server,omitempty"`
}

// checkAddress checks an IPv4 address, netmask and optional gateway, naming the member.
func checkAddress(ip, mask, gw string) error {
	if a := net.ParseIP(ip); a == nil || a.To4() == nil {
		return fmt.Errorf("ip %q: want an IPv4 address", ip)
	}
	m := net.ParseIP(mask)
	if m == nil || m.To4() == nil {
		return fmt.Errorf("netmask %q: want an IPv4 netmask such as 255.255.255.0", mask)
	}
	if ones, bits := net.IPMask(m.To4()).Size(); ones == 0 && bits == 0 {
		return fmt.Errorf("netmask %q: not a contiguous mask", mask)
	}
	if gw != "" {
		if a := net.ParseIP(gw); a == nil || a.To4() == nil {
			return fmt.Errorf("gateway %q: want an IPv4 address or empty", gw)
		}
	}
	return nil
}

func (f FileIface) check() error {
	if err := checkAddress(f.IP, f.Netmask, f.Gateway); err != nil {
		return err
	}
	return checkNTPServer(f.NTPServer)
}

// Eth is the Ethernet interface.
func (s *Sim) Eth() IfState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eth
}

// Thread is the Thread interface.
func (s *Sim) Thread() IfState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.thread
}

// SetIface changes the Ethernet or Thread interface; an event goes out only when it changed.
func (s *Sim) SetIface(name string, u IfUpdate) (IfState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var cur *IfState
	switch name {
	case IfaceEth:
		cur = &s.eth
	case IfaceThread:
		cur = &s.thread
	default:
		return IfState{}, fmt.Errorf("iface %q: want eth or thread", name)
	}
	next := *cur
	if u.Up != nil {
		next.Up = *u.Up
	}
	if u.IP != nil {
		next.IP = *u.IP
	}
	if u.Netmask != nil {
		next.Netmask = *u.Netmask
	}
	if u.Gateway != nil {
		next.Gateway = *u.Gateway
	}
	if err := checkAddress(next.IP, next.Netmask, next.Gateway); err != nil {
		return *cur, fmt.Errorf("%s: %w", name, err)
	}
	if next == *cur {
		return next, nil
	}
	*cur = next
	ev := next
	s.publishLocked(Event{Iface: &ev})
	return next, nil
}

// IfaceMAC is the MAC address of one interface, derived from the base MAC as ESP-IDF does:
// station = base, soft-AP = base+1, Ethernet = base+3; the 802.15.4 radio has no MAC of its
// own and uses the base.
func IfaceMAC(base, iface string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(base)
	if err != nil || len(mac) != 6 {
		return nil, errors.New("base MAC: want six bytes")
	}
	add := 0
	switch iface {
	case IfaceWiFiSTA, IfaceThread:
	case "wifi_ap":
		add = 1
	case IfaceEth:
		add = 3
	default:
		return nil, fmt.Errorf("iface %q: no MAC", iface)
	}
	out := make(net.HardwareAddr, 6)
	copy(out, mac)
	for i := 5; i >= 0 && add > 0; i-- {
		sum := int(out[i]) + add
		out[i] = byte(sum)
		add = sum >> 8
	}
	return out, nil
}

// LinkLocal is the IPv6 link-local address (modified EUI-64, RFC 4291) of a 6-byte MAC.
func LinkLocal(mac net.HardwareAddr) string {
	if len(mac) != 6 {
		return ""
	}
	ip := make(net.IP, 16)
	ip[0], ip[1] = 0xfe, 0x80
	ip[8] = mac[0] ^ 0x02
	ip[9], ip[10] = mac[1], mac[2]
	ip[11], ip[12] = 0xff, 0xfe
	ip[13], ip[14], ip[15] = mac[3], mac[4], mac[5]
	return ip.String()
}
