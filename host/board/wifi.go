package board

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"unicode/utf8"
)

// AuthModes are the spec's scan `auth` values, in its order.
var AuthModes = []string{"open", "wep", "wpa", "wpa2", "wpa/wpa2", "wpa2-enterprise", "wpa3", "wpa2/wpa3", "wapi", "owe", "other"}

// Faults an access point can simulate.
const (
	FaultNone          = "none"
	FaultWrongPassword = "wrong_password" // every attempt fails with 202
	FaultNoAnswer      = "no_answer"      // the AP never answers: the station's connect timer runs out
	FaultNoIP          = "no_ip"          // associates, no DHCP answer; on a connected station: IP lost
	FaultDrop          = "drop"           // drops the connected station once (200), then normal
)

var faults = []string{FaultNone, FaultWrongPassword, FaultNoAnswer, FaultNoIP, FaultDrop}

// Reason codes the simulated driver reports (the spec's table).
const (
	ReasonLostBeacon    = 200
	ReasonNotInRange    = 201
	ReasonWrongPassword = 202
	ReasonAuthTimeout   = 204
)

// WeakRSSI is the signal at or below which authentication times out (reason 204).
const WeakRSSI = -90

// Defaults of the simulated radio.
const (
	DefaultChannel   = 6
	DefaultAPRSSI    = -60
	DefaultStationIP = "127.0.0.1"
	DefaultSSID      = "Marina"
	DefaultPSK       = "mooring-line-7"
)

// AP is an access point in range of the simulated radio.
type AP struct {
	SSID    string `json:"ssid"`
	BSSID   string `json:"bssid"`
	Channel int    `json:"channel"`
	RSSI    int    `json:"rssi"`
	Auth    string `json:"auth"`
	PSK     string `json:"psk"`
	Fault   string `json:"fault"`
}

// ScanResult is one access point as a scan reports it.
type ScanResult struct {
	SSID    string `json:"ssid"`
	BSSID   string `json:"bssid"`
	RSSI    int    `json:"rssi"`
	Channel int    `json:"channel"`
	Auth    string `json:"auth"`
}

// ErrScanBusy is a scan the driver cannot start now.
var ErrScanBusy = errors.New("board: the radio cannot scan now")

// StaRequest asks the station to join a network.
type StaRequest struct {
	SSID  string
	PSK   string // empty: an open network
	BSSID string // pins one access point; empty: the strongest with the SSID
	DHCP  bool   // ask the AP's DHCP server for an address once associated
}

// Station event kinds.
const (
	StaConnected    = "connected"    // associated with an AP
	StaDisconnected = "disconnected" // left or refused, with a reason
	StaGotIP        = "got_ip"       // the AP's DHCP server gave an address
	StaLostIP       = "lost_ip"      // the address went away while associated
	StaRSSI         = "rssi"         // the signal of the AP the station is on changed
)

// StaEvent is something the station did. Attempt is the Connect call it belongs to.
type StaEvent struct {
	Attempt uint64
	Kind    string
	SSID    string
	BSSID   string
	Channel int
	RSSI    int
	Reason  int
	IP      string
	Netmask string
	Gateway string
}

// FileWiFi is the simulated radio in the board file.
type FileWiFi struct {
	// StationIP, Netmask and Gateway are what an AP's DHCP server gives the station: a
	// loopback address so traffic to the device over the station stays real.
	StationIP string `json:"station_ip"`
	Netmask   string `json:"netmask"`
	Gateway   string `json:"gateway"`
	// NTPServer is the NTP server the access points' DHCP offers with the station's lease
	// ("" none); a station with a static address gets none (see Sim.NTPServer).
	NTPServer string `json:"ntp_server,omitempty"`
	ScanBusy  bool   `json:"scan_busy"`
	APs       []AP   `json:"aps"`
}

// APUpdate adds or replaces an access point (POST /wifi/ap). Empty members take defaults:
// bssid derived from the SSID, channel 6, rssi -60, auth wpa2 with a psk and open without.
type APUpdate struct {
	SSID    string `json:"ssid"`
	PSK     string `json:"psk,omitempty"`
	Auth    string `json:"auth,omitempty"`
	BSSID   string `json:"bssid,omitempty"`
	Channel int    `json:"channel,omitempty"`
	RSSI    *int   `json:"rssi,omitempty"`
}

