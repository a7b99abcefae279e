// Package board is the device's hardware seen from the app: identity, memory figures, the
// network interfaces (Ethernet, Thread and the WiFi radio), and the presence button. Hardware sits behind the Board interface; Sim is the
// simulated board every test and `make run` use, driven through its control channel.
//
// The simulated board is described by a JSON board file (LoadSim; board.example.json lists
// every member with its default). Every member is optional; an unknown member, a malformed
// value or an inconsistent set of figures is an error naming the member. The device
// identifier is the last two bytes of the MAC as 4 lowercase hex characters.
//
// Choices where the spec is silent:
//   - Memory low-water marks are kept by the board, as the allocator does on hardware: every
//     value set since the app started counts, even one that lasted less than a health tick.
//   - Lowering one memory figure lowers those that must stay below it (largest block ≤ free
//     internal ≤ free heap) unless the same update names them; a named figure that breaks the
//     order is an error.
//   - Ethernet and Thread keep their address while down, so "up" comes back on it; an address
//     change while down is kept and reported with the interface's state.
//   - The WiFi radio (wifi.go) is a driver: the app's station manager asks it to connect and
//     it answers with station events numbered by attempt. Access points in range have an SSID,
//     BSSID, channel, RSSI, auth mode, password and a fault. Fixed behaviours: a configured
//     SSID not in range fails with 201; `wrong_password` (or a wrong password) fails with 202;
//     an AP at or below -90 dBm fails with 204 (auth timed out, weak signal); `no_answer`
//     never answers; `no_ip` associates and never gives an address, and on a station holding
//     one takes it away; `drop` drops the connected station once with 200 (at once when one
//     is connected, else right after the next one gets its address) and then reads `none`;
//     removing the AP a station is on drops it with 200. With a password set the station
//     refuses open and WEP APs (they count as not in range); among APs with the SSID it joins
//     the strongest, or only the pinned BSSID. Every station gets the board's station_ip.
//   - Scans are instantaneous; `scan_busy` makes the radio refuse them.
//   - Subscribe starts with the current Ethernet and Thread states. A slow subscriber keeps
//     only the latest state per interface; station events queue (64 at most) and presence
//     events too (16 at most), the oldest of the kind dropped first.
//   - A presence event asks for 1..86400 seconds; a button press naming none asks for 600
//     (HTTPD_RECOVERY_WINDOW_S).
//   - The portal address must be an IPv4 loopback address: the simulated portal listens there.
//     Without one in the board file it is 127.4.<MAC byte 5>.<MAC byte 6> (the device id),
//     so several simulated devices run side by side. `portal_iface` puts the portal on a real
//     interface instead: portal_ip (default 192.168.4.1, the spec's) is then any unicast IPv4
//     address, assigned to that interface by whoever owns it (not by the board); a missing
//     interface shows when the portal comes up, as a failed bind.
//   - `can_iface` puts the CAN bus on a real SocketCAN interface (can0, or vcan0 for tests)
//     instead of the simulated bus; the device opens it (package socketcan), and the control
//     channel's CAN injection and sent-frame list then see nothing of that bus.
//   - DHCP leases offer an NTP server (option 42) as the board file says: `wifi.ntp_server`
//     with the station's lease from any access point, `eth.ntp_server` with Ethernet's (the
//     simulated Ethernet's address counts as a DHCP lease). NTPServer reports the one of the
//     interface carrying the default route (Ethernet over the station); a station with a
//     static address, Thread (no DHCP) or no route offer none.
//   - The control channel is a unix socket (mode 0600) in the data directory; only the local
//     operator can reach it, so the presence button cannot be pressed from the network.
package board

import (
	"context"
	"encoding/hex"
	"net"
)

// Hardware is the fixed description of a board: the `hardware` object of /system/info
// (InfoHardware, whose members stand at the top level in JSON) plus the chip identity and the
// portal address.
type Hardware struct {
	Chip         string `json:"chip"`
	ChipRevision int    `json:"chip_revision"`
	Cores        int    `json:"cores"`
	InfoHardware
	// PortalIP is the setup access point's address; on the simulated board a loopback address.
	PortalIP string `json:"portal_ip"`
	// PortalIface is the real interface carrying PortalIP; "" is the loopback portal.
	PortalIface string `json:"portal_iface,omitempty"`
}

// InfoHardware is the `hardware` object of GET /system/info, as the board describes it.
type InfoHardware struct {
	MAC              string   `json:"mac"` // base MAC, aa:bb:cc:dd:ee:ff
	CPUMHz           int      `json:"cpu_mhz"`
	FlashBytes       int64    `json:"flash_bytes"`
	RAMInternalBytes int64    `json:"ram_internal_bytes"`
	RAMPSRAMBytes    int64    `json:"ram_psram_bytes"`
	Features         []string `json:"features"`
	Board            string   `json:"board,omitempty"`
}

// Memory is a snapshot of the heap figures in bytes. Free values are live; the minima are
// low-water marks the allocator keeps since the app started, as ESP-IDF's heap does.
type Memory struct {
	FreeHeap        int64 `json:"free_heap"`
	MinFreeHeap     int64 `json:"min_free_heap"`
	FreeInternal    int64 `json:"free_internal"`
	MinFreeInternal int64 `json:"min_internal_free"`
	LargestBlock    int64 `json:"largest_block"` // largest free internal block
}

// DeviceID is the device identifier: the last two bytes of the base MAC as 4 lowercase hex
// characters ("" when the MAC is not a 6-byte address).
func (h Hardware) DeviceID() string {
	mac, err := net.ParseMAC(h.MAC)
	if err != nil || len(mac) != 6 {
		return ""
	}
	return hex.EncodeToString(mac[4:])
}

// Event is something the hardware did. Exactly one field is set.
type Event struct {
	Iface   *IfState  // Ethernet or Thread changed (up, down, address)
	Station *StaEvent // the WiFi station associated, got or lost an address, or left
	// Presence is a hardware presence event (button, jumper, key switch) asking to open a
	// recovery window of this many seconds.
	Presence int
}

// Board is the hardware the app runs on.
type Board interface {
	Hardware() Hardware
	Memory() Memory
	// Subscribe delivers hardware events until ctx ends. Delivery never blocks the board: a
	// subscriber that falls behind loses events, never the latest interface state.
	Subscribe(ctx context.Context) <-chan Event
}
