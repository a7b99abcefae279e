package board

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

func TestDefaultBoard(t *testing.T) {
	s, err := LoadSim("")
	if err != nil {
		t.Fatal(err)
	}
	hw := s.Hardware()
	if hw.MAC != "02:00:00:12:ab:cd" || hw.DeviceID() != "abcd" || hw.Chip != "esp32s3" || hw.Cores != 2 ||
		hw.CPUMHz != 240 || hw.FlashBytes != 8<<20 || hw.PortalIP != "127.4.171.205" ||
		!reflect.DeepEqual(hw.Features, []string{"wifi", "ble"}) {
		t.Fatalf("default hardware %+v", hw)
	}
	if e, th := s.Eth(), s.Thread(); e.Up || th.Up || e.IP != "127.0.0.1" || e.Name != "eth" || th.Name != "thread" {
		t.Fatalf("default interfaces %+v %+v", e, th)
	}
	w := s.WiFi()
	if len(w.APs) != 1 || w.APs[0].SSID != DefaultSSID || w.APs[0].PSK != DefaultPSK || w.APs[0].Auth != "wpa2" ||
		w.Station.State != "idle" || w.ScanBusy {
		t.Fatalf("default radio %+v", w)
	}
	m := s.Memory()
	if m.FreeHeap <= 0 || m.MinFreeHeap != m.FreeHeap || m.MinFreeInternal != m.FreeInternal {
		t.Fatalf("default memory %+v", m)
	}
	// The hardware copy is the caller's to change.
	hw.Features[0] = "x"
	if s.Hardware().Features[0] != "wifi" {
		t.Fatal("Hardware shares its features slice")
	}
}

func TestExampleFileIsTheDefault(t *testing.T) {
	s, err := LoadSim("board.example.json")
	if err != nil {
		t.Fatal(err)
	}
	d, _ := LoadSim("")
	if !reflect.DeepEqual(s.State(), d.State()) {
		t.Fatalf("board.example.json differs from the defaults:\n%+v\n%+v", s.State(), d.State())
	}
}

func TestDeviceID(t *testing.T) {
	for mac, want := range map[string]string{
		"02:00:00:12:AB:CD": "abcd",
		"24:6f:28:01:00:0f": "000f",
		"nonsense":          "",
		"":                  "",
	} {
		if got := (Hardware{InfoHardware: InfoHardware{MAC: mac}}).DeviceID(); got != want {
			t.Errorf("DeviceID(%q) = %q, want %q", mac, got, want)
		}
	}
}

