package protocomm

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"
)

// Endpoint names, as the phone apps and esp_prov address them (GATT characteristic user
// descriptions; HTTP paths under the portal's root).
const (
	EPVersion = "proto-ver"
	EPSession = "prov-session"
	EPConfig  = "prov-config"
	EPScan    = "prov-scan"
	EPCtrl    = "prov-ctrl"
)

// Exchange sends one request body to an endpoint over a transport and returns the answer.
type Exchange func(endpoint string, body []byte) ([]byte, error)

// Endpoints lists them in the order the GATT service carries them.
var Endpoints = []string{EPScan, EPSession, EPConfig, EPVersion, EPCtrl}

// Version is the provisioning protocol version that proto-ver announces.
const Version = "v1.1"

// StationState is the station as prov-config's get-status reports it.
type StationState struct {
	State      StaState
	FailReason FailReason // with ConnectionFailed
	IP         string     // with Connected
	SSID       string
	BSSID      []byte
	Channel    int32
	Auth       AuthMode
}

// AP is one scan result.
type AP struct {
	SSID    string
	BSSID   []byte
	Channel uint32
	RSSI    int32
	Auth    AuthMode
}

// Device is what the endpoints need from the provisioning manager.
type Device interface {
	// SetConfig stores the credentials received (not applied yet); an error refuses them.
	SetConfig(ssid, passphrase string, bssid []byte, channel int32) error
	// ApplyConfig starts joining the network last set.
	ApplyConfig() error
	// Status is the station as the client reads it; the read itself is news to the manager
	// (a final state read lets provisioning stop).
	Status() StationState
	// Scan runs a scan and returns its results.
	Scan() ([]AP, error)
	// Reset forgets the credentials received and returns to waiting for new ones.
	Reset() error
	// Reprov starts provisioning over (after a successful one).
	Reprov() error
}

// Handler answers the endpoints of one provisioning service. Its methods are safe for
// concurrent use across sessions; one session's exchanges are serialised by its transport.
type Handler struct {
	Security int
	PoP      []byte
	Device   Device

	refused atomic.Uint64
	mu      sync.Mutex // guards scan
	scan    scanCache
}

type scanCache struct {
	results []AP
	done    bool
}

// Refused counts the exchanges refused (malformed, out of order, wrong PoP, no session).
func (h *Handler) Refused() uint64 { return h.refused.Load() }

// NewSession starts the session a new connection owns.
func (h *Handler) NewSession() *Session { return NewSession(h.Security, h.PoP, nil) }

// Handle answers one request body on one endpoint. An error is a refusal: the transport
// answers it as its protocol refuses (and the session is over when it is a session error).
func (h *Handler) Handle(s *Session, endpoint string, body []byte) ([]byte, error) {
	out, err := h.handle(s, endpoint, body)
	if err != nil {
		h.refused.Add(1)
	}
	return out, err
}

func (h *Handler) handle(s *Session, endpoint string, body []byte) ([]byte, error) {
	switch endpoint {
	case EPVersion:
		return h.version()
	case EPSession:
		return s.Handshake(body)
	case EPConfig, EPScan, EPCtrl:
	default:
		return nil, fmt.Errorf("%w: unknown endpoint %q", ErrProto, endpoint)
	}
	plain, err := s.Crypt(body)
	if err != nil {
		return nil, err
	}
	var resp []byte
	switch endpoint {
	case EPConfig:
		resp, err = h.config(plain)
	case EPScan:
		h.mu.Lock()
		resp, err = h.scanEP(plain)
		h.mu.Unlock()
	default:
		resp, err = h.ctrl(plain)
	}
	if err != nil {
		// The keystream moved on for the request: the session cannot continue.
		s.reset()
		return nil, err
	}
	return s.Crypt(resp)
}

// version is proto-ver's JSON, as the wifi_provisioning manager writes it: the capabilities
// tell the apps whether to ask for a PoP and that scanning is offered.
func (h *Handler) version() ([]byte, error) {
	caps := []string{"wifi_scan"}
	switch {
	case h.Security == Sec0:
		caps = append(caps, "no_sec")
	case len(h.PoP) == 0:
		caps = append(caps, "no_pop")
	}
	doc := map[string]any{"prov": map[string]any{"ver": Version, "sec_ver": h.Security, "cap": caps}}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("protocomm: version: %w", err)
	}
	return b, nil
}

// config answers a WiFiConfigPayload.
func (h *Handler) config(plain []byte) ([]byte, error) {
	msgType, member, sub, err := payload(plain, fCmdGetStatus, fRespGetStatus, fCmdSetConfig, fRespSetConfig, fCmdApplyConfig, fRespApplyCfg)
	if err != nil {
		return nil, fmt.Errorf("%w: wifi config: %v", ErrProto, err)
	}
	// RespSetConfig and RespApplyConfig: status 1.
	reply := func(t uint64, member protowire.Number, resp enc) []byte {
		return enc(nil).varint(fMsg, t).msg(member, resp)
	}
	switch {
	case msgType == cfgCmdGetStatus && member == fCmdGetStatus:
		return reply(cfgRespGetStatus, fRespGetStatus, statusMsg(h.Device.Status())), nil
	case msgType == cfgCmdSetConfig && member == fCmdSetConfig:
		// CmdSetConfig: ssid 1, passphrase 2, bssid 3, channel 4.
		st := StatusSuccess
		if err := h.Device.SetConfig(string(sub.bytes(1)), string(sub.bytes(2)), sub.bytes(3), int32(sub.varint(4))); err != nil {
			st = StatusInvalidArgument
		}
		return reply(cfgRespSetConfig, fRespSetConfig, enc(nil).varint(1, i32(st))), nil
	case msgType == cfgCmdApplyConfig && member == fCmdApplyConfig:
		st := StatusSuccess
		if err := h.Device.ApplyConfig(); err != nil {
			st = StatusInternalError
		}
		return reply(cfgRespApplyCfg, fRespApplyCfg, enc(nil).varint(1, i32(st))), nil
	}
	return nil, fmt.Errorf("%w: wifi config message %d", ErrProto, int32(msgType))
}

