package protocomm_test

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"devhost/plugins/ble/protocomm"
	"devhost/plugins/ble/provclient"
	pb "devhost/plugins/ble/provpb"
)

// recorder is a Device that keeps the arguments of SetConfig.
type recorder struct {
	fakeDevice
	bssid   []byte
	channel int32
	calls   int
}

func (r *recorder) SetConfig(ssid, psk string, bssid []byte, channel int32) error {
	r.calls++
	r.bssid, r.channel = bytes.Clone(bssid), channel
	return r.fakeDevice.SetConfig(ssid, psk, bssid, channel)
}

// TestSetConfigReadAsProtobufReadsIt hands the device's reader encodings of CmdSetConfig
// that the generated code accepts, including the wire's corner cases (a field repeated, a
// oneof member given twice, unknown fields, a negative int32), and checks the device sees
// what the generated code decodes; encodings the generated code refuses must be refused.
func TestSetConfigReadAsProtobufReadsIt(t *testing.T) {
	marshal := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	set := func(c *pb.CmdSetConfig) []byte {
		return marshal(&pb.WiFiConfigPayload{Msg: pb.WiFiConfigMsgType_TypeCmdSetConfig,
			Payload: &pb.WiFiConfigPayload_CmdSetConfig{CmdSetConfig: c}})
	}
	full := set(&pb.CmdSetConfig{Ssid: []byte("boat"), Passphrase: []byte("secret12"), Bssid: []byte{1, 2, 3, 4, 5, 6}, Channel: -3})
	// The same field again later on the wire: the last value wins.
	again := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("dock"))
	twice := append(bytes.Clone(full), protowire.AppendBytes(protowire.AppendTag(nil, 12, protowire.BytesType), again)...)
	unknown := append(bytes.Clone(full), protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7)...)
	unknown = protowire.AppendFixed32(protowire.AppendTag(unknown, 98, protowire.Fixed32Type), 1)
	wrongType := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 2) // msg
	wrongType = protowire.AppendVarint(protowire.AppendTag(wrongType, 12, protowire.VarintType), 1)
	truncated := full[:len(full)-2]
	getStatus := marshal(&pb.WiFiConfigPayload{Msg: pb.WiFiConfigMsgType_TypeCmdSetConfig,
		Payload: &pb.WiFiConfigPayload_CmdGetStatus{CmdGetStatus: &pb.CmdGetStatus{}}})

	for _, tc := range []struct {
		name string
		body []byte
	}{{"full", full}, {"member twice", twice}, {"unknown fields", unknown}, {"wrong wire type", wrongType},
		{"truncated", truncated}, {"type and member disagree", getStatus}, {"empty", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			var want pb.WiFiConfigPayload
			protoErr := proto.Unmarshal(tc.body, &want)
			dev := &recorder{}
			h := &protocomm.Handler{Security: protocomm.Sec0, Device: dev}
			s := h.NewSession()
			if err := (&provclient.Client{X: direct(h, s), Sec: protocomm.Sec0}).Handshake(); err != nil {
				t.Fatal(err)
			}
			out, err := h.Handle(s, protocomm.EPConfig, tc.body)
			if protoErr != nil {
				if !errors.Is(err, protocomm.ErrProto) {
					t.Fatalf("protobuf refuses the body (%v), the device answered %x, %v", protoErr, out, err)
				}
				return
			}
			c := want.GetCmdSetConfig()
			if want.GetMsg() != pb.WiFiConfigMsgType_TypeCmdSetConfig || c == nil {
				if err == nil {
					t.Fatalf("not a set-config, answered %x", out)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ssid, psk := dev.stored()
			if dev.calls != 1 || ssid != string(c.GetSsid()) || psk != string(c.GetPassphrase()) ||
				!bytes.Equal(dev.bssid, c.GetBssid()) || dev.channel != c.GetChannel() {
				t.Fatalf("device got %q %q %x %d, protobuf reads %v", ssid, psk, dev.bssid, dev.channel, c)
			}
			var resp pb.WiFiConfigPayload
			if err := proto.Unmarshal(out, &resp); err != nil {
				t.Fatal(err)
			}
			wantResp := &pb.WiFiConfigPayload{Msg: pb.WiFiConfigMsgType_TypeRespSetConfig,
				Payload: &pb.WiFiConfigPayload_RespSetConfig{RespSetConfig: &pb.RespSetConfig{}}}
			if !proto.Equal(&resp, wantResp) {
				t.Fatalf("answer %v, want %v", &resp, wantResp)
			}
		})
	}
}

