package board

import (
	"context"
	"errors"
	"testing"
)

// station collects the station events of one subscription.
func stationEvents(t *testing.T, s *Sim) <-chan Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch := s.Subscribe(ctx)
	recv(t, ch)
	recv(t, ch)
	return ch
}

func wantStation(t *testing.T, ch <-chan Event, attempt uint64, kind string, reason int) StaEvent {
	t.Helper()
	ev := recv(t, ch)
	if ev.Station == nil || ev.Station.Attempt != attempt || ev.Station.Kind != kind || ev.Station.Reason != reason {
		t.Fatalf("event %+v (station %+v), want attempt %d %s reason %d", ev, ev.Station, attempt, kind, reason)
	}
	return *ev.Station
}

// TestStationBehaviours runs every access-point behaviour the acceptance tests rely on.
func TestStationBehaviours(t *testing.T) {
	type want struct {
		kind   string
		reason int
	}
	connected, gotIP := want{StaConnected, 0}, want{StaGotIP, 0}
	cases := []struct {
		name  string
		ap    APUpdate
		fault string
		req   StaRequest
		want  []want
		state string
	}{
		{"joins and gets the board's address", APUpdate{SSID: "n", PSK: "password1"}, FaultNone,
			StaRequest{SSID: "n", PSK: "password1", DHCP: true}, []want{connected, gotIP}, "got_ip"},
		{"static addressing: no DHCP", APUpdate{SSID: "n", PSK: "password1"}, FaultNone,
			StaRequest{SSID: "n", PSK: "password1"}, []want{connected}, "associated"},
		{"not in range", APUpdate{SSID: "n", PSK: "password1"}, FaultNone,
			StaRequest{SSID: "elsewhere", PSK: "password1", DHCP: true}, []want{{StaDisconnected, 201}}, "idle"},
		{"wrong password", APUpdate{SSID: "n", PSK: "password1"}, FaultNone,
			StaRequest{SSID: "n", PSK: "password2", DHCP: true}, []want{{StaDisconnected, 202}}, "idle"},
		{"wrong_password fault", APUpdate{SSID: "n", PSK: "password1"}, FaultWrongPassword,
			StaRequest{SSID: "n", PSK: "password1", DHCP: true}, []want{{StaDisconnected, 202}}, "idle"},
		{"no_answer: silence", APUpdate{SSID: "n", PSK: "password1"}, FaultNoAnswer,
			StaRequest{SSID: "n", PSK: "password1", DHCP: true}, nil, "connecting"},
		{"no_ip: associated only", APUpdate{SSID: "n", PSK: "password1"}, FaultNoIP,
			StaRequest{SSID: "n", PSK: "password1", DHCP: true}, []want{connected}, "associated"},
		{"drop: once after the address", APUpdate{SSID: "n", PSK: "password1"}, FaultDrop,
			StaRequest{SSID: "n", PSK: "password1", DHCP: true}, []want{connected, gotIP, {StaDisconnected, 200}}, "idle"},
		{"weak signal", APUpdate{SSID: "n", PSK: "password1", RSSI: ptr(-92)}, FaultNone,
			StaRequest{SSID: "n", PSK: "password1", DHCP: true}, []want{{StaDisconnected, 204}}, "idle"},
		{"password set refuses an open AP", APUpdate{SSID: "n"}, FaultNone,
			StaRequest{SSID: "n", PSK: "password1", DHCP: true}, []want{{StaDisconnected, 201}}, "idle"},
		{"password set refuses WEP", APUpdate{SSID: "n", Auth: "wep", PSK: "abcde"}, FaultNone,
			StaRequest{SSID: "n", PSK: "abcde", DHCP: true}, []want{{StaDisconnected, 201}}, "idle"},
		{"open network without password", APUpdate{SSID: "n"}, FaultNone,
			StaRequest{SSID: "n", DHCP: true}, []want{connected, gotIP}, "got_ip"},
		{"secured network without password", APUpdate{SSID: "n", PSK: "password1"}, FaultNone,
			StaRequest{SSID: "n", DHCP: true}, []want{{StaDisconnected, 202}}, "idle"},
		{"pinned BSSID elsewhere", APUpdate{SSID: "n", PSK: "password1"}, FaultNone,
			StaRequest{SSID: "n", PSK: "password1", BSSID: "02:00:00:00:00:99", DHCP: true}, []want{{StaDisconnected, 201}}, "idle"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := DefaultFile()
			f.WiFi.APs = nil
			s, err := NewSim(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.AddAP(c.ap); err != nil {
				t.Fatal(err)
			}
			if err := s.SetFault(c.ap.SSID, c.fault); err != nil {
				t.Fatal(err)
			}
			ch := stationEvents(t, s)
			n := s.Connect(c.req)
			for _, w := range c.want {
				ev := wantStation(t, ch, n, w.kind, w.reason)
				if w.kind == StaGotIP && (ev.IP != DefaultStationIP || ev.Netmask != "255.0.0.0") {
					t.Fatalf("got IP %+v", ev)
				}
				if w.kind == StaConnected && (ev.BSSID != DefaultBSSID("n") || ev.Channel != DefaultChannel) {
					t.Fatalf("connected %+v", ev)
				}
			}
			noEvent(t, ch)
			if st := s.WiFi().Station.State; st != c.state {
				t.Fatalf("station %s, want %s", st, c.state)
			}
		})
	}
}