// WiFiState is the radio as the control channel shows it: the board file's members, as they
// are now, and the station.
type WiFiState struct {
	FileWiFi
	Station StaSummary `json:"station"`
}

// StaSummary is where the simulated station is.
type StaSummary struct {
	State string `json:"state"` // idle, connecting, associated, got_ip
	SSID  string `json:"ssid,omitempty"`
	BSSID string `json:"bssid,omitempty"`
}

// station is the simulated driver's station side.
type station struct {
	attempt uint64
	state   string // idle, connecting, associated, got_ip
	req     StaRequest
	bssid   string
}

// DefaultBSSID is the BSSID an AP gets when none is given: locally administered, derived
// from the SSID so it is the same on every run.
func DefaultBSSID(ssid string) string {
	h := sha256.Sum256([]byte(ssid))
	mac := net.HardwareAddr{0x02, h[0], h[1], h[2], h[3], h[4]}
	return mac.String()
}

// checkAP checks and completes an access point; errors name the member.
func checkAP(ap *AP) error {
	if ap.SSID == "" || len(ap.SSID) > 32 || !utf8.ValidString(ap.SSID) {
		return fmt.Errorf("ssid %q: want 1..32 bytes of UTF-8", ap.SSID)
	}
	if ap.BSSID == "" {
		ap.BSSID = DefaultBSSID(ap.SSID)
	}
	mac, err := net.ParseMAC(ap.BSSID)
	if err != nil || len(mac) != 6 {
		return fmt.Errorf("bssid %q: want aa:bb:cc:dd:ee:ff", ap.BSSID)
	}
	ap.BSSID = mac.String()
	if ap.Channel == 0 {
		ap.Channel = DefaultChannel
	}
	if ap.Channel < 1 || ap.Channel > 196 {
		return fmt.Errorf("channel %d: want 1..196", ap.Channel)
	}
	if ap.RSSI < -127 || ap.RSSI > 0 {
		return fmt.Errorf("rssi %d: want -127..0 dBm", ap.RSSI)
	}
	if ap.Auth == "" {
		ap.Auth = "open"
		if ap.PSK != "" {
			ap.Auth = "wpa2"
		}
	}
	if !slices.Contains(AuthModes, ap.Auth) {
		return fmt.Errorf("auth %q: want one of %s", ap.Auth, strings.Join(AuthModes, " "))
	}
	switch {
	case (ap.Auth == "open" || ap.Auth == "owe") && ap.PSK != "":
		return fmt.Errorf("psk: an %s network has no password", ap.Auth)
	case ap.Auth != "open" && ap.Auth != "owe" && ap.PSK == "":
		return fmt.Errorf("psk: a %s network needs a password", ap.Auth)
	case ap.Auth != "open" && ap.Auth != "owe" && ap.Auth != "wep" && (len(ap.PSK) < 8 || len(ap.PSK) > 63):
		return fmt.Errorf("psk: %d characters; a %s password has 8..63", len(ap.PSK), ap.Auth)
	}
	if ap.Fault == "" {
		ap.Fault = FaultNone
	}
	if !slices.Contains(faults, ap.Fault) {
		return fmt.Errorf("fault %q: want one of %s", ap.Fault, strings.Join(faults, " "))
	}
	return nil
}

func (w *FileWiFi) check() error {
	if err := checkAddress(w.StationIP, w.Netmask, w.Gateway); err != nil {
		if strings.HasPrefix(err.Error(), "ip ") {
			return fmt.Errorf("station_%w", err)
		}
		return err
	}
	if err := checkNTPServer(w.NTPServer); err != nil {
		return err
	}
	if ip := net.ParseIP(w.StationIP); !ip.IsLoopback() {
		return fmt.Errorf("station_ip %q: the simulated station needs a loopback address", w.StationIP)
	}
	if w.APs == nil {
		w.APs = []AP{}
	}
	for i := range w.APs {
		if err := checkAP(&w.APs[i]); err != nil {
			return fmt.Errorf("aps[%d].%w", i, err)
		}
		for _, o := range w.APs[:i] {
			if o.BSSID == w.APs[i].BSSID {
				return fmt.Errorf("aps[%d].bssid %s: listed twice", i, o.BSSID)
			}
		}
	}
	return nil
}