// TestAnswersAsProtobufReadsThem checks the device's encoding of every answer against the
// generated code's reading of it, member for member (a oneof member holding a zero value must
// still be present).
func TestAnswersAsProtobufReadsThem(t *testing.T) {
	dev := &fakeDevice{aps: []protocomm.AP{{SSID: "boat", BSSID: []byte{1, 2, 3, 4, 5, 6}, Channel: 11, RSSI: -71, Auth: protocomm.AuthWPA2WPA3PSK},
		{SSID: "open", Channel: 1}}}
	h := &protocomm.Handler{Security: protocomm.Sec0, Device: dev}
	s := h.NewSession()
	if err := (&provclient.Client{X: direct(h, s), Sec: protocomm.Sec0}).Handshake(); err != nil {
		t.Fatal(err)
	}
	call := func(ep string, req, resp proto.Message) {
		t.Helper()
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		out, err := h.Handle(s, ep, b)
		if err != nil {
			t.Fatal(err)
		}
		if err := proto.Unmarshal(out, resp); err != nil {
			t.Fatal(err)
		}
	}
	status := func(st protocomm.StationState, want *pb.RespGetStatus) {
		t.Helper()
		dev.mu.Lock()
		dev.state = st
		dev.mu.Unlock()
		var resp pb.WiFiConfigPayload
		call(protocomm.EPConfig, &pb.WiFiConfigPayload{Msg: pb.WiFiConfigMsgType_TypeCmdGetStatus,
			Payload: &pb.WiFiConfigPayload_CmdGetStatus{CmdGetStatus: &pb.CmdGetStatus{}}}, &resp)
		w := &pb.WiFiConfigPayload{Msg: pb.WiFiConfigMsgType_TypeRespGetStatus, Payload: &pb.WiFiConfigPayload_RespGetStatus{RespGetStatus: want}}
		if !proto.Equal(&resp, w) {
			t.Fatalf("status %v, want %v", &resp, w)
		}
	}
	status(protocomm.StationState{State: protocomm.StaConnectionFailed, FailReason: protocomm.FailAuthError},
		&pb.RespGetStatus{StaState: pb.WifiStationState_ConnectionFailed, State: &pb.RespGetStatus_FailReason{FailReason: pb.WifiConnectFailedReason_AuthError}})
	status(protocomm.StationState{State: protocomm.StaConnected, IP: "10.0.0.7", SSID: "boat", BSSID: []byte{9, 8, 7, 6, 5, 4}, Channel: 6, Auth: protocomm.AuthWPA2PSK},
		&pb.RespGetStatus{StaState: pb.WifiStationState_Connected, State: &pb.RespGetStatus_Connected{Connected: &pb.WifiConnectedState{
			Ip4Addr: "10.0.0.7", AuthMode: pb.WifiAuthMode_WPA2_PSK, Ssid: []byte("boat"), Bssid: []byte{9, 8, 7, 6, 5, 4}, Channel: 6}}})
	status(protocomm.StationState{State: protocomm.StaConnected}, &pb.RespGetStatus{StaState: pb.WifiStationState_Connected,
		State: &pb.RespGetStatus_Connected{Connected: &pb.WifiConnectedState{}}})
	status(protocomm.StationState{State: protocomm.StaDisconnected}, &pb.RespGetStatus{StaState: pb.WifiStationState_Disconnected})

	scan := func(req *pb.WiFiScanPayload, want *pb.WiFiScanPayload) {
		t.Helper()
		var resp pb.WiFiScanPayload
		call(protocomm.EPScan, req, &resp)
		if !proto.Equal(&resp, want) {
			t.Fatalf("scan %v, want %v", &resp, want)
		}
	}
	scan(&pb.WiFiScanPayload{Msg: pb.WiFiScanMsgType_TypeCmdScanStart, Payload: &pb.WiFiScanPayload_CmdScanStart{CmdScanStart: &pb.CmdScanStart{Blocking: true}}},
		&pb.WiFiScanPayload{Msg: pb.WiFiScanMsgType_TypeRespScanStart, Payload: &pb.WiFiScanPayload_RespScanStart{RespScanStart: &pb.RespScanStart{}}})
	scan(&pb.WiFiScanPayload{Msg: pb.WiFiScanMsgType_TypeCmdScanStatus, Payload: &pb.WiFiScanPayload_CmdScanStatus{CmdScanStatus: &pb.CmdScanStatus{}}},
		&pb.WiFiScanPayload{Msg: pb.WiFiScanMsgType_TypeRespScanStatus, Payload: &pb.WiFiScanPayload_RespScanStatus{RespScanStatus: &pb.RespScanStatus{ScanFinished: true, ResultCount: 2}}})
	scan(&pb.WiFiScanPayload{Msg: pb.WiFiScanMsgType_TypeCmdScanResult, Payload: &pb.WiFiScanPayload_CmdScanResult{CmdScanResult: &pb.CmdScanResult{Count: 2}}},
		&pb.WiFiScanPayload{Msg: pb.WiFiScanMsgType_TypeRespScanResult, Payload: &pb.WiFiScanPayload_RespScanResult{RespScanResult: &pb.RespScanResult{Entries: []*pb.WiFiScanResult{
			{Ssid: []byte("boat"), Bssid: []byte{1, 2, 3, 4, 5, 6}, Channel: 11, Rssi: -71, Auth: pb.WifiAuthMode_WPA2_WPA3_PSK}, {Ssid: []byte("open"), Channel: 1}}}}})
	scan(&pb.WiFiScanPayload{Msg: pb.WiFiScanMsgType_TypeCmdScanResult, Payload: &pb.WiFiScanPayload_CmdScanResult{CmdScanResult: &pb.CmdScanResult{StartIndex: 1, Count: 5}}},
		&pb.WiFiScanPayload{Msg: pb.WiFiScanMsgType_TypeRespScanResult, Status: pb.Status_InvalidArgument,
			Payload: &pb.WiFiScanPayload_RespScanResult{RespScanResult: &pb.RespScanResult{}}})

	var ctrl pb.WiFiCtrlPayload
	call(protocomm.EPCtrl, &pb.WiFiCtrlPayload{Msg: pb.WiFiCtrlMsgType_TypeCmdCtrlReprov,
		Payload: &pb.WiFiCtrlPayload_CmdCtrlReprov{CmdCtrlReprov: &pb.CmdCtrlReprov{}}}, &ctrl)
	want := &pb.WiFiCtrlPayload{Msg: pb.WiFiCtrlMsgType_TypeRespCtrlReprov, Status: pb.Status_InvalidArgument,
		Payload: &pb.WiFiCtrlPayload_RespCtrlReprov{RespCtrlReprov: &pb.RespCtrlReprov{}}}
	if !proto.Equal(&ctrl, want) {
		t.Fatalf("ctrl %v, want %v", &ctrl, want)
	}
}
