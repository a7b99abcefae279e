package abi

import (
	"fmt"
	"strings"
)

// Limits of mdns_service, the spec's "mDNS application services" row (the host's responder
// applies the same rules again).
const (
	MaxMDNSServices = 6   // application service slots of the device (all plugins together)
	MaxMDNSType     = 31  // service type bytes, the leading '_' included
	MaxMDNSInstance = 63  // instance name bytes (one DNS label)
	MaxMDNSTXT      = 8   // TXT items per service
	MaxMDNSTXTBytes = 256 // total bytes of the "key=value" items (length octets not counted)
)

// MDNSService is the mdns_service input: str instance, str type, str proto, u32 port,
// u32 count, count × str TXT item. Port 0 withdraws the plugin's registration of
// instance/type/proto; otherwise the service is registered, or replaced when this plugin
// registered it before. An empty instance means the device's host name.
type MDNSService struct {
	Instance string
	Type     string   // "_name": starts with '_', at most 31 bytes of letters, digits, '-', '_'
	Proto    string   // "_tcp" or "_udp"
	Port     uint32   // 1..65535; 0 withdraws
	TXT      []string // "key=value" or a bare "key"
}

// AppendMDNSService encodes an MDNSService.
func AppendMDNSService(b []byte, s MDNSService) []byte {
	b = appendStr(b, s.Instance)
	b = appendStr(b, s.Type)
	b = appendStr(b, s.Proto)
	b = appendU32(b, s.Port)
	b = appendU32(b, uint32(len(s.TXT)))
	for _, t := range s.TXT {
		b = appendStr(b, t)
	}
	return b
}

// DecodeMDNSService decodes an MDNSService. It checks the encoding only (lengths, UTF-8, at
// most 255 bytes a string, at most 255 TXT items); Check applies the limits.
func DecodeMDNSService(b []byte) (MDNSService, error) {
	r := reader{b: b}
	s := MDNSService{Instance: r.str(255, "instance"), Type: r.str(255, "service type"), Proto: r.str(255, "proto"), Port: r.u32()}
	n := r.u32()
	if r.err == nil && n > 255 {
		r.fail(fmt.Errorf("abi: %d TXT items", n))
	}
	for i := uint32(0); r.err == nil && i < n; i++ {
		s.TXT = append(s.TXT, r.str(255, "TXT item"))
	}
	return done(&r, s)
}

// Check applies the limits: ErrInvalid for a malformed name, type, proto, port or TXT key,
// ErrLimit for more than MaxMDNSTXT items or more than MaxMDNSTXTBytes in all. A withdrawal
// (port 0) needs only the names. Nothing is ever truncated.
func (s MDNSService) Check() error {
	if len(s.Instance) > MaxMDNSInstance || strings.ContainsFunc(s.Instance, func(c rune) bool { return c < 0x20 || c == 0x7f || c == '.' }) {
		return fmt.Errorf("%w: instance %q", ErrInvalid, s.Instance)
	}
	if len(s.Type) < 2 || len(s.Type) > MaxMDNSType || s.Type[0] != '_' ||
		strings.ContainsFunc(s.Type[1:], func(c rune) bool { return !isMDNSTypeChar(c) }) {
		return fmt.Errorf("%w: service type %q", ErrInvalid, s.Type)
	}
	if s.Proto != "_tcp" && s.Proto != "_udp" {
		return fmt.Errorf("%w: proto %q", ErrInvalid, s.Proto)
	}
	if s.Port == 0 {
		return nil
	}
	if s.Port > 65535 {
		return fmt.Errorf("%w: port %d", ErrInvalid, s.Port)
	}
	if len(s.TXT) > MaxMDNSTXT {
		return fmt.Errorf("%w: %d TXT items, at most %d", ErrLimit, len(s.TXT), MaxMDNSTXT)
	}
	total := 0
	seen := map[string]bool{}
	for _, t := range s.TXT {
		key, _, _ := strings.Cut(t, "=")
		lk := strings.ToLower(key)
		if key == "" || seen[lk] || strings.ContainsFunc(key, func(c rune) bool { return c < 0x20 || c > 0x7e }) {
			return fmt.Errorf("%w: TXT item %q", ErrInvalid, t)
		}
		seen[lk] = true
		total += len(t)
	}
	if total > MaxMDNSTXTBytes {
		return fmt.Errorf("%w: TXT items total %d bytes, at most %d", ErrLimit, total, MaxMDNSTXTBytes)
	}
	return nil
}

func isMDNSTypeChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}
