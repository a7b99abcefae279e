package httpd

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"devhost/host/api"
)

// CodeMisdirected answers a request whose Host is not a name of this device.
const CodeMisdirected = "misdirected_request"

// Against DNS rebinding: a web page on another origin can point a name it controls at the
// device's address, and the browser then sends that name as Host. The device answers only
// Host values that cannot be such a name: an IP literal, localhost, the names AllowedHosts
// returns (`<hostname>.local` and the operator's httpd.hosts), or no Host at all (HTTP/1.0).
// Requests AnyHost exempts (the setup portal network, whose DNS answers every name with the
// device's address so captive-portal probes arrive with foreign names) skip the check. The
// refusal is 421 `misdirected_request` saying what to use instead.

// hostAllowed applies the rule to r.
func (s *Server) hostAllowed(r *http.Request) bool {
	if s.opts.AllowedHosts == nil {
		return true
	}
	host := hostOnly(r.Host)
	if host == "" || host == "localhost" || isIP(host) {
		return true
	}
	if s.opts.AnyHost != nil && s.opts.AnyHost(r) {
		return true
	}
	for _, name := range s.opts.AllowedHosts() {
		if strings.EqualFold(strings.TrimSuffix(name, "."), host) {
			return true
		}
	}
	return false
}

// isIP reports whether h is an IP literal, as net.ParseIP decides it (no zone: hostOnly has
// cut it), without the allocation of a net.IP on every request.
func isIP(h string) bool {
	a, err := netip.ParseAddr(h)
	return err == nil && a.Zone() == ""
}

// hostOnly strips the port, the brackets of an IPv6 literal and a trailing dot, and lowers
// the case: the forms one name can take in a Host header.
func hostOnly(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if i := strings.IndexByte(h, '%'); i >= 0 && net.ParseIP(h[:i]) != nil {
		h = h[:i] // IPv6 zone
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

func writeMisdirected(w http.ResponseWriter, host string) {
	api.WriteErr(w, api.Errorf(http.StatusMisdirectedRequest, CodeMisdirected,
		"Host %q is not a name of this device: use its IP address or <hostname>.local, or add the name to httpd.hosts",
		truncate(host, 64)))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
