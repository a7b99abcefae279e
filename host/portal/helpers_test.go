package portal

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"devhost/host/auth"
	"devhost/host/httpd"
	"devhost/host/httpd/httpdtest"
	"devhost/host/logs"
)

// PortalLink is the interface host/wifi drives; the portal must satisfy it.
type PortalLink interface {
	Up(ssid, psk string) error
	Down()
	Clients() int
}

var _ PortalLink = (*Portal)(nil)

// testIP is a loopback portal address of its own for each test, so tests (and other test
// runs on the machine) never share the standard DNS and DHCP ports of one address.
func testIP(t *testing.T) string {
	t.Helper()
	for range 50 {
		ip := fmt.Sprintf("127.%d.%d.1", 100+rand.IntN(100), rand.IntN(256))
		free := true
		for _, c := range []struct{ nw, port string }{{"udp4", "53"}, {"udp4", "67"}, {"tcp4", "8080"}} {
			if c.nw == "tcp4" {
				ln, err := net.Listen(c.nw, net.JoinHostPort(ip, c.port))
				if err != nil {
					free = false
					break
				}
				_ = ln.Close()
				continue
			}
			pc, err := net.ListenPacket(c.nw, net.JoinHostPort(ip, c.port))
			if err != nil {
				free = false
				break
			}
			_ = pc.Close()
		}
		if free {
			return ip
		}
	}
	t.Skip("no free loopback address with ports 53, 67 and 8080 (binding them needs root)")
	return ""
}

// healthLog records the portal's reports.
type healthLog struct {
	mu    sync.Mutex
	state map[string]string
	msg   map[string]string
}

func (h *healthLog) Report(key, state, message string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == nil {
		h.state, h.msg = map[string]string{}, map[string]string{}
	}
	h.state[key], h.msg[key] = state, message
	return nil
}

func (h *healthLog) get(key string) (string, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state[key], h.msg[key]
}

// rig is a portal wired to a real device HTTP server and access control, with a station
// listener on 127.0.0.1 beside the portal listener.
type rig struct {
	p       *Portal
	a       *auth.Auth
	h       *healthLog
	log     *logs.Ring // the portal's log, as the device's ring keeps it
	srv     *httpd.Server
	ip      string
	port    int
	station string // station-side base URL
	mu      sync.Mutex
	key     string
}

func (r *rig) setKey(k string) { r.mu.Lock(); r.key = k; r.mu.Unlock(); r.a.KeyChanged() }

type authAdapter struct{ a *auth.Auth }

func (c authAdapter) Check(r *http.Request) error                 { _, err := c.a.Check(r); return err }
func (c authAdapter) WriteError(w http.ResponseWriter, err error) { c.a.WriteError(w, err) }

func newRig(t *testing.T, ip string) *rig {
	t.Helper()
	r := &rig{ip: ip, port: 8080, h: &healthLog{}, log: logs.New(logs.Options{})}
	r.a = auth.New(auth.Options{
		Key:      func() string { r.mu.Lock(); defer r.mu.Unlock(); return r.key },
		PortalIP: func() string { return r.p.IP() },
		Recovery: true,
	})
	ui := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html><body>devhost setup</body></html>"))
	})
	r.srv = httpd.New(httpd.Options{Auth: authAdapter{r.a}, UI: RootProbes(func() http.Handler { return r.srv }, ui)})
	r.p = New(Options{IP: ip, HTTPPort: func() int { return r.port }, Serve: r.srv.Serve,
		Auth: authAdapter{r.a}, Health: r.h, Logger: r.log.Logger("portal")})
	if err := r.srv.HandleAll(r.p.Routes()); err != nil {
		t.Fatal(err)
	}
	r.station = httpdtest.Start(t, r.srv)
	t.Cleanup(r.p.Down) // before the server stops: cleanups run last first
	return r
}

// noFollow is an HTTP client that shows redirects instead of following them.
var noFollow = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func get(t *testing.T, url string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := noFollow.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	_ = resp.Body.Close()
	return resp
}

// grace bounds a wait for what the portal's goroutines do: long, since a loaded machine only
// makes them slower.
const grace = 30 * time.Second
