// Package provclient is the phone app's side of ESP-IDF's unified provisioning over
// protocomm (devctl prov and the tests use it): the security session and the prov-config,
// prov-scan and prov-ctrl requests, with the messages of the generated package provpb. The
// device's side (package protocomm) reads and writes the same messages with protowire, so
// each side checks the other.
package provclient

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/protobuf/proto"

	"devhost/plugins/ble/protocomm"
	pb "devhost/plugins/ble/provpb"
)

// Client is the phone app's side of provisioning (devctl prov and the tests use it).
type Client struct {
	X      protocomm.Exchange
	Sec    int
	PoP    []byte
	Random io.Reader // nil: crypto/rand

	stream cipher.Stream
}

// VersionInfo is proto-ver's answer.
type VersionInfo struct {
	Prov struct {
		Ver    string   `json:"ver"`
		SecVer int      `json:"sec_ver"`
		Cap    []string `json:"cap"`
	} `json:"prov"`
}

// Version reads proto-ver (the apps send a short probe string).
func (c *Client) Version() (VersionInfo, error) {
	var v VersionInfo
	b, err := c.X(protocomm.EPVersion, []byte("---"))
	if err != nil {
		return v, fmt.Errorf("proto-ver: %w", err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("proto-ver: %w", err)
	}
	return v, nil
}

// Handshake establishes the security session.
func (c *Client) Handshake() error {
	switch c.Sec {
	case protocomm.Sec0:
		return c.handshake0()
	case protocomm.Sec1:
		return c.handshake1()
	}
	return fmt.Errorf("%w: security %d", protocomm.ErrScheme, c.Sec)
}

func (c *Client) handshake0() error {
	req := &pb.SessionData{SecVer: pb.SecSchemeVersion_SecScheme0, Proto: &pb.SessionData_Sec0{Sec0: &pb.Sec0Payload{
		Msg: pb.Sec0MsgType_S0_Session_Command, Payload: &pb.Sec0Payload_Sc{Sc: &pb.S0SessionCmd{}}}}}
	var resp pb.SessionData
	if err := c.Call(protocomm.EPSession, req, &resp, false); err != nil {
		return err
	}
	if resp.GetSec0().GetSr() == nil || resp.GetSec0().GetSr().GetStatus() != pb.Status_Success {
		return fmt.Errorf("%w: security 0 session refused", protocomm.ErrProto)
	}
	return nil
}

func (c *Client) handshake1() error {
	random := c.Random
	if random == nil {
		random = rand.Reader
	}
	priv, err := protocomm.NewKey(random)
	if err != nil {
		return fmt.Errorf("client key: %w", err)
	}
	req0 := &pb.SessionData{SecVer: pb.SecSchemeVersion_SecScheme1, Proto: &pb.SessionData_Sec1{Sec1: &pb.Sec1Payload{
		Msg: pb.Sec1MsgType_Session_Command0, Payload: &pb.Sec1Payload_Sc0{Sc0: &pb.SessionCmd0{ClientPubkey: priv.PublicKey().Bytes()}}}}}
	var resp0 pb.SessionData
	if err := c.Call(protocomm.EPSession, req0, &resp0, false); err != nil {
		return err
	}
	sr0 := resp0.GetSec1().GetSr0()
	if sr0 == nil || sr0.GetStatus() != pb.Status_Success || len(sr0.GetDeviceRandom()) != aes.BlockSize {
		return fmt.Errorf("%w: SessionResp0", protocomm.ErrProto)
	}
	devPub, err := ecdh.X25519().NewPublicKey(sr0.GetDevicePubkey())
	if err != nil {
		return fmt.Errorf("%w: device public key: %v", protocomm.ErrProto, err)
	}
	shared, err := priv.ECDH(devPub)
	if err != nil {
		return fmt.Errorf("%w: key exchange: %v", protocomm.ErrProto, err)
	}
	stream, err := protocomm.Stream(shared, c.PoP, sr0.GetDeviceRandom())
	if err != nil {
		return err
	}
	verify := make([]byte, len(sr0.GetDevicePubkey()))
	stream.XORKeyStream(verify, sr0.GetDevicePubkey())
	req1 := &pb.SessionData{SecVer: pb.SecSchemeVersion_SecScheme1, Proto: &pb.SessionData_Sec1{Sec1: &pb.Sec1Payload{
		Msg: pb.Sec1MsgType_Session_Command1, Payload: &pb.Sec1Payload_Sc1{Sc1: &pb.SessionCmd1{ClientVerifyData: verify}}}}}
	var resp1 pb.SessionData
	if err := c.Call(protocomm.EPSession, req1, &resp1, false); err != nil {
		return fmt.Errorf("session refused (wrong PoP?): %w", err)
	}
	sr1 := resp1.GetSec1().GetSr1()
	if sr1 == nil || sr1.GetStatus() != pb.Status_Success {
		return fmt.Errorf("%w: SessionResp1", protocomm.ErrProto)
	}
	check := make([]byte, len(sr1.GetDeviceVerifyData()))
	stream.XORKeyStream(check, sr1.GetDeviceVerifyData())
	if string(check) != string(priv.PublicKey().Bytes()) {
		return fmt.Errorf("%w: device verification failed", protocomm.ErrPoP)
	}
	c.stream = stream
	return nil
}

func (c *Client) crypt(b []byte) []byte {
	if c.stream == nil {
		return b
	}
	out := make([]byte, len(b))
	c.stream.XORKeyStream(out, b)
	return out
}

// Call sends req on endpoint ep (encrypted when secure, as every endpoint after the
// session's) and reads the answer into resp.
func (c *Client) Call(ep string, req, resp proto.Message, secure bool) error {
	b, err := proto.Marshal(req)
	if err != nil {
		return fmt.Errorf("%s: marshal: %w", ep, err)
	}
	if secure {
		b = c.crypt(b)
	}
	out, err := c.X(ep, b)
	if err != nil {
		return fmt.Errorf("%s: %w", ep, err)
	}
	if secure {
		out = c.crypt(out)
	}
	if err := proto.Unmarshal(out, resp); err != nil {
		return fmt.Errorf("%s: %w: %v", ep, protocomm.ErrProto, err)
	}
	return nil
}

// SetConfig sends the credentials.
func (c *Client) SetConfig(ssid, passphrase string) error {
	var resp pb.WiFiConfigPayload
	err := c.Call(protocomm.EPConfig, &pb.WiFiConfigPayload{Msg: pb.WiFiConfigMsgType_TypeCmdSetConfig,
		Payload: &pb.WiFiConfigPayload_CmdSetConfig{CmdSetConfig: &pb.CmdSetConfig{Ssid: []byte(ssid), Passphrase: []byte(passphrase)}}}, &resp, true)
	if err != nil {
		return err
	}
	if st := resp.GetRespSetConfig().GetStatus(); resp.GetRespSetConfig() == nil || st != pb.Status_Success {
		return fmt.Errorf("set config refused: %v", st)
	}
	return nil
}

// ApplyConfig asks the device to join the network.
func (c *Client) ApplyConfig() error {
	var resp pb.WiFiConfigPayload
	err := c.Call(protocomm.EPConfig, &pb.WiFiConfigPayload{Msg: pb.WiFiConfigMsgType_TypeCmdApplyConfig,
		Payload: &pb.WiFiConfigPayload_CmdApplyConfig{CmdApplyConfig: &pb.CmdApplyConfig{}}}, &resp, true)
	if err != nil {
		return err
	}
	if st := resp.GetRespApplyConfig().GetStatus(); resp.GetRespApplyConfig() == nil || st != pb.Status_Success {
		return fmt.Errorf("apply config refused: %v", st)
	}
	return nil
}

// Status reads the station's state.
func (c *Client) Status() (*pb.RespGetStatus, error) {
	var resp pb.WiFiConfigPayload
	err := c.Call(protocomm.EPConfig, &pb.WiFiConfigPayload{Msg: pb.WiFiConfigMsgType_TypeCmdGetStatus,
		Payload: &pb.WiFiConfigPayload_CmdGetStatus{CmdGetStatus: &pb.CmdGetStatus{}}}, &resp, true)
	if err != nil {
		return nil, err
	}
	if resp.GetRespGetStatus() == nil {
		return nil, fmt.Errorf("%w: no status in the answer", protocomm.ErrProto)
	}
	return resp.GetRespGetStatus(), nil
}

// Scan runs a scan and reads every result.
func (c *Client) Scan() ([]*pb.WiFiScanResult, error) {
	var resp pb.WiFiScanPayload
	if err := c.Call(protocomm.EPScan, &pb.WiFiScanPayload{Msg: pb.WiFiScanMsgType_TypeCmdScanStart,
		Payload: &pb.WiFiScanPayload_CmdScanStart{CmdScanStart: &pb.CmdScanStart{Blocking: true}}}, &resp, true); err != nil {
		return nil, err
	}
	if err := c.Call(protocomm.EPScan, &pb.WiFiScanPayload{Msg: pb.WiFiScanMsgType_TypeCmdScanStatus,
		Payload: &pb.WiFiScanPayload_CmdScanStatus{CmdScanStatus: &pb.CmdScanStatus{}}}, &resp, true); err != nil {
		return nil, err
	}
	n := resp.GetRespScanStatus().GetResultCount()
	var out []*pb.WiFiScanResult
	for start := uint32(0); start < n; start += 4 {
		count := min(4, n-start)
		if err := c.Call(protocomm.EPScan, &pb.WiFiScanPayload{Msg: pb.WiFiScanMsgType_TypeCmdScanResult,
			Payload: &pb.WiFiScanPayload_CmdScanResult{CmdScanResult: &pb.CmdScanResult{StartIndex: start, Count: count}}}, &resp, true); err != nil {
			return nil, err
		}
		out = append(out, resp.GetRespScanResult().GetEntries()...)
	}
	return out, nil
}

// ErrFailed is a station that could not join; the status carries the reason.
var ErrFailed = errors.New("station failed to connect")

// WaitConnected polls the status every interval until the station is connected (nil), has
// failed (ErrFailed with the reason), or the deadline passes.
func (c *Client) WaitConnected(interval, timeout time.Duration, sleep func(time.Duration)) (*pb.RespGetStatus, error) {
	for waited := time.Duration(0); ; waited += interval {
		st, err := c.Status()
		if err != nil {
			return nil, err
		}
		switch st.GetStaState() {
		case pb.WifiStationState_Connected:
			return st, nil
		case pb.WifiStationState_ConnectionFailed:
			return st, fmt.Errorf("%w: %v", ErrFailed, st.GetFailReason())
		}
		if waited >= timeout {
			return st, fmt.Errorf("station still %v after %v", st.GetStaState(), timeout)
		}
		sleep(interval)
	}
}
