// Package board is the device's hardware seen from the app: identity, memory figures, the
// network link, and the presence button. Hardware sits behind the Board interface; Sim is the
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
//   - A down link reports iface `none` and empty addresses but keeps its route, so "up"
//     returns on the same route; a route change while down is kept without an event. Leaving
//     the WiFi station drops the RSSI; arriving on it without one takes -55 dBm.
//   - Subscribe starts with the current link state. A slow subscriber keeps only the latest
//     link event; presence events queue (16 at most, the oldest dropped first).
//   - A presence event asks for 1..86400 seconds; a button press naming none asks for 600
//     (HTTPD_RECOVERY_WINDOW_S).
//   - The portal address must be an IPv4 loopback address: the simulated portal listens there.
//   - The control channel is a unix socket (mode 0600) in the data directory; only the local
//     operator can reach it, so the presence button cannot be pressed from the network.
package board

import (
	"context"
	"encoding/hex"
	"net"
)

// Hardware is the fixed description of a board (the `hardware` object of /system/info plus the
// chip identity).
type Hardware struct {
	MAC              string   `json:"mac"` // base MAC, aa:bb:cc:dd:ee:ff
	Chip             string   `json:"chip"`
	ChipRevision     int      `json:"chip_revision"`
	Cores            int      `json:"cores"`
	CPUMHz           int      `json:"cpu_mhz"`
	FlashBytes       int64    `json:"flash_bytes"`
	RAMInternalBytes int64    `json:"ram_internal_bytes"`
	RAMPSRAMBytes    int64    `json:"ram_psram_bytes"`
	Features         []string `json:"features"`
	Board            string   `json:"board,omitempty"`
	// PortalIP is the setup access point's address; on the simulated board a loopback address.
	PortalIP string `json:"portal_ip"`
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

// Link is the state of the station-side network as the hardware reports it.
type Link struct {
	Up      bool   `json:"up"`
	Iface   string `json:"iface"` // none, wifi_sta, eth, thread
	IP      string `json:"ip"`
	Netmask string `json:"netmask"`
	Gateway string `json:"gateway"`
	RSSI    *int   `json:"rssi"`
}

// Event is something the hardware did. Exactly one field is set.
type Event struct {
	Link *Link // the network link changed (up, down, route moved)
	// Presence is a hardware presence event (button, jumper, key switch) asking to open a
	// recovery window of this many seconds.
	Presence int
}

// Board is the hardware the app runs on.
type Board interface {
	Hardware() Hardware
	Memory() Memory
	Link() Link
	// Subscribe delivers hardware events until ctx ends. Delivery never blocks the board: a
	// subscriber that falls behind loses events, never the latest link state.
	Subscribe(ctx context.Context) <-chan Event
}
