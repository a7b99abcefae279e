package plugin

import (
	"strings"

	"devhost/abi"
)

// MDNS is the device's mDNS responder as plugins reach it (mdns_service). Errors wrap the
// abi.Errno to answer: ErrInvalid over a rule, ErrLimit with every application slot taken,
// ErrConflict for a name the device already advertises, ErrNotFound for an unknown service.
type MDNS interface {
	// Register advertises an application service on `<hostname>.local`; an empty instance is
	// the host name. It takes one of the device's application slots.
	Register(s abi.MDNSService) error
	// UpdateTXT replaces a registered service's TXT items and announces them.
	UpdateTXT(instance, typ, proto string, txt []string) error
	// Unregister withdraws a service, sending its goodbye.
	Unregister(instance, typ, proto string) error
}

// mdnsKey names a plugin's registration as the responder does: regardless of case.
func mdnsKey(instance, typ, proto string) string {
	return strings.ToLower(instance) + "\x00" + strings.ToLower(typ) + "\x00" + strings.ToLower(proto)
}

// fnMDNSService registers, replaces or withdraws one of the plugin's mDNS services. The
// registrations belong to the instance: endMDNS withdraws them when it ends.
func fnMDNSService(s *session, st []uint64) int32 {
	svc, rc := decodeArg(s, st, abi.DecodeMDNSService)
	if rc != 0 {
		return rc
	}
	if err := svc.Check(); err != nil {
		return int32(errno(err, abi.ErrInvalid))
	}
	m := s.p.m.opts.MDNS
	if m == nil {
		return int32(abi.ErrUnavailable)
	}
	key := mdnsKey(svc.Instance, svc.Type, svc.Proto)
	old, mine := s.mdnsSvcs[key]
	switch {
	case svc.Port == 0 && !mine:
		return int32(abi.ErrNotFound)
	case svc.Port == 0:
		delete(s.mdnsSvcs, key)
		return int32(errno(m.Unregister(old.Instance, old.Type, old.Proto), abi.ErrInternal))
	case mine && old.Port == svc.Port:
		if err := m.UpdateTXT(old.Instance, old.Type, old.Proto, svc.TXT); err != nil {
			return int32(errno(err, abi.ErrInternal))
		}
	case mine:
		// A new port is a new SRV record: withdraw, then advertise again.
		delete(s.mdnsSvcs, key)
		if err := m.Unregister(old.Instance, old.Type, old.Proto); err != nil {
			return int32(errno(err, abi.ErrInternal))
		}
		fallthrough
	default:
		if err := m.Register(svc); err != nil {
			return int32(errno(err, abi.ErrInternal))
		}
	}
	if s.mdnsSvcs == nil {
		s.mdnsSvcs = map[string]abi.MDNSService{}
	}
	s.mdnsSvcs[key] = svc
	return 0
}

// endMDNS withdraws the instance's services (goodbyes): they die with it.
func (s *session) endMDNS() {
	m := s.p.m.opts.MDNS
	for k, svc := range s.mdnsSvcs {
		if m != nil {
			if err := m.Unregister(svc.Instance, svc.Type, svc.Proto); err != nil {
				s.p.log.Warn("mdns service not withdrawn", "service", svc.Type+"."+svc.Proto, "err", err)
			}
		}
		delete(s.mdnsSvcs, k)
	}
}