// statusMsg is a RespGetStatus: status 1, sta_state 2, and the oneof fail_reason 10 or
// connected 11 (WifiConnectedState: ip4_addr 1, auth_mode 2, ssid 3, bssid 4, channel 5).
func statusMsg(st StationState) enc {
	r := enc(nil).varint(1, i32(StatusSuccess)).varint(2, i32(st.State))
	switch st.State {
	case StaConnected:
		r = r.msg(11, enc(nil).bytes(1, []byte(st.IP)).varint(2, i32(st.Auth)).bytes(3, []byte(st.SSID)).
			bytes(4, st.BSSID).varint(5, i32(st.Channel)))
	case StaConnectionFailed:
		r = r.member(10, i32(st.FailReason))
	}
	return r
}

// scanEP answers a WiFiScanPayload.
func (h *Handler) scanEP(plain []byte) ([]byte, error) {
	msgType, member, sub, err := payload(plain, fCmdScanStart, fRespScanStart, fCmdScanStatus, fRespScanStatus, fCmdScanResult, fRespScanResult)
	if err != nil {
		return nil, fmt.Errorf("%w: wifi scan: %v", ErrProto, err)
	}
	status := StatusSuccess
	var respType uint64
	var respMember protowire.Number
	var resp enc
	switch {
	case msgType == scanCmdStart && member == fCmdScanStart:
		res, err := h.Device.Scan()
		h.scan = scanCache{results: res, done: err == nil}
		if err != nil {
			status = StatusInternalError
		}
		respType, respMember = scanRespStart, fRespScanStart
	case msgType == scanCmdStatus && member == fCmdScanStatus:
		// RespScanStatus: scan_finished 1, result_count 2.
		done := uint64(0)
		if h.scan.done {
			done = 1
		}
		respType, respMember = scanRespStatus, fRespScanStatus
		resp = enc(nil).varint(1, done).varint(2, uint64(len(h.scan.results)))
	case msgType == scanCmdResult && member == fCmdScanResult:
		// CmdScanResult: start_index 1, count 2 (uint32).
		start, n := uint64(uint32(sub.varint(1))), uint64(uint32(sub.varint(2)))
		if start+n > uint64(len(h.scan.results)) {
			status = StatusInvalidArgument
			start, n = 0, 0
		}
		// RespScanResult: entries 1, each a WiFiScanResult: ssid 1, channel 2, rssi 3,
		// bssid 4, auth 5.
		for _, ap := range h.scan.results[start : start+n] {
			resp = resp.msg(1, enc(nil).bytes(1, []byte(ap.SSID)).varint(2, uint64(ap.Channel)).varint(3, i32(ap.RSSI)).
				bytes(4, ap.BSSID).varint(5, i32(ap.Auth)))
		}
		respType, respMember = scanRespResult, fRespScanResult
	default:
		return nil, fmt.Errorf("%w: wifi scan message %d", ErrProto, int32(msgType))
	}
	return enc(nil).varint(fMsg, respType).varint(fStatus2, i32(status)).msg(respMember, resp), nil
}

// ctrl answers a WiFiCtrlPayload.
func (h *Handler) ctrl(plain []byte) ([]byte, error) {
	msgType, member, _, err := payload(plain, fCmdCtrlReset, fRespCtrlReset, fCmdCtrlReprov, fRespCtrlReprov)
	if err != nil {
		return nil, fmt.Errorf("%w: wifi ctrl: %v", ErrProto, err)
	}
	var respType uint64
	var respMember protowire.Number
	switch {
	case msgType == ctrlCmdReset && member == fCmdCtrlReset:
		err = h.Device.Reset()
		respType, respMember = ctrlRespReset, fRespCtrlReset
	case msgType == ctrlCmdReprov && member == fCmdCtrlReprov:
		err = h.Device.Reprov()
		respType, respMember = ctrlRespReprov, fRespCtrlReprov
	default:
		return nil, fmt.Errorf("%w: wifi ctrl message %d", ErrProto, int32(msgType))
	}
	status := StatusSuccess
	if err != nil {
		status = StatusInternalError
		if errors.Is(err, ErrState) {
			status = StatusInvalidArgument
		}
	}
	return enc(nil).varint(fMsg, respType).varint(fStatus2, i32(status)).msg(respMember, nil), nil
}

// ErrState is a Device refusal of a command that is not possible now (a reset before any
// credentials, a reprovision while provisioning runs).
var ErrState = errors.New("protocomm: not possible in this state")
