package sdk

import "devhost/abi"

// MDNSService is an application service the device advertises by mDNS on
// `<hostname>.local`: Type like "_nmea-0183" (starts with '_', at most 31 bytes), Proto
// "_tcp" or "_udp", Port 1..65535, at most 8 TXT items ("key=value" or a bare "key") of at
// most 256 bytes in all. An empty Instance is the device's host name. The device has 6
// application slots for all plugins together.
type MDNSService struct {
	Instance string
	Type     string
	Proto    string
	Port     int
	TXT      []string
}

// AdvertiseService advertises s, or replaces this plugin's earlier advertisement of the same
// instance, type and proto (new port or TXT). A service over a limit is refused, never
// truncated: ErrInvalid for a bad name, type, proto, port or TXT key, ErrLimit for too many
// or too long TXT items or when every slot is taken; ErrConflict when the name is taken on
// the device, ErrUnavailable without mDNS. The advertisement ends with the plugin instance.
// Needs mdns.
func AdvertiseService(s MDNSService) error {
	if s.Port < 1 || s.Port > 65535 {
		return hostErr("mdns advertise", int32(abi.ErrInvalid))
	}
	return hostErr("mdns advertise", callIn(abi.FnMDNSService, abi.AppendMDNSService(nil, abi.MDNSService{
		Instance: s.Instance, Type: s.Type, Proto: s.Proto, Port: uint32(s.Port), TXT: s.TXT})))
}

// WithdrawService ends this plugin's advertisement of instance, type and proto (the device
// sends its goodbye); ErrNotFound when this plugin did not advertise it. Needs mdns.
func WithdrawService(instance, typ, proto string) error {
	return hostErr("mdns withdraw", callIn(abi.FnMDNSService, abi.AppendMDNSService(nil, abi.MDNSService{
		Instance: instance, Type: typ, Proto: proto})))
}
