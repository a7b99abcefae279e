package abi

import (
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"
)

// Encodings of minor 2: the GATT server role, the portal-root routes and the WiFi hand-off
// a provisioning plugin needs (ABI.md sections 8 and 9).

// GATT characteristic properties (GATTChar.Props bits).
const (
	GATTPropRead   = 1 << 0
	GATTPropWrite  = 1 << 1
	GATTPropNotify = 1 << 2
)

// GATT limits.
const (
	MaxGATTChars       = 16  // characteristics in the one service
	MaxGATTDescription = 64  // user description (0x2901) bytes
	MaxGATTValue       = 512 // an attribute value, as ATT bounds it
)

// GATTChar is one characteristic of the plugin's service.
type GATTChar struct {
	UUID        string // 128-bit, canonical lowercase form
	Props       uint8  // GATTProp* bits, at least one
	Description string // the user description descriptor (0x2901); empty: none
}

// GATTService is the gatt_serve input: str uuid, u32 count, count × (str uuid, u8 props,
// str description). The characteristics are numbered by their index in the event and
// notification records.
type GATTService struct {
	UUID  string
	Chars []GATTChar
}

// ValidUUID128 reports whether s is a 128-bit UUID in canonical lowercase form
// (8-4-4-4-12 hex digits).
func ValidUUID128(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// AppendGATTService encodes a GATTService.
func AppendGATTService(b []byte, s GATTService) []byte {
	b = appendU32(appendStr(b, s.UUID), uint32(len(s.Chars)))
	for _, c := range s.Chars {
		b = appendStr(append(appendStr(b, c.UUID), c.Props), c.Description)
	}
	return b
}

// appendStrs appends each of ss as a str.
func appendStrs(b []byte, ss ...string) []byte {
	for _, s := range ss {
		b = appendStr(b, s)
	}
	return b
}

// decodeAll decodes one whole message with read, refusing trailing bytes.
func decodeAll[T any](b []byte, read func(r *reader) T) (T, error) {
	r := reader{b: b}
	v := read(&r)
	if err := r.end(); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// DecodeGATTService decodes and checks a GATTService: valid and distinct UUIDs, 1..16
// characteristics, known properties.
func DecodeGATTService(b []byte) (GATTService, error) {
	r := reader{b: b}
	s := GATTService{UUID: r.str(36, "service uuid")}
	n := r.u32()
	if r.err == nil && (n == 0 || n > MaxGATTChars) {
		return GATTService{}, fmt.Errorf("abi: %d characteristics, want 1..%d", n, MaxGATTChars)
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		c := GATTChar{UUID: r.str(36, "characteristic uuid"), Props: r.u8()}
		c.Description = r.str(MaxGATTDescription, "description")
		s.Chars = append(s.Chars, c)
	}
	if err := r.end(); err != nil {
		return GATTService{}, err
	}
	if !ValidUUID128(s.UUID) {
		return GATTService{}, fmt.Errorf("abi: service uuid %q is not a 128-bit UUID", s.UUID)
	}
	seen := []string{s.UUID}
	for _, c := range s.Chars {
		if !ValidUUID128(c.UUID) || slices.Contains(seen, c.UUID) {
			return GATTService{}, fmt.Errorf("abi: characteristic uuid %q invalid or repeated", c.UUID)
		}
		seen = append(seen, c.UUID)
		if c.Props == 0 || c.Props&^(GATTPropRead|GATTPropWrite|GATTPropNotify) != 0 {
			return GATTService{}, fmt.Errorf("abi: characteristic %s: properties %#x", c.UUID, c.Props)
		}
		if !printable(c.Description) {
			return GATTService{}, errors.New("abi: control character in a description")
		}
	}
	return s, nil
}

func printable(s string) bool {
	for _, c := range s {
		if c < 0x20 || c == 0x7f {
			return false
		}
	}
	return utf8.ValidString(s)
}

// GATTOp is what a GATT event reports.
type GATTOp uint8

// GATT event operations. Writes and reads are requests: the plugin answers each with
// gatt_reply in the call that delivered it; the others are notices.
const (
	GATTConnect    GATTOp = 1 // a central connected
	GATTMTU        GATTOp = 2 // the MTU exchange: MTU is the connection's MTU now
	GATTWrite      GATTOp = 3 // a write of Value (a long write arrives whole, assembled by the host)
	GATTRead       GATTOp = 4 // a read request: the plugin replies with the value
	GATTDisconnect GATTOp = 5 // the central is gone
)

// GATTEvent is the EvGATT payload: u32 id (non-zero for a request), u8 op, u32 conn, u32
// char (index in the service), u32 mtu, str value.
type GATTEvent struct {
	ID    uint32
	Op    GATTOp
	Conn  uint32
	Char  uint32
	MTU   uint32
	Value []byte
}

// AppendGATTEvent encodes a GATTEvent.
func AppendGATTEvent(b []byte, e GATTEvent) []byte {
	b = append(appendU32(b, e.ID), byte(e.Op))
	return appendBytes(appendU32(appendU32(appendU32(b, e.Conn), e.Char), e.MTU), e.Value)
}

// DecodeGATTEvent decodes a GATTEvent.
func DecodeGATTEvent(b []byte) (GATTEvent, error) {
	return decodeAll(b, func(r *reader) GATTEvent {
		return GATTEvent{ID: r.u32(), Op: GATTOp(r.u8()), Conn: r.u32(), Char: r.u32(), MTU: r.u32(),
			Value: r.bytes(MaxGATTValue, "value")}
	})
}

// GATTReply is the gatt_reply input: u32 id, u8 att (0 success, else the ATT error code the
// central gets), str value (a read's value; empty for a write).
type GATTReply struct {
	ID    uint32
	ATT   uint8
	Value []byte
}

// AppendGATTReply encodes a GATTReply.
func AppendGATTReply(b []byte, g GATTReply) []byte {
	return appendBytes(append(appendU32(b, g.ID), g.ATT), g.Value)
}

// DecodeGATTReply decodes a GATTReply.
func DecodeGATTReply(b []byte) (GATTReply, error) {
	return decodeAll(b, func(r *reader) GATTReply {
		return GATTReply{ID: r.u32(), ATT: r.u8(), Value: r.bytes(MaxGATTValue, "value")}
	})
}

// GATTNotification is the gatt_notify input: u32 char (index), str value.
type GATTNotification struct {
	Char  uint32
	Value []byte
}

// AppendGATTNotification encodes a GATTNotification.
func AppendGATTNotification(b []byte, n GATTNotification) []byte {
	return appendBytes(appendU32(b, n.Char), n.Value)
}

// DecodeGATTNotification decodes a GATTNotification.
func DecodeGATTNotification(b []byte) (GATTNotification, error) {
	return decodeAll(b, func(r *reader) GATTNotification {
		return GATTNotification{Char: r.u32(), Value: r.bytes(MaxGATTValue, "value")}
	})
}

// PortalPaths are the paths a plugin may serve at the root of the setup portal's listener:
// ESP-IDF's protocomm endpoints, where its SoftAP provisioning clients look.
var PortalPaths = []string{"/prov-session", "/prov-config", "/proto-ver", "/prov-scan", "/prov-ctrl"}

// DecodePortalPaths decodes the portal_serve input: 0..len(PortalPaths) str paths, each one of
// PortalPaths, none twice. None withdraws the plugin's portal routes.
func DecodePortalPaths(b []byte) ([]string, error) {
	r := reader{b: b}
	var out []string
	for len(r.b) > 0 && r.err == nil {
		p := r.str(32, "path")
		if r.err == nil && (!slices.Contains(PortalPaths, p) || slices.Contains(out, p)) {
			return nil, fmt.Errorf("abi: portal path %q unknown or repeated", p)
		}
		out = append(out, p)
	}
	return done(&r, out)
}

// PortalRequest is the EvPortal payload: u32 id, str method, str path, str conn (the
// client's connection: its remote address and port, the same for every request of one
// keep-alive connection), str cookie (the Cookie header as sent), str body (raw).
type PortalRequest struct {
	ID     uint32
	Method string // POST, or another method the host refuses without asking the plugin
	Path   string // one of PortalPaths
	Conn   string // remote address and port
	Cookie string // the Cookie header
	Body   []byte
}

// MaxPortalBody bounds a portal request's body (protocomm messages are far smaller).
const MaxPortalBody = 4 << 10

// AppendPortalRequest encodes a PortalRequest.
func AppendPortalRequest(b []byte, p PortalRequest) []byte {
	return appendBytes(appendStrs(appendU32(b, p.ID), p.Method, p.Path, p.Conn, p.Cookie), p.Body)
}

// DecodePortalRequest decodes a PortalRequest.
func DecodePortalRequest(b []byte) (PortalRequest, error) {
	return decodeAll(b, func(r *reader) PortalRequest {
		return PortalRequest{ID: r.u32(), Method: r.str(16, "method"), Path: r.str(32, "path"),
			Conn: r.str(128, "conn"), Cookie: r.str(4096, "cookie"), Body: r.bytes(MaxPortalBody, "body")}
	})
}

// PortalResponse is the portal_reply input: u32 id, u32 status (200..599), str content
// type (empty: application/octet-stream), str set_cookie (a Set-Cookie header value; empty:
// none), str body (raw, ≤ 64 KiB).
type PortalResponse struct {
	ID          uint32
	Status      uint32
	ContentType string
	SetCookie   string
	Body        []byte
}

// AppendPortalResponse encodes a PortalResponse.
func AppendPortalResponse(b []byte, p PortalResponse) []byte {
	return appendBytes(appendStrs(appendU32(appendU32(b, p.ID), p.Status), p.ContentType, p.SetCookie), p.Body)
}

// DecodePortalResponse decodes a PortalResponse.
func DecodePortalResponse(b []byte) (PortalResponse, error) {
	p, err := decodeAll(b, func(r *reader) PortalResponse {
		return PortalResponse{ID: r.u32(), Status: r.u32(), ContentType: r.str(MaxContentType, "content type"),
			SetCookie: r.str(MaxContentType*2, "set_cookie"), Body: r.bytes(MaxHTTPResponse, "body")}
	})
	if err != nil {
		return PortalResponse{}, err
	}
	if p.Status < 200 || p.Status > 599 {
		return PortalResponse{}, fmt.Errorf("abi: HTTP status %d outside 200..599", p.Status)
	}
	if !printable(p.ContentType) || !printable(p.SetCookie) {
		return PortalResponse{}, errors.New("abi: control character in a header")
	}
	return p, nil
}

// WiFiCredentials is the wifi_provision input: str ssid (1..32 bytes), str passphrase (empty
// for an open network, else 8..63 characters or 64 hex digits).
type WiFiCredentials struct {
	SSID       string
	Passphrase string
}

// AppendWiFiCredentials encodes WiFiCredentials.
func AppendWiFiCredentials(b []byte, c WiFiCredentials) []byte {
	return appendStrs(b, c.SSID, c.Passphrase)
}

// DecodeWiFiCredentials decodes and checks WiFiCredentials.
func DecodeWiFiCredentials(b []byte) (WiFiCredentials, error) {
	c, err := decodeAll(b, func(r *reader) WiFiCredentials {
		return WiFiCredentials{SSID: r.str(32, "ssid"), Passphrase: r.str(64, "passphrase")}
	})
	if err != nil {
		return WiFiCredentials{}, err
	}
	if c.SSID == "" {
		return WiFiCredentials{}, errors.New("abi: empty ssid")
	}
	if n := len(c.Passphrase); n != 0 && (n < 8 || n > 64 || (n == 64 && !isHex(c.Passphrase))) {
		return WiFiCredentials{}, fmt.Errorf("abi: passphrase of %d bytes, want 8..63 or 64 hex digits", n)
	}
	return c, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return true
}

// WiFiStatus is the station's state (wifi_status, the EvWiFi payload), as JSON.
type WiFiStatus struct {
	Configured bool   `json:"configured"` // a network is configured in some slot
	State      string `json:"state"`      // the station manager's state: disabled, unconfigured, connecting, obtaining_ip, connected, backoff
	Reason     int    `json:"reason"`     // the last disconnect reason code (802.11 and the driver's), 0 for none
	ReasonText string `json:"reason_text"`
	// Failure is what the reason means to a provisioning client: "auth" (wrong passphrase),
	// "not_found" (no such network), or "" (none, or a reason the station retries through).
	Failure string `json:"failure"`
	SSID    string `json:"ssid"`
	BSSID   string `json:"bssid"`
	Channel int    `json:"channel"`
	IP      string `json:"ip"`
	MAC     string `json:"mac"` // the station's (base) MAC address
}

// WiFiAP is one network a scan heard (wifi_scan answers a JSON array of them).
type WiFiAP struct {
	SSID    string `json:"ssid"`
	BSSID   string `json:"bssid"`
	Channel int    `json:"channel"`
	RSSI    int    `json:"rssi"`
	Auth    string `json:"auth"` // open, wep, wpa, wpa2, wpa/wpa2, wpa2-enterprise, wpa3, wpa2/wpa3
}

// DecodeButton decodes an EvButton payload (u32 seconds).
func DecodeButton(b []byte) (uint32, error) { return DecodeTimer(b) }