func TestParseFile(t *testing.T) {
	cases := []struct {
		name, doc, err string
		check          func(File) bool
	}{
		{"empty object", `{}`, "", func(f File) bool { return f.Chip == "esp32s3" }},
		{"mac normalised", `{"mac":"AA-BB-CC-DD-EE-0F"}`, "", func(f File) bool { return f.MAC == "aa:bb:cc:dd:ee:0f" }},
		{"eth up", `{"eth":{"up":true,"ip":"127.0.0.2"}}`, "", func(f File) bool { return f.Eth.Up && f.Eth.IP == "127.0.0.2" && f.Eth.Netmask == "255.0.0.0" }},
		{"portal named", `{"portal_ip":"127.9.9.9"}`, "", func(f File) bool { return f.PortalIP == "127.9.9.9" }},
		{"portal derived from the id", `{"mac":"02:00:00:00:01:02"}`, "", func(f File) bool { return f.PortalIP == "127.4.1.2" }},
		{"own AP list replaces the default", `{"wifi":{"aps":[{"ssid":"Open Bay"}]}}`, "", func(f File) bool {
			a := f.WiFi.APs
			return len(a) == 1 && a[0].Auth == "open" && a[0].Channel == DefaultChannel && a[0].BSSID == DefaultBSSID("Open Bay") && a[0].Fault == "none"
		}},
		{"no AP in range", `{"wifi":{"aps":[]}}`, "", func(f File) bool { return len(f.WiFi.APs) == 0 }},
		{"AP with a password is wpa2", `{"wifi":{"aps":[{"ssid":"a","psk":"12345678","rssi":-70}]}}`, "", func(f File) bool { return f.WiFi.APs[0].Auth == "wpa2" && f.WiFi.APs[0].RSSI == -70 }},
		{"psram feature", `{"ram_psram_bytes":2097152,"features":["wifi","embedded-psram"]}`, "", func(f File) bool { return f.RAMPSRAMBytes == 2<<20 }},
		{"no features", `{"features":[]}`, "", func(f File) bool { return f.Features != nil && len(f.Features) == 0 }},
		{"unknown member", `{"flash":1}`, `unknown field "flash"`, nil},
		{"unknown nested member", `{"memory":{"free":1}}`, `unknown field "free"`, nil},
		{"trailing data", `{} {}`, "trailing data", nil},
		{"not JSON", `board`, "malformed JSON", nil},
		{"empty", ``, "empty document", nil},
		{"bad mac", `{"mac":"02:00:00:12:ab"}`, "mac", nil},
		{"eui64 mac", `{"mac":"02:00:00:ff:fe:12:ab:cd"}`, "six bytes", nil},
		{"no chip", `{"chip":""}`, "chip", nil},
		{"zero cores", `{"cores":0}`, "cores", nil},
		{"negative psram", `{"ram_psram_bytes":-1}`, "ram_psram_bytes", nil},
		{"unknown feature", `{"features":["wifi","lora"]}`, `features[1] "lora"`, nil},
		{"duplicate feature", `{"features":["wifi","wifi"]}`, "listed twice", nil},
		{"portal not loopback", `{"portal_ip":"192.168.4.1"}`, "portal_ip", nil},
		{"portal not an address", `{"portal_ip":"portal"}`, "portal_ip", nil},
		{"internal above heap", `{"memory":{"free_heap":1000,"free_internal":2000,"largest_block":10}}`, "free_internal 2000 exceeds free_heap", nil},
		{"block above internal", `{"memory":{"largest_block":300000}}`, "largest_block", nil},
		{"heap above ram", `{"memory":{"free_heap":600000}}`, "exceeds the board's RAM", nil},
		{"old link member", `{"link":{"up":true}}`, `unknown field "link"`, nil},
		{"bad ip", `{"eth":{"ip":"::1"}}`, "eth.ip", nil},
		{"bad netmask", `{"thread":{"netmask":"255.0.255.0"}}`, "thread.netmask", nil},
		{"bad gateway", `{"eth":{"gateway":"gw"}}`, "eth.gateway", nil},
		{"station not loopback", `{"wifi":{"station_ip":"10.0.0.2"}}`, "wifi.station_ip", nil},
		{"station not an address", `{"wifi":{"station_ip":"x"}}`, "wifi.station_ip", nil},
		{"AP without ssid", `{"wifi":{"aps":[{"psk":"12345678"}]}}`, "wifi.aps[0].ssid", nil},
		{"AP ssid too long", `{"wifi":{"aps":[{"ssid":"` + strings.Repeat("s", 33) + `"}]}}`, "wifi.aps[0].ssid", nil},
		{"AP bad bssid", `{"wifi":{"aps":[{"ssid":"a","bssid":"zz"}]}}`, "wifi.aps[0].bssid", nil},
		{"AP bad channel", `{"wifi":{"aps":[{"ssid":"a","channel":300}]}}`, "wifi.aps[0].channel", nil},
		{"AP rssi out of range", `{"wifi":{"aps":[{"ssid":"a","rssi":5}]}}`, "wifi.aps[0].rssi 5", nil},
		{"AP unknown auth", `{"wifi":{"aps":[{"ssid":"a","auth":"wpa4"}]}}`, "wifi.aps[0].auth", nil},
		{"AP open with password", `{"wifi":{"aps":[{"ssid":"a","auth":"open","psk":"12345678"}]}}`, "wifi.aps[0].psk", nil},
		{"AP wpa2 without password", `{"wifi":{"aps":[{"ssid":"a","auth":"wpa2"}]}}`, "wifi.aps[0].psk", nil},
		{"AP short password", `{"wifi":{"aps":[{"ssid":"a","psk":"short"}]}}`, "wifi.aps[0].psk", nil},
		{"AP unknown fault", `{"wifi":{"aps":[{"ssid":"a","fault":"fire"}]}}`, "wifi.aps[0].fault", nil},
		{"AP listed twice", `{"wifi":{"aps":[{"ssid":"a"},{"ssid":"a"}]}}`, "wifi.aps[1].bssid", nil},
		{"AP unknown member", `{"wifi":{"aps":[{"ssid":"a","power":1}]}}`, `unknown field "power"`, nil},
		{"wrong type", `{"cores":"two"}`, "malformed JSON", nil},
		{"ntp servers offered", `{"eth":{"ntp_server":"192.168.1.5:123"},"wifi":{"ntp_server":"time.marina.example"}}`, "", func(f File) bool {
			return f.Eth.NTPServer == "192.168.1.5:123" && f.WiFi.NTPServer == "time.marina.example"
		}},
		{"ntp server ipv6 with port", `{"wifi":{"ntp_server":"[fd00::1]:123"}}`, "", func(f File) bool { return f.WiFi.NTPServer == "[fd00::1]:123" }},
		{"wifi ntp server not a name", `{"wifi":{"ntp_server":"time server"}}`, `wifi.ntp_server "time server"`, nil},
		{"eth ntp server bad port", `{"eth":{"ntp_server":"127.0.0.1:0"}}`, "eth.ntp_server", nil},
		{"eth ntp server bad label", `{"eth":{"ntp_server":"-pool.example"}}`, "eth.ntp_server", nil},
		{"thread offers no ntp server", `{"thread":{"ntp_server":"127.0.0.1"}}`, "thread.ntp_server", nil},
		{"portal on an interface", `{"portal_iface":"wlan0","portal_ip":"192.168.4.1"}`, "", func(f File) bool {
			return f.PortalIface == "wlan0" && f.PortalIP == "192.168.4.1"
		}},
		{"portal interface defaults to the spec address", `{"portal_iface":"veth-ap"}`, "", func(f File) bool { return f.PortalIP == RealPortalIP }},
		{"portal interface on loopback", `{"portal_iface":"lo","portal_ip":"127.9.9.9"}`, "", func(f File) bool { return f.PortalIP == "127.9.9.9" }},
		{"portal interface name too long", `{"portal_iface":"` + strings.Repeat("i", 16) + `"}`, "portal_iface", nil},
		{"portal interface name with slash", `{"portal_iface":"wl/an0"}`, "portal_iface", nil},
		{"portal interface name with space", `{"portal_iface":"wl an0"}`, "portal_iface", nil},
		{"portal interface with broadcast address", `{"portal_iface":"wlan0","portal_ip":"255.255.255.255"}`, "portal_ip", nil},
		{"portal interface with ipv6 address", `{"portal_iface":"wlan0","portal_ip":"fd00::1"}`, "portal_ip", nil},
		{"portal interface with no address", `{"portal_iface":"wlan0","portal_ip":"ap"}`, "portal_ip", nil},
		{"portal interface not a string", `{"portal_iface":1}`, "malformed JSON", nil},
		{"can bus on an interface", `{"can_iface":"vcan0"}`, "", func(f File) bool { return f.CANIface == "vcan0" }},
		{"can bus simulated by default", `{}`, "", func(f File) bool { return f.CANIface == "" }},
		{"can interface name too long", `{"can_iface":"` + strings.Repeat("c", 16) + `"}`, "can_iface", nil},
		{"can interface name with colon", `{"can_iface":"can:0"}`, "can_iface", nil},
		{"can interface name dot dot", `{"can_iface":".."}`, "can_iface", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := ParseFile([]byte(c.doc))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(f) {
				t.Fatalf("unexpected result %+v", f)
			}
		})
	}
}

func TestLoadSimNamesTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "b.json")
	if err := os.WriteFile(p, []byte(`{"cpu":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadSim(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), `"cpu"`) {
		t.Fatalf("error %v", err)
	}
	if _, err := LoadSim(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("a missing board file loaded")
	}
}

func TestMemoryLowWater(t *testing.T) {
	s, _ := LoadSim("")
	steps := []struct {
		name    string
		u       MemoryUpdate
		want    Memory
		wantErr string
	}{
		{"drop internal: block follows", MemoryUpdate{FreeInternal: ptr[int64](4096)},
			Memory{FreeHeap: 262144, FreeInternal: 4096, LargestBlock: 4096, MinFreeHeap: 262144, MinFreeInternal: 4096}, ""},
		{"recover: minima stay", MemoryUpdate{FreeInternal: ptr[int64](200000), LargestBlock: ptr[int64](100000)},
			Memory{FreeHeap: 262144, FreeInternal: 200000, LargestBlock: 100000, MinFreeHeap: 262144, MinFreeInternal: 4096}, ""},
		{"drop heap: internal and block follow", MemoryUpdate{FreeHeap: ptr[int64](50000)},
			Memory{FreeHeap: 50000, FreeInternal: 50000, LargestBlock: 50000, MinFreeHeap: 50000, MinFreeInternal: 4096}, ""},
		{"raise internal: heap follows", MemoryUpdate{FreeInternal: ptr[int64](60000)},
			Memory{FreeHeap: 60000, FreeInternal: 60000, LargestBlock: 50000, MinFreeHeap: 50000, MinFreeInternal: 4096}, ""},
		{"named block above internal", MemoryUpdate{LargestBlock: ptr[int64](70000)}, Memory{}, "largest_block 70000 exceeds"},
		{"named internal above named heap", MemoryUpdate{FreeHeap: ptr[int64](10), FreeInternal: ptr[int64](20)}, Memory{}, "free_internal 20 exceeds"},
		{"negative", MemoryUpdate{FreeHeap: ptr[int64](-1)}, Memory{}, "negative"},
		{"above RAM", MemoryUpdate{FreeHeap: ptr[int64](1 << 30)}, Memory{}, "RAM"},
		{"one-byte dip counts", MemoryUpdate{FreeHeap: ptr[int64](1), FreeInternal: ptr[int64](1), LargestBlock: ptr[int64](1)},
			Memory{FreeHeap: 1, FreeInternal: 1, LargestBlock: 1, MinFreeHeap: 1, MinFreeInternal: 1}, ""},
		{"and is remembered", MemoryUpdate{FreeHeap: ptr[int64](90000), FreeInternal: ptr[int64](80000), LargestBlock: ptr[int64](70000)},
			Memory{FreeHeap: 90000, FreeInternal: 80000, LargestBlock: 70000, MinFreeHeap: 1, MinFreeInternal: 1}, ""},
	}
	for _, st := range steps {
		before := s.Memory()
		got, err := s.SetMemory(st.u)
		if st.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), st.wantErr) {
				t.Fatalf("%s: error %v, want %q", st.name, err, st.wantErr)
			}
			if s.Memory() != before {
				t.Fatalf("%s: a refused update changed the figures", st.name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got != st.want || s.Memory() != st.want {
			t.Fatalf("%s: got %+v, want %+v", st.name, got, st.want)
		}
	}
}

func recv(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("event channel closed")
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return Event{}
}

// recvThrough reads events up to and including the first that last accepts, failing when it
// does not come within the guard of recv.
func recvThrough(t *testing.T, ch <-chan Event, what string, last func(Event) bool) []Event {
	t.Helper()
	var got []Event
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("event channel closed before %s (got %+v)", what, got)
			}
			got = append(got, ev)
			if last(ev) {
				return got
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s within 5s (got %+v)", what, got)
		}
	}
}

func noEvent(t *testing.T, ch <-chan Event) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("unexpected event %+v (iface %+v, station %+v)", ev, ev.Iface, ev.Station)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestIfaceTransitions(t *testing.T) {
	s, _ := LoadSim("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := s.Subscribe(ctx)
	for _, name := range []string{"eth", "thread"} {
		if ev := recv(t, ch); ev.Iface == nil || ev.Iface.Name != name || ev.Iface.Up {
			t.Fatalf("first events %+v: want the current %s state", ev, name)
		}
	}
	eth := func(up bool, ip string) IfState {
		return IfState{Name: "eth", Up: up, IP: ip, Netmask: "255.0.0.0", Gateway: "127.0.0.1"}
	}
	steps := []struct {
		name  string
		iface string
		u     IfUpdate
		err   string
		event bool
		want  IfState
	}{
		{"up", "eth", IfUpdate{Up: ptr(true)}, "", true, eth(true, "127.0.0.1")},
		{"up again: no change", "eth", IfUpdate{Up: ptr(true)}, "", false, eth(true, "127.0.0.1")},
		{"address change", "eth", IfUpdate{IP: ptr("127.0.0.9")}, "", true, eth(true, "127.0.0.9")},
		{"down keeps the address", "eth", IfUpdate{Up: ptr(false)}, "", true, eth(false, "127.0.0.9")},
		{"bad address refused", "eth", IfUpdate{IP: ptr("300.0.0.1")}, "eth: ip", false, eth(false, "127.0.0.9")},
		{"bad netmask refused", "eth", IfUpdate{Netmask: ptr("255.0.255.0")}, "netmask", false, eth(false, "127.0.0.9")},
		{"unknown interface", "lte", IfUpdate{Up: ptr(true)}, `iface "lte"`, false, eth(false, "127.0.0.9")},
		{"thread up", "thread", IfUpdate{Up: ptr(true), IP: ptr("127.0.0.3")}, "", true,
			IfState{Name: "thread", Up: true, IP: "127.0.0.3", Netmask: "255.0.0.0", Gateway: "127.0.0.1"}},
	}
	for _, st := range steps {
		_, err := s.SetIface(st.iface, st.u)
		if st.err != "" {
			if err == nil || !strings.Contains(err.Error(), st.err) {
				t.Fatalf("%s: error %v, want %q", st.name, err, st.err)
			}
		} else if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		got := s.Eth()
		if st.want.Name == "thread" {
			got = s.Thread()
		}
		if got != st.want {
			t.Fatalf("%s: %+v, want %+v", st.name, got, st.want)
		}
		if st.event {
			if ev := recv(t, ch); ev.Iface == nil || *ev.Iface != st.want {
				t.Fatalf("%s: event %+v", st.name, ev.Iface)
			}
		} else {
			noEvent(t, ch)
		}
	}
}

func TestSlowSubscriberEndsWithLatestState(t *testing.T) {
	s, _ := LoadSim("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := s.Subscribe(ctx)
	// Nobody reads while the board changes many times: the board must not block.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			_, _ = s.SetIface("eth", IfUpdate{Up: ptr(i%2 == 0)})
			if i == 500 {
				_ = s.Press(30)
			}
		}
		_, _ = s.SetIface("eth", IfUpdate{IP: ptr("127.0.0.77"), Up: ptr(true)})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the board blocked on a subscriber that does not read")
	}
	// The final state is the last event queued: read up to it, however late the subscriber's
	// goroutine hands it over, then nothing may follow.
	got := recvThrough(t, ch, "the latest eth state", func(ev Event) bool {
		return ev.Iface != nil && ev.Iface.Name == "eth" && ev.Iface.Up && ev.Iface.IP == "127.0.0.77"
	})
	noEvent(t, ch)
	if len(got) > 4 {
		t.Fatalf("%d events delivered: intermediate interface states should have been dropped", len(got))
	}
	presence := 0
	for _, ev := range got {
		if ev.Presence == 30 {
			presence++
		}
	}
	if presence != 1 {
		t.Fatalf("presence event delivered %d times: %+v", presence, got)
	}
}

func TestPresenceQueueBounded(t *testing.T) {
	s, _ := LoadSim("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := s.Subscribe(ctx)
	for i := 1; i <= presenceQueue+5; i++ {
		if err := s.Press(i); err != nil {
			t.Fatal(err)
		}
	}
	// The newest press is the last event queued: read up to it, then nothing may follow.
	var presses []int
	for _, ev := range recvThrough(t, ch, "the newest press", func(ev Event) bool { return ev.Presence == presenceQueue+5 }) {
		if ev.Presence > 0 {
			presses = append(presses, ev.Presence)
		}
	}
	noEvent(t, ch)
	// The reader goroutine may already hold one event in hand, so up to one more than the
	// queue arrives; the newest press always does.
	if len(presses) < presenceQueue || len(presses) > presenceQueue+1 || presses[len(presses)-1] != presenceQueue+5 {
		t.Fatalf("presses delivered %v", presses)
	}
}

func TestPress(t *testing.T) {
	s, _ := LoadSim("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := s.Subscribe(ctx)
	recv(t, ch) // current eth
	recv(t, ch) // current thread
	for _, c := range []struct {
		in, want int
		ok       bool
	}{{0, DefaultPresenceSeconds, true}, {1, 1, true}, {MaxPresenceSeconds, MaxPresenceSeconds, true}, {-1, 0, false}, {MaxPresenceSeconds + 1, 0, false}} {
		err := s.Press(c.in)
		if !c.ok {
			if err == nil {
				t.Fatalf("Press(%d) accepted", c.in)
			}
			noEvent(t, ch)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev := recv(t, ch); ev.Presence != c.want {
			t.Fatalf("Press(%d): event %+v", c.in, ev)
		}
	}
}

func TestSubscribeEndsWithContext(t *testing.T) {
	s, _ := LoadSim("")
	ctx, cancel := context.WithCancel(context.Background())
	ch := s.Subscribe(ctx)
	cancel()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				s.mu.Lock()
				n := len(s.subs)
				s.mu.Unlock()
				if n != 0 {
					t.Fatalf("%d subscribers left after their context ended", n)
				}
				return
			}
		case <-deadline:
			t.Fatal("channel not closed after the context ended")
		}
	}
}

func TestStateJSON(t *testing.T) {
	s, _ := LoadSim("")
	b, err := json.Marshal(s.State())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	eth := m["eth"].(map[string]any)
	wifi := m["wifi"].(map[string]any)
	aps := wifi["aps"].([]any)
	if m["id"] != "abcd" || eth["up"] != false || eth["ip"] != "127.0.0.1" || len(aps) != 1 ||
		aps[0].(map[string]any)["ssid"] != "Marina" || wifi["station"].(map[string]any)["state"] != "idle" {
		t.Fatalf("state %s", b)
	}
}

func FuzzParseFile(f *testing.F) {
	b, _ := os.ReadFile("board.example.json")
	f.Add(b)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"eth":{"up":true,"ip":"127.0.0.2"},"thread":{"up":true}}`))
	f.Add([]byte(`{"wifi":{"station_ip":"127.0.0.3","aps":[{"ssid":"a","psk":"12345678","bssid":"02:00:00:00:00:01","rssi":-95,"fault":"drop"},{"ssid":"b","auth":"owe"}]}}`))
	f.Add([]byte(`{"wifi":{"aps":null},"portal_ip":"127.4.0.1"}`))
	f.Add([]byte(`{"memory":{"free_heap":1,"free_internal":1,"largest_block":1}}`))
	f.Add([]byte(`{"features":["wifi","wifi"]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := ParseFile(b)
		if err != nil {
			return
		}
		// Whatever parses builds a board whose state is consistent.
		s, err := NewSim(file)
		if err != nil {
			t.Fatalf("parsed file refused by NewSim: %v", err)
		}
		m := s.Memory()
		if m.LargestBlock > m.FreeInternal || m.FreeInternal > m.FreeHeap {
			t.Fatalf("inconsistent memory %+v", m)
		}
		// Every AP in range is one the station can be asked to join without a panic, and a
		// scan lists each once.
		w := s.WiFi()
		for _, ap := range w.APs {
			s.Connect(StaRequest{SSID: ap.SSID, PSK: ap.PSK, DHCP: true})
		}
		if res, err := s.Scan(); err == nil && len(res) != len(w.APs) {
			t.Fatalf("scan %d results for %d APs", len(res), len(w.APs))
		}
	})
}
