// Package softap is protocomm's HTTP transport, as ESP-IDF's protocomm_httpd serves it on
// the setup access point: POST /<endpoint> at the root, the raw protobuf as the body (the
// clients label it application/x-www-form-urlencoded and ask for text/plain; both labels are
// ignored), 200 for an answer and nothing else counts as success.
//
// A security session belongs to the client's keep-alive connection (its remote address and
// port) or, for clients that reconnect between requests, to the `session` cookie set on the
// first prov-session answer and sent back. The table holds MaxSessions; a new one evicts the
// session idle longest.
package softap

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"devhost/plugins/ble/protocomm"
	"devhost/plugins/ble/softap/table"
)

// MaxSessions bounds the session table.
const MaxSessions = table.MaxSessions

// MaxBody bounds a request body: the largest protocomm message (a scan result page) is far
// below it.
const MaxBody = 4096

// CookieName is the session cookie.
const CookieName = table.CookieName

// IsEndpoint reports whether path is one of the provisioning endpoints at the root.
func IsEndpoint(path string) bool { return table.IsEndpoint(path) }

// Server answers the endpoints over HTTP with the session table (package table).
type Server struct {
	table.Table
}

// ServeHTTP answers one exchange.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.Handler() == nil || !IsEndpoint(r.URL.Path) {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		http.Error(w, "request body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	cookie := ""
	if c, err := r.Cookie(CookieName); err == nil {
		cookie = c.Value
	}
	a, err := s.Exchange(r.RemoteAddr, cookie, strings.TrimPrefix(r.URL.Path, "/"), body)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	if a.SetCookie != "" {
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: a.SetCookie, Path: "/", HttpOnly: true})
	}
	if a.Status != http.StatusOK {
		http.Error(w, string(a.Body), a.Status)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(a.Body)
}

// Exchange is the client side: one POST per exchange on one keep-alive client that keeps
// the cookie (devctl prov and the tests).
func Exchange(c *http.Client, base string) protocomm.Exchange {
	base = strings.TrimSuffix(base, "/")
	return func(ep string, body []byte) ([]byte, error) {
		req, err := http.NewRequest(http.MethodPost, base+"/"+ep, strings.NewReader(string(body)))
		if err != nil {
			return nil, fmt.Errorf("request: %w", err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "text/plain")
		resp, err := c.Do(req)
		if err != nil {
			return nil, fmt.Errorf("post %s: %w", ep, err)
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", ep, err)
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s: %s: %s", ep, resp.Status, strings.TrimSpace(string(out)))
		}
		return out, nil
	}
}
