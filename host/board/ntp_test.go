package board

import (
	"context"
	"testing"
)

// TestNTPServerFollowsTheLease walks the board through the ways the device gets (or does not
// get) a DHCP lease and checks the NTP server offered with each.
func TestNTPServerFollowsTheLease(t *testing.T) {
	up, down := true, false
	cases := []struct {
		name  string
		file  func(*File)
		steps func(t *testing.T, s *Sim)
		want  string
	}{
		{"no route", nil, func(*testing.T, *Sim) {}, ""},
		{"station lease", nil, func(t *testing.T, s *Sim) { join(t, s, true) }, "wifi.ntp"},
		{"station with a static address", nil, func(t *testing.T, s *Sim) { join(t, s, false) }, ""},
		{"station associated without an address", nil, func(t *testing.T, s *Sim) {
			if err := s.SetFault(DefaultSSID, FaultNoIP); err != nil {
				t.Fatal(err)
			}
			s.Connect(StaRequest{SSID: DefaultSSID, PSK: DefaultPSK, DHCP: true})
		}, ""},
		{"station lease lost", nil, func(t *testing.T, s *Sim) {
			join(t, s, true)
			if err := s.SetFault(DefaultSSID, FaultNoIP); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"station dropped", nil, func(t *testing.T, s *Sim) {
			join(t, s, true)
			if err := s.RemoveAP(DefaultSSID); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"station left", nil, func(t *testing.T, s *Sim) { join(t, s, true); s.Disconnect() }, ""},
		{"station lease, access points offer none", func(f *File) { f.WiFi.NTPServer = "" },
			func(t *testing.T, s *Sim) { join(t, s, true) }, ""},
		{"ethernet lease", nil, func(t *testing.T, s *Sim) { setIface(t, s, IfaceEth, &up) }, "eth.ntp"},
		{"ethernet is preferred over the station", nil, func(t *testing.T, s *Sim) {
			join(t, s, true)
			setIface(t, s, IfaceEth, &up)
		}, "eth.ntp"},
		{"ethernet route offering none hides the station's", func(f *File) { f.Eth.NTPServer = "" }, func(t *testing.T, s *Sim) {
			join(t, s, true)
			setIface(t, s, IfaceEth, &up)
		}, ""},
		{"ethernet down again, the station's lease carries the route", nil, func(t *testing.T, s *Sim) {
			join(t, s, true)
			setIface(t, s, IfaceEth, &up)
			setIface(t, s, IfaceEth, &down)
		}, "wifi.ntp"},
		{"thread offers none", nil, func(t *testing.T, s *Sim) { setIface(t, s, IfaceThread, &up) }, ""},
		{"ethernet up from the board file", func(f *File) { f.Eth.Up = true }, func(*testing.T, *Sim) {}, "eth.ntp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := DefaultFile()
			f.Eth.NTPServer, f.WiFi.NTPServer = "eth.ntp", "wifi.ntp"
			if c.file != nil {
				c.file(&f)
			}
			s, err := NewSim(f)
			if err != nil {
				t.Fatal(err)
			}
			c.steps(t, s)
			if got := s.NTPServer(); got != c.want {
				t.Fatalf("NTPServer() = %q, want %q", got, c.want)
			}
		})
	}
}

// join connects the station to the default AP, asking for a DHCP lease or not, and checks
// the attempt's last event.
func join(t *testing.T, s *Sim, dhcp bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := s.Subscribe(ctx)
	recv(t, ch)
	recv(t, ch)
	n := s.Connect(StaRequest{SSID: DefaultSSID, PSK: DefaultPSK, DHCP: dhcp})
	wantStation(t, ch, n, StaConnected, 0)
	if dhcp {
		wantStation(t, ch, n, StaGotIP, 0)
	}
}

func setIface(t *testing.T, s *Sim, name string, up *bool) {
	t.Helper()
	if _, err := s.SetIface(name, IfUpdate{Up: up}); err != nil {
		t.Fatal(err)
	}
}