func TestStationLiveFaults(t *testing.T) {
	s, _ := LoadSim("")
	ch := stationEvents(t, s)
	join := func() uint64 {
		n := s.Connect(StaRequest{SSID: DefaultSSID, PSK: DefaultPSK, DHCP: true})
		wantStation(t, ch, n, StaConnected, 0)
		wantStation(t, ch, n, StaGotIP, 0)
		return n
	}
	n := join()
	// The AP the station is on changes signal: an RSSI event; the same signal again is none.
	if _, err := s.AddAP(APUpdate{SSID: DefaultSSID, PSK: DefaultPSK, RSSI: ptr(-75)}); err != nil {
		t.Fatal(err)
	}
	if ev := wantStation(t, ch, n, StaRSSI, 0); ev.RSSI != -75 {
		t.Fatalf("rssi event %+v", ev)
	}
	if _, err := s.AddAP(APUpdate{SSID: DefaultSSID, PSK: DefaultPSK, RSSI: ptr(-75)}); err != nil {
		t.Fatal(err)
	}
	noEvent(t, ch)
	// drop on a connected station: at once, once; the AP then reads none.
	if err := s.SetFault(DefaultSSID, FaultDrop); err != nil {
		t.Fatal(err)
	}
	wantStation(t, ch, n, StaDisconnected, 200)
	if f := s.WiFi().APs[0].Fault; f != FaultNone {
		t.Fatalf("fault after the drop: %s", f)
	}
	n = join()
	// no_ip on a station holding an address: the address goes.
	if err := s.SetFault(DefaultSSID, FaultNoIP); err != nil {
		t.Fatal(err)
	}
	wantStation(t, ch, n, StaLostIP, 0)
	if err := s.SetFault(DefaultSSID, FaultNone); err != nil {
		t.Fatal(err)
	}
	s.Disconnect()
	n = join()
	// The AP goes out of range: lost beacon.
	if err := s.RemoveAP(DefaultSSID); err != nil {
		t.Fatal(err)
	}
	wantStation(t, ch, n, StaDisconnected, 200)
	if err := s.RemoveAP(DefaultSSID); err == nil {
		t.Fatal("removing an AP twice succeeded")
	}
	noEvent(t, ch)
}

func TestStrongestAPAndScan(t *testing.T) {
	f := DefaultFile()
	f.WiFi.APs = nil
	s, _ := NewSim(f)
	for _, u := range []APUpdate{
		{SSID: "Quay", PSK: "password1", BSSID: "02:00:00:00:00:01", RSSI: ptr(-80)},
		{SSID: "Quay", PSK: "password1", BSSID: "02:00:00:00:00:02", RSSI: ptr(-50), Channel: 11},
		{SSID: "Open", RSSI: ptr(-65)},
	} {
		if _, err := s.AddAP(u); err != nil {
			t.Fatal(err)
		}
	}
	ch := stationEvents(t, s)
	n := s.Connect(StaRequest{SSID: "Quay", PSK: "password1", DHCP: true})
	if ev := wantStation(t, ch, n, StaConnected, 0); ev.BSSID != "02:00:00:00:00:02" || ev.Channel != 11 || ev.RSSI != -50 {
		t.Fatalf("joined %+v, want the strongest", ev)
	}
	wantStation(t, ch, n, StaGotIP, 0)
	n = s.Connect(StaRequest{SSID: "Quay", PSK: "password1", BSSID: "02:00:00:00:00:01", DHCP: true})
	if ev := wantStation(t, ch, n, StaConnected, 0); ev.BSSID != "02:00:00:00:00:01" {
		t.Fatalf("joined %+v, want the pinned AP", ev)
	}
	wantStation(t, ch, n, StaGotIP, 0)
	res, err := s.Scan()
	if err != nil || len(res) != 3 || res[0].RSSI != -50 || res[1].SSID != "Open" || res[1].Auth != "open" || res[2].RSSI != -80 {
		t.Fatalf("scan %+v %v", res, err)
	}
	s.SetScanBusy(true)
	if _, err := s.Scan(); !errors.Is(err, ErrScanBusy) {
		t.Fatalf("busy scan: %v", err)
	}
	// Replacing an AP (same BSSID) keeps one entry.
	if _, err := s.AddAP(APUpdate{SSID: "Open", RSSI: ptr(-40)}); err != nil || len(s.WiFi().APs) != 3 {
		t.Fatalf("replace: %v %+v", err, s.WiFi().APs)
	}
	// A later attempt makes events of the earlier one stale: Disconnect numbers a new one.
	s.Disconnect()
	if s.WiFi().Station.State != "idle" {
		t.Fatal("station not idle after Disconnect")
	}
	noEvent(t, ch)
}

func TestIfaceMACAndLinkLocal(t *testing.T) {
	for _, c := range []struct{ iface, mac, ll string }{
		{IfaceWiFiSTA, "02:00:00:12:ab:cd", "fe80::ff:fe12:abcd"},
		{IfaceEth, "02:00:00:12:ab:d0", "fe80::ff:fe12:abd0"},
		{IfaceThread, "02:00:00:12:ab:cd", "fe80::ff:fe12:abcd"},
	} {
		mac, err := IfaceMAC(DefaultMAC, c.iface)
		if err != nil || mac.String() != c.mac || LinkLocal(mac) != c.ll {
			t.Errorf("%s: %v %s %v, want %s %s", c.iface, mac, LinkLocal(mac), err, c.mac, c.ll)
		}
	}
	if mac, _ := IfaceMAC("02:00:00:12:ff:fe", IfaceEth); mac.String() != "02:00:00:13:00:01" {
		t.Errorf("carry: %v", mac)
	}
	if _, err := IfaceMAC("nonsense", IfaceEth); err == nil {
		t.Error("bad base MAC accepted")
	}
}
