package sntp

import (
	"testing"

	"devhost/host/board"
)

// TestSimulatedBoardOffersItsServer wires the simulated board's DHCP lease to the client as
// the device does: the NTP server the board file gives the access points' DHCP is polled
// after the configured ones when time.from_dhcp is on and the station holds a lease, and
// never otherwise. The configured server fails so that every poll reaches the offered one.
func TestSimulatedBoardOffersItsServer(t *testing.T) {
	const offered = "ntp.marina.test"
	cases := []struct {
		name     string
		fromDHCP bool
		dhcp     bool // the station asks for a lease (false: a static address)
		polled   []string
	}{
		{"from_dhcp on, lease", true, true, []string{"a", offered}},
		{"from_dhcp off, lease", false, true, []string{"a"}},
		{"from_dhcp on, static address", true, false, []string{"a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := board.DefaultFile()
			f.WiFi.NTPServer = offered
			sim, err := board.NewSim(f)
			if err != nil {
				t.Fatal(err)
			}
			// The simulated radio answers within Connect: the lease is held when it returns.
			sim.Connect(board.StaRequest{SSID: board.DefaultSSID, PSK: board.DefaultPSK, DHCP: c.dhcp})
			h := newHarness(t, Config{Enabled: true, Servers: []string{"a"}, FromDHCP: c.fromDHCP}, sim)
			h.sc.set("a", true)
			h.c.NetworkUp()
			h.polled(c.polled...)
			if c.polled[len(c.polled)-1] == offered {
				st := h.waitStatus("synced", func(s Status) bool { return s.Synced })
				if st.Server != offered {
					t.Fatalf("synced from %q, want the offered %q", st.Server, offered)
				}
				// The offered server answered: the next poll is an hour later, in the same order.
				h.next(Interval, c.polled...)
				return
			}
			// Only the configured server, which fails: the retry asks it alone again.
			h.next(BackoffMin, c.polled...)
			if st := h.c.Status(); st.Synced {
				t.Fatalf("synced without the offered server: %+v", st)
			}
		})
	}
}
