package protocomm

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	pb "devhost/plugins/ble/provpb"
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

// Endpoints lists them in the order the GATT service carries them.
var Endpoints = []string{EPScan, EPSession, EPConfig, EPVersion, EPCtrl}

// Version is the provisioning protocol version that proto-ver announces.
const Version = "v1.1"

// StationState is the station as prov-config's get-status reports it.
type StationState struct {
	State      pb.WifiStationState
	FailReason pb.WifiConnectFailedReason // with ConnectionFailed
	IP         string                     // with Connected
	SSID       string
	BSSID      []byte
	Channel    int32
	Auth       pb.WifiAuthMode
}

// AP is one scan result.
type AP struct {
	SSID    string
	BSSID   []byte
	Channel uint32
	RSSI    int32
	Auth    pb.WifiAuthMode
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
	var resp proto.Message
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
	b, err := marshal(resp)
	if err != nil {
		return nil, err
	}
	return s.Crypt(b)
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

func (h *Handler) config(plain []byte) (proto.Message, error) {
	var req pb.WiFiConfigPayload
	if err := proto.Unmarshal(plain, &req); err != nil {
		return nil, fmt.Errorf("%w: wifi config: %v", ErrProto, err)
	}
	switch {
	case req.GetMsg() == pb.WiFiConfigMsgType_TypeCmdGetStatus && req.GetCmdGetStatus() != nil:
		return &pb.WiFiConfigPayload{Msg: pb.WiFiConfigMsgType_TypeRespGetStatus,
			Payload: &pb.WiFiConfigPayload_RespGetStatus{RespGetStatus: statusMsg(h.Device.Status())}}, nil
	case req.GetMsg() == pb.WiFiConfigMsgType_TypeCmdSetConfig && req.GetCmdSetConfig() != nil:
		c := req.GetCmdSetConfig()
		st := pb.Status_Success
		if err := h.Device.SetConfig(string(c.GetSsid()), string(c.GetPassphrase()), c.GetBssid(), c.GetChannel()); err != nil {
			st = pb.Status_InvalidArgument
		}
		return &pb.WiFiConfigPayload{Msg: pb.WiFiConfigMsgType_TypeRespSetConfig,
			Payload: &pb.WiFiConfigPayload_RespSetConfig{RespSetConfig: &pb.RespSetConfig{Status: st}}}, nil
	case req.GetMsg() == pb.WiFiConfigMsgType_TypeCmdApplyConfig && req.GetCmdApplyConfig() != nil:
		st := pb.Status_Success
		if err := h.Device.ApplyConfig(); err != nil {
			st = pb.Status_InternalError
		}
		return &pb.WiFiConfigPayload{Msg: pb.WiFiConfigMsgType_TypeRespApplyConfig,
			Payload: &pb.WiFiConfigPayload_RespApplyConfig{RespApplyConfig: &pb.RespApplyConfig{Status: st}}}, nil
	}
	return nil, fmt.Errorf("%w: wifi config message %v", ErrProto, req.GetMsg())
}

func statusMsg(st StationState) *pb.RespGetStatus {
	r := &pb.RespGetStatus{Status: pb.Status_Success, StaState: st.State}
	switch st.State {
	case pb.WifiStationState_Connected:
		r.State = &pb.RespGetStatus_Connected{Connected: &pb.WifiConnectedState{Ip4Addr: st.IP, AuthMode: st.Auth,
			Ssid: []byte(st.SSID), Bssid: st.BSSID, Channel: st.Channel}}
	case pb.WifiStationState_ConnectionFailed:
		r.State = &pb.RespGetStatus_FailReason{FailReason: st.FailReason}
	}
	return r
}

func (h *Handler) scanEP(plain []byte) (proto.Message, error) {
	var req pb.WiFiScanPayload
	if err := proto.Unmarshal(plain, &req); err != nil {
		return nil, fmt.Errorf("%w: wifi scan: %v", ErrProto, err)
	}
	resp := &pb.WiFiScanPayload{Status: pb.Status_Success}
	switch {
	case req.GetMsg() == pb.WiFiScanMsgType_TypeCmdScanStart && req.GetCmdScanStart() != nil:
		res, err := h.Device.Scan()
		h.scan = scanCache{results: res, done: err == nil}
		if err != nil {
			resp.Status = pb.Status_InternalError
		}
		resp.Msg, resp.Payload = pb.WiFiScanMsgType_TypeRespScanStart, &pb.WiFiScanPayload_RespScanStart{RespScanStart: &pb.RespScanStart{}}
	case req.GetMsg() == pb.WiFiScanMsgType_TypeCmdScanStatus && req.GetCmdScanStatus() != nil:
		resp.Msg, resp.Payload = pb.WiFiScanMsgType_TypeRespScanStatus, &pb.WiFiScanPayload_RespScanStatus{RespScanStatus: &pb.RespScanStatus{
			ScanFinished: h.scan.done, ResultCount: uint32(len(h.scan.results))}}
	case req.GetMsg() == pb.WiFiScanMsgType_TypeCmdScanResult && req.GetCmdScanResult() != nil:
		c := req.GetCmdScanResult()
		start, n := uint64(c.GetStartIndex()), uint64(c.GetCount())
		if start+n > uint64(len(h.scan.results)) {
			resp.Status = pb.Status_InvalidArgument
			start, n = 0, 0
		}
		out := &pb.RespScanResult{}
		for _, ap := range h.scan.results[start : start+n] {
			out.Entries = append(out.Entries, &pb.WiFiScanResult{Ssid: []byte(ap.SSID), Channel: ap.Channel, Rssi: ap.RSSI, Bssid: ap.BSSID, Auth: ap.Auth})
		}
		resp.Msg, resp.Payload = pb.WiFiScanMsgType_TypeRespScanResult, &pb.WiFiScanPayload_RespScanResult{RespScanResult: out}
	default:
		return nil, fmt.Errorf("%w: wifi scan message %v", ErrProto, req.GetMsg())
	}
	return resp, nil
}

func (h *Handler) ctrl(plain []byte) (proto.Message, error) {
	var req pb.WiFiCtrlPayload
	if err := proto.Unmarshal(plain, &req); err != nil {
		return nil, fmt.Errorf("%w: wifi ctrl: %v", ErrProto, err)
	}
	resp := &pb.WiFiCtrlPayload{Status: pb.Status_Success}
	var err error
	switch {
	case req.GetMsg() == pb.WiFiCtrlMsgType_TypeCmdCtrlReset && req.GetCmdCtrlReset() != nil:
		err = h.Device.Reset()
		resp.Msg, resp.Payload = pb.WiFiCtrlMsgType_TypeRespCtrlReset, &pb.WiFiCtrlPayload_RespCtrlReset{RespCtrlReset: &pb.RespCtrlReset{}}
	case req.GetMsg() == pb.WiFiCtrlMsgType_TypeCmdCtrlReprov && req.GetCmdCtrlReprov() != nil:
		err = h.Device.Reprov()
		resp.Msg, resp.Payload = pb.WiFiCtrlMsgType_TypeRespCtrlReprov, &pb.WiFiCtrlPayload_RespCtrlReprov{RespCtrlReprov: &pb.RespCtrlReprov{}}
	default:
		return nil, fmt.Errorf("%w: wifi ctrl message %v", ErrProto, req.GetMsg())
	}
	if err != nil {
		resp.Status = pb.Status_InternalError
		if errors.Is(err, ErrState) {
			resp.Status = pb.Status_InvalidArgument
		}
	}
	return resp, nil
}

// ErrState is a Device refusal of a command that is not possible now (a reset before any
// credentials, a reprovision while provisioning runs).
var ErrState = errors.New("protocomm: not possible in this state")