// WiFi is the radio's state.
func (s *Sim) WiFi() WiFiState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wifiLocked()
}

func (s *Sim) wifiLocked() WiFiState {
	w := WiFiState{FileWiFi: s.wifi, Station: StaSummary{State: s.sta.state}}
	w.APs = slices.Clone(s.wifi.APs)
	if s.sta.state != "idle" {
		w.Station.SSID = s.sta.req.SSID
		w.Station.BSSID = s.sta.bssid
	}
	return w
}

// AddAP adds an access point, or replaces the one with the same BSSID. Replacing the AP the
// station is on with another RSSI is a signal change the station hears.
func (s *Sim) AddAP(u APUpdate) (AP, error) {
	ap := AP{SSID: u.SSID, PSK: u.PSK, Auth: u.Auth, BSSID: u.BSSID, Channel: u.Channel, RSSI: DefaultAPRSSI}
	if u.RSSI != nil {
		ap.RSSI = *u.RSSI
	}
	if err := checkAP(&ap); err != nil {
		return AP{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.IndexFunc(s.wifi.APs, func(o AP) bool { return o.BSSID == ap.BSSID }); i >= 0 {
		old := s.wifi.APs[i]
		s.wifi.APs[i] = ap
		if (s.sta.state == "associated" || s.sta.state == "got_ip") && s.sta.bssid == ap.BSSID && old.RSSI != ap.RSSI {
			s.publishLocked(Event{Station: &StaEvent{Attempt: s.sta.attempt, Kind: StaRSSI, SSID: s.sta.req.SSID, BSSID: ap.BSSID, RSSI: ap.RSSI}})
		}
	} else {
		s.wifi.APs = append(s.wifi.APs, ap)
	}
	return ap, nil
}

// RemoveAP takes every access point with the SSID out of range. A station on one of them
// loses it (reason 200).
func (s *Sim) RemoveAP(ssid string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.wifi.APs)
	s.wifi.APs = slices.DeleteFunc(s.wifi.APs, func(a AP) bool { return a.SSID == ssid })
	if len(s.wifi.APs) == n {
		return fmt.Errorf("ssid %q: no access point with this SSID is in range", ssid)
	}
	if s.sta.state != "idle" && s.sta.req.SSID == ssid {
		s.staDisconnectLocked(ReasonLostBeacon)
	}
	return nil
}

// SetFault sets the behaviour of every access point with the SSID. `drop` drops a station
// on it now, or the next one to get an address, once; `no_ip` on a station holding an
// address takes the address away.
func (s *Sim) SetFault(ssid, fault string) error {
	if !slices.Contains(faults, fault) {
		return fmt.Errorf("fault %q: want one of %s", fault, strings.Join(faults, " "))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	found := false
	for i := range s.wifi.APs {
		if s.wifi.APs[i].SSID == ssid {
			s.wifi.APs[i].Fault = fault
			found = true
		}
	}
	if !found {
		return fmt.Errorf("ssid %q: no access point with this SSID is in range", ssid)
	}
	if s.sta.req.SSID != ssid {
		return nil
	}
	switch {
	case fault == FaultDrop && s.sta.state == "got_ip":
		s.dropLocked()
	case fault == FaultNoIP && s.sta.state == "got_ip":
		s.sta.state = "associated"
		s.publishLocked(Event{Station: &StaEvent{Attempt: s.sta.attempt, Kind: StaLostIP, SSID: ssid, BSSID: s.sta.bssid}})
	}
	return nil
}

// SetScanBusy makes the radio refuse scans (as a driver busy connecting does) or accept them.
func (s *Sim) SetScanBusy(busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wifi.ScanBusy = busy
}

// Scan lists the access points in range, strongest first; ErrScanBusy while the radio is busy.
func (s *Sim) Scan() ([]ScanResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wifi.ScanBusy {
		return nil, ErrScanBusy
	}
	out := make([]ScanResult, 0, len(s.wifi.APs))
	for _, a := range s.wifi.APs {
		out = append(out, ScanResult{SSID: a.SSID, BSSID: a.BSSID, RSSI: a.RSSI, Channel: a.Channel, Auth: a.Auth})
	}
	slices.SortStableFunc(out, func(a, b ScanResult) int { return b.RSSI - a.RSSI })
	return out, nil
}

// Connect starts joining a network and returns the attempt's number; the outcome arrives as
// station events carrying it. A station already on a network leaves it first (no event). A
// password set refuses open and WEP access points, as a driver's auth threshold does.
func (s *Sim) Connect(req StaRequest) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sta.attempt++
	s.sta.req = req
	s.sta.state = "connecting"
	s.sta.bssid = ""
	ev := func(e StaEvent) {
		e.Attempt, e.SSID = s.sta.attempt, req.SSID
		s.publishLocked(Event{Station: &e})
	}
	fail := func(reason int) {
		s.sta.state = "idle"
		ev(StaEvent{Kind: StaDisconnected, Reason: reason})
	}
	var best *AP
	for i := range s.wifi.APs {
		a := &s.wifi.APs[i]
		if a.SSID != req.SSID || (req.BSSID != "" && !strings.EqualFold(a.BSSID, req.BSSID)) {
			continue
		}
		if req.PSK != "" && (a.Auth == "open" || a.Auth == "wep") {
			continue
		}
		if best == nil || a.RSSI > best.RSSI {
			best = a
		}
	}
	switch {
	case best == nil:
		fail(ReasonNotInRange)
		return s.sta.attempt
	case best.Fault == FaultNoAnswer:
		return s.sta.attempt
	case best.RSSI <= WeakRSSI:
		fail(ReasonAuthTimeout)
		return s.sta.attempt
	case best.Fault == FaultWrongPassword, best.Auth == "wpa2-enterprise", !pskMatches(*best, req.PSK):
		fail(ReasonWrongPassword)
		return s.sta.attempt
	}
	s.sta.state, s.sta.bssid = "associated", best.BSSID
	ev(StaEvent{Kind: StaConnected, BSSID: best.BSSID, Channel: best.Channel, RSSI: best.RSSI})
	if !req.DHCP {
		if best.Fault == FaultDrop {
			s.dropLocked()
		}
		return s.sta.attempt
	}
	if best.Fault == FaultNoIP {
		return s.sta.attempt
	}
	s.sta.state = "got_ip"
	ev(StaEvent{Kind: StaGotIP, BSSID: best.BSSID, IP: s.wifi.StationIP, Netmask: s.wifi.Netmask, Gateway: s.wifi.Gateway})
	if best.Fault == FaultDrop {
		s.dropLocked()
	}
	return s.sta.attempt
}

func pskMatches(a AP, psk string) bool {
	if a.Auth == "open" || a.Auth == "owe" {
		return true
	}
	return a.PSK == psk
}

// dropLocked drops the station once with reason 200; the AP then behaves normally.
func (s *Sim) dropLocked() {
	for i := range s.wifi.APs {
		if s.wifi.APs[i].BSSID == s.sta.bssid && s.wifi.APs[i].Fault == FaultDrop {
			s.wifi.APs[i].Fault = FaultNone
		}
	}
	s.staDisconnectLocked(ReasonLostBeacon)
}

func (s *Sim) staDisconnectLocked(reason int) {
	e := StaEvent{Attempt: s.sta.attempt, Kind: StaDisconnected, SSID: s.sta.req.SSID, BSSID: s.sta.bssid, Reason: reason}
	s.sta.state, s.sta.bssid = "idle", ""
	s.publishLocked(Event{Station: &e})
}

// Disconnect leaves the network the station is on or joining; no event follows.
func (s *Sim) Disconnect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sta.attempt++
	s.sta.state, s.sta.bssid = "idle", ""
}
