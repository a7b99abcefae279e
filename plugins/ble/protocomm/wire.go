package protocomm

import (
	"bytes"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
)

// The device's side of the provisioning messages (provpb/espprov.proto) is read and written
// here with protowire, field by field, instead of through the generated package provpb: the
// generated code links protobuf's reflection, registry and descriptors into the plugin, 4.1
// MB of its 8.9 MB module, all of it compiled, decoded and initialised on the plugin's heap
// while provisioning runs. The device reads few fields of few messages. The phone's side
// (package provclient, devctl prov) keeps the generated code, and the tests check each
// against the other.

// Field numbers and enum values of espprov.proto that the device uses.
const (
	// SessionData, Sec0Payload, Sec1Payload and the session messages.
	fSecVer = 2
	fSec0   = 10
	fSec1   = 11
	fMsg    = 1
	fS0Cmd  = 20
	fS0Resp = 21
	fSC0    = 20
	fSR0    = 21
	fSC1    = 22
	fSR1    = 23

	s0Command   = 0
	s0Response  = 1
	s1Command0  = 0
	s1Response0 = 1
	s1Command1  = 2
	s1Response1 = 3

	// WiFiConfigPayload's oneof members; WiFiScanPayload's and WiFiCtrlPayload's status is
	// field 2, their members follow.
	fCmdGetStatus   = 10
	fRespGetStatus  = 11
	fCmdSetConfig   = 12
	fRespSetConfig  = 13
	fCmdApplyConfig = 14
	fRespApplyCfg   = 15
	fStatus2        = 2

	cfgCmdGetStatus   = 0
	cfgRespGetStatus  = 1
	cfgCmdSetConfig   = 2
	cfgRespSetConfig  = 3
	cfgCmdApplyConfig = 4
	cfgRespApplyCfg   = 5

	fCmdScanStart   = 10
	fRespScanStart  = 11
	fCmdScanStatus  = 12
	fRespScanStatus = 13
	fCmdScanResult  = 14
	fRespScanResult = 15

	scanCmdStart   = 0
	scanRespStart  = 1
	scanCmdStatus  = 2
	scanRespStatus = 3
	scanCmdResult  = 4
	scanRespResult = 5

	fCmdCtrlReset   = 11
	fRespCtrlReset  = 12
	fCmdCtrlReprov  = 13
	fRespCtrlReprov = 14

	ctrlCmdReset   = 1
	ctrlRespReset  = 2
	ctrlCmdReprov  = 3
	ctrlRespReprov = 4
)

// Status is espprov's Status enum.
type Status int32

const (
	StatusSuccess         Status = 0
	StatusInvalidArgument Status = 4
	StatusInternalError   Status = 5
)

// StaState is espprov's WifiStationState.
type StaState int32

const (
	StaConnected        StaState = 0
	StaConnecting       StaState = 1
	StaDisconnected     StaState = 2
	StaConnectionFailed StaState = 3
)

// FailReason is espprov's WifiConnectFailedReason.
type FailReason int32

const (
	FailAuthError       FailReason = 0
	FailNetworkNotFound FailReason = 1
)

// AuthMode is espprov's WifiAuthMode.
type AuthMode int32

const (
	AuthOpen           AuthMode = 0
	AuthWEP            AuthMode = 1
	AuthWPAPSK         AuthMode = 2
	AuthWPA2PSK        AuthMode = 3
	AuthWPAWPA2PSK     AuthMode = 4
	AuthWPA2Enterprise AuthMode = 5
	AuthWPA3PSK        AuthMode = 6
	AuthWPA2WPA3PSK    AuthMode = 7
)

// field is one field of a message as it came off the wire: a varint or a length-delimited
// value (fixed-size values are skipped: espprov has none).
type field struct {
	num protowire.Number
	typ protowire.Type
	v   uint64
	b   []byte
}

// message is a decoded message: its fields in wire order. It is read as the generated code
// reads a message: the last occurrence of a scalar field wins, a field whose wire type is not
// the one of its declaration is an unknown field (skipped), and a message member of a oneof
// given more than once is the merge of its occurrences since another member was last given.
type message []field

// decode splits b into its fields; a malformed encoding is an error.
func decode(b []byte) (message, error) {
	var m message
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		m = append(m, f)
	}
	return m, nil
}

// last is the last occurrence of field num with wire type typ, or nil.
func (m message) last(num protowire.Number, typ protowire.Type) *field {
	for i := len(m) - 1; i >= 0; i-- {
		if m[i].num == num && m[i].typ == typ {
			return &m[i]
		}
	}
	return nil
}

// varint is varint field num, 0 when absent.
func (m message) varint(num protowire.Number) uint64 {
	if f := m.last(num, protowire.VarintType); f != nil {
		return f.v
	}
	return 0
}

// bytes is bytes field num, nil when absent.
func (m message) bytes(num protowire.Number) []byte {
	if f := m.last(num, protowire.BytesType); f != nil {
		return f.b
	}
	return nil
}

// oneof tells which of a oneof's message members is set (0 for none) and decodes it.
func (m message) oneof(nums ...protowire.Number) (protowire.Number, message, error) {
	set := protowire.Number(0)
	var parts [][]byte
	for i := len(m) - 1; i >= 0; i-- {
		if m[i].typ != protowire.BytesType || !slices.Contains(nums, m[i].num) {
			continue
		}
		if set != 0 && m[i].num != set {
			break
		}
		set = m[i].num
		parts = append(parts, m[i].b)
	}
	slices.Reverse(parts)
	sub, err := decode(bytes.Join(parts, nil))
	return set, sub, err
}

// payload reads the common frame of the payload messages: the type in field 1 and the oneof
// member set among members.
func payload(b []byte, members ...protowire.Number) (msgType uint64, member protowire.Number, sub message, err error) {
	m, err := decode(b)
	if err != nil {
		return 0, 0, nil, err
	}
	member, sub, err = m.oneof(members...)
	return m.varint(fMsg), member, sub, err
}

// enc builds a message. Scalars follow proto3: a zero value is not written. Members of a
// oneof and sub-messages are written always, even empty or zero, for the reader to see which
// is set.
type enc []byte

func (e enc) varint(num protowire.Number, v uint64) enc {
	if v == 0 {
		return e
	}
	return e.member(num, v)
}

// member writes a varint member of a oneof (written even when zero).
func (e enc) member(num protowire.Number, v uint64) enc {
	return protowire.AppendVarint(protowire.AppendTag(e, num, protowire.VarintType), v)
}

func (e enc) bytes(num protowire.Number, b []byte) enc {
	if len(b) == 0 {
		return e
	}
	return e.msg(num, b)
}

func (e enc) msg(num protowire.Number, sub []byte) enc {
	return protowire.AppendBytes(protowire.AppendTag(e, num, protowire.BytesType), sub)
}

// i32 is an int32 field's varint: negative values are sign-extended to 64 bits, as protobuf
// writes them.
func i32[T ~int32](v T) uint64 { return uint64(int64(v)) }
