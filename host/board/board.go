// Package board is the device's hardware seen from the app: identity, memory figures, the
// network link, and the presence button. Hardware sits behind the Board interface; Sim is the
// simulated board every test and `make run` use, driven through its control channel.
package board

import "context"

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
