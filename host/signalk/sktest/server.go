package sktest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Admin credentials of every harness server.
const (
	AdminUser     = "admin"
	AdminPassword = "devhost-admin-pw"
)

// TLSFiles makes the server serve https (settings `ssl: true`) with this certificate.
type TLSFiles struct {
	CertPEM  []byte // leaf first
	KeyPEM   []byte
	ChainPEM []byte // optional ssl-chain.pem
}

// Options of Start. The zero value starts a plain-http server with security on.
type Options struct {
	// Dir is the install folder; "" means Dir().
	Dir string
	// ConfigDir is the server's configuration folder; "" makes a temporary one that Stop
	// removes. A folder from an earlier Start keeps its users, devices and tokens.
	ConfigDir string
	// TLS, when set, serves https on HTTPSPort (free port when 0); Port then redirects.
	TLS       *TLSFiles
	HTTPSPort int
	// Port is the http port; 0 picks a free one.
	Port int
	// Log receives the server's output (may be nil; it is kept in server.log either way).
	Log io.Writer
}

// Server is one running signalk-server.
type Server struct {
	Host      string // 127.0.0.1
	Port      int    // http
	HTTPSPort int    // 0 without TLS
	// AdminToken is a JWT of the admin user.
	AdminToken string
	// Self is the server's vessel URN (urn:mrn:signalk:uuid:…).
	Self string

	opts    Options
	tempCfg bool
	cmd     *exec.Cmd
	done    chan struct{}
	mu      sync.Mutex
	stopped bool
}

// URL is the server's http base URL.
func (s *Server) URL() string { return fmt.Sprintf("http://%s:%d", s.Host, s.Port) }

// BaseURL is the URL tests talk to: https when TLS is on, else http.
func (s *Server) BaseURL() string {
	if s.HTTPSPort != 0 {
		return fmt.Sprintf("https://%s:%d", s.Host, s.HTTPSPort)
	}
	return s.URL()
}

// Pid is the node process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// ConfigDir is the server's configuration folder.
func (s *Server) ConfigDir() string { return s.opts.ConfigDir }

// FreePort asks the kernel for a free loopback TCP port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start starts a server from an installed folder (see Install) and sets up security: the admin
// user, tokens required (no read-only access), device access requests allowed.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Dir == "" {
		d, err := Dir()
		if err != nil {
			return nil, err
		}
		opts.Dir = d
	}
	if !Installed(opts.Dir) {
		return nil, fmt.Errorf("%w: not installed in %s", ErrUnavailable, opts.Dir)
	}
	s := &Server{Host: "127.0.0.1", opts: opts}
	if opts.ConfigDir == "" {
		d, err := os.MkdirTemp("", "signalk-cfg-")
		if err != nil {
			return nil, err
		}
		s.opts.ConfigDir, s.tempCfg = d, true
	}
	if err := s.launch(ctx); err != nil {
		if s.tempCfg {
			_ = os.RemoveAll(s.opts.ConfigDir)
		}
		return nil, err
	}
	return s, nil
}

func (s *Server) launch(ctx context.Context) error {
	cfg := s.opts.ConfigDir
	var err error
	if s.Port == 0 {
		if s.Port = s.opts.Port; s.Port == 0 {
			if s.Port, err = FreePort(); err != nil {
				return err
			}
		}
	}
	settings := map[string]any{
		"interfaces":     map[string]bool{"tcp": false, "nmea-tcp": false},
		"mdns":           false,
		"pipedProviders": []any{},
	}
	if s.opts.TLS != nil {
		if s.HTTPSPort == 0 {
			if s.HTTPSPort = s.opts.HTTPSPort; s.HTTPSPort == 0 {
				if s.HTTPSPort, err = FreePort(); err != nil {
					return err
				}
			}
		}
		settings["ssl"] = true
		settings["sslport"] = s.HTTPSPort
		if err := s.writeTLS(*s.opts.TLS); err != nil {
			return err
		}
	}
	b, _ := json.Marshal(settings)
	if err := os.WriteFile(filepath.Join(cfg, "settings.json"), b, 0o644); err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(cfg, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	var out io.Writer = logf
	if s.opts.Log != nil {
		out = io.MultiWriter(logf, s.opts.Log)
	}
	// The node binary itself is the child (no shell), so its pid is the server's pid.
	cmd := exec.Command(NodeBinary(s.opts.Dir), ServerScript(s.opts.Dir), "-c", cfg, "--securityenabled")
	cmd.Dir = cfg
	cmd.Env = append(os.Environ(),
		"PORT="+strconv.Itoa(s.Port),
		"NODE_OPTIONS=--require "+filepath.Join(s.opts.Dir, "loopback.js"),
		"SIGNALK_DISABLE_SERVER_UPDATES=1",
		"SIGNALK_NODE_CONFIG_DIR="+cfg,
	)
	if s.HTTPSPort != 0 {
		cmd.Env = append(cmd.Env, "SSLPORT="+strconv.Itoa(s.HTTPSPort))
	}
	cmd.Stdout, cmd.Stderr = out, out
	// The server dies with the test binary even when the test is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("%w: start node: %w", ErrUnavailable, err)
	}
	s.cmd = cmd
	s.done = make(chan struct{})
	s.stopped = false
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(s.done)
	}()
	if err := s.waitUp(ctx, 60*time.Second); err != nil {
		_ = s.kill()
		return fmt.Errorf("%w: %w; log: %s", ErrUnavailable, err, s.LogTail(3000))
	}
	if err := s.secure(ctx); err != nil {
		_ = s.kill()
		return fmt.Errorf("sktest: security setup: %w; log: %s", err, s.LogTail(3000))
	}
	return nil
}

func (s *Server) writeTLS(t TLSFiles) error {
	cfg := s.opts.ConfigDir
	files := map[string][]byte{"ssl-cert.pem": t.CertPEM, "ssl-key.pem": t.KeyPEM}
	if len(t.ChainPEM) > 0 {
		files["ssl-chain.pem"] = t.ChainPEM
	} else {
		_ = os.Remove(filepath.Join(cfg, "ssl-chain.pem"))
	}
	for name, b := range files {
		p := filepath.Join(cfg, name)
		// The server refuses key and certificate files others can read.
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return err
		}
		if err := os.Chmod(p, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// waitUp polls GET /signalk until it answers 200.
func (s *Server) waitUp(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	// With TLS the http port answers 302 to https; that answer itself means "up", and
	// following it would fail on the test CA.
	c := &http.Client{Timeout: time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	for {
		select {
		case <-s.done:
			return errors.New("server exited during start-up")
		default:
		}
		resp, err := c.Get(s.URL() + "/signalk")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			// With TLS the http port redirects; any answer means the server is up.
			if resp.StatusCode == http.StatusOK || s.HTTPSPort != 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("GET /signalk did not answer within %s", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// secure creates the admin when the server has no user yet, logs in and makes tokens
// mandatory.
func (s *Server) secure(ctx context.Context) error {
	st, body, err := s.do(ctx, http.MethodPost, "/skServer/enableSecurity", "",
		map[string]string{"userId": AdminUser, "password": AdminPassword, "type": "admin"})
	if err != nil {
		return err
	}
	// A second start on the same folder already has the admin: the server refuses (401/403/500).
	_ = st
	_ = body
	st, body, err = s.do(ctx, http.MethodPost, "/signalk/v1/auth/login", "",
		map[string]string{"username": AdminUser, "password": AdminPassword})
	if err != nil {
		return err
	}
	if st != http.StatusOK {
		return fmt.Errorf("admin login: %d %s", st, body)
	}
	var login struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(body, &login); err != nil || login.Token == "" {
		return fmt.Errorf("admin login answer %q: %v", body, err)
	}
	s.AdminToken = login.Token
	st, body, err = s.do(ctx, http.MethodPut, "/skServer/security/config", s.AdminToken, map[string]any{
		"allow_readonly": false, "expiration": "NEVER",
		"allowDeviceAccessRequests": true, "allowNewUserRegistration": false,
	})
	if err != nil {
		return err
	}
	if st != http.StatusOK {
		return fmt.Errorf("security config: %d %s", st, body)
	}
	st, body, err = s.do(ctx, http.MethodGet, "/signalk/v1/api/self", s.AdminToken, nil)
	if err != nil {
		return err
	}
	var self string
	if st != http.StatusOK || json.Unmarshal(body, &self) != nil {
		return fmt.Errorf("GET self: %d %s", st, body)
	}
	s.Self = strings.TrimPrefix(self, "vessels.")
	return nil
}

// client trusts any certificate: it is the test's own server on loopback.
func (s *Server) client() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = insecureTLS()
	return &http.Client{Timeout: 10 * time.Second, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Do sends a request to the server (to BaseURL) with an optional Bearer token and JSON body,
// and answers the status and body.
func (s *Server) Do(ctx context.Context, method, path, token string, body any) (int, []byte, error) {
	return s.do(ctx, method, path, token, body)
}

func (s *Server) do(ctx context.Context, method, path, token string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.BaseURL()+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.client().Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("sktest: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, b, err
}

// AccessRequest is one entry of the server's access request list.
type AccessRequest struct {
	RequestID   string `json:"requestId"`
	State       string `json:"state"`
	ClientID    string `json:"accessIdentifier"`
	Description string `json:"accessDescription"`
	Permissions string `json:"permissions"`
}

// Requests lists the access requests the server holds.
func (s *Server) Requests(ctx context.Context) ([]AccessRequest, error) {
	st, body, err := s.do(ctx, http.MethodGet, "/skServer/security/access/requests", s.AdminToken, nil)
	if err != nil {
		return nil, err
	}
	if st != http.StatusOK {
		return nil, fmt.Errorf("sktest: list requests: %d %s", st, body)
	}
	var out []AccessRequest
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("sktest: list requests %q: %w", body, err)
	}
	return out, nil
}

// WaitRequest polls the request list until a PENDING request of clientID appears.
func (s *Server) WaitRequest(ctx context.Context, clientID string) (AccessRequest, error) {
	for {
		reqs, err := s.Requests(ctx)
		if err != nil {
			return AccessRequest{}, err
		}
		for _, r := range reqs {
			if r.ClientID == clientID && r.State == "PENDING" {
				return r, nil
			}
		}
		select {
		case <-ctx.Done():
			return AccessRequest{}, fmt.Errorf("sktest: no pending request of %s: %w", clientID, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Approve grants clientID's pending request with the permissions (readonly, readwrite, admin).
func (s *Server) Approve(ctx context.Context, clientID, permissions string) error {
	return s.decide(ctx, clientID, "approved", permissions)
}

// Deny refuses clientID's pending request.
func (s *Server) Deny(ctx context.Context, clientID string) error {
	return s.decide(ctx, clientID, "denied", "readonly")
}

func (s *Server) decide(ctx context.Context, clientID, verdict, permissions string) error {
	st, body, err := s.do(ctx, http.MethodPut,
		"/skServer/security/access/requests/"+url.PathEscape(clientID)+"/"+verdict, s.AdminToken,
		map[string]string{"permissions": permissions, "expiration": "1y"})
	if err != nil {
		return err
	}
	if st != http.StatusOK {
		return fmt.Errorf("sktest: %s %s: %d %s", verdict, clientID, st, body)
	}
	return nil
}

// Value reads a value of vessels.self back (dotted path) with the admin token: the `value`
// member of the path's leaf. ok is false when the server has no such path.
func (s *Server) Value(ctx context.Context, path string) (value json.RawMessage, ok bool, err error) {
	leaf, ok, err := s.Leaf(ctx, path)
	if err != nil || !ok {
		return nil, ok, err
	}
	var v struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(leaf, &v); err != nil {
		return nil, false, fmt.Errorf("sktest: %s: %w", path, err)
	}
	return v.Value, v.Value != nil, nil
}

// Leaf reads the whole node of a vessels.self path (value, $source, timestamp, meta…).
func (s *Server) Leaf(ctx context.Context, path string) (json.RawMessage, bool, error) {
	st, body, err := s.do(ctx, http.MethodGet,
		"/signalk/v1/api/vessels/self/"+strings.ReplaceAll(path, ".", "/"), s.AdminToken, nil)
	if err != nil {
		return nil, false, err
	}
	switch st {
	case http.StatusOK:
		return body, true, nil
	case http.StatusNotFound:
		return nil, false, nil
	}
	return nil, false, fmt.Errorf("sktest: GET %s: %d %s", path, st, body)
}

// WaitValue polls Value until it is present and want(value) holds, or ctx ends.
func (s *Server) WaitValue(ctx context.Context, path string, want func(json.RawMessage) bool) (json.RawMessage, error) {
	for {
		v, ok, err := s.Value(ctx, path)
		if err != nil {
			return nil, err
		}
		if ok && (want == nil || want(v)) {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("sktest: %s: last value %s: %w", path, v, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// LogTail is the end of the server's log.
func (s *Server) LogTail(n int) string {
	b, _ := os.ReadFile(filepath.Join(s.opts.ConfigDir, "server.log"))
	return tail(string(b), n)
}

// Stop ends the server by its pid (SIGTERM, SIGKILL after 5 s) and removes a temporary
// configuration folder. It may be called more than once.
func (s *Server) Stop() error {
	err := s.halt()
	if s.tempCfg {
		_ = os.RemoveAll(s.opts.ConfigDir)
	}
	return err
}

// halt ends the process with SIGTERM, and SIGKILL when it is still running 5 s later.
func (s *Server) halt() error { return s.end(5 * time.Second) }

// kill ends the process with SIGKILL at once.
func (s *Server) kill() error { return s.end(0) }

// end stops the process once: a grace above zero sends SIGTERM first and waits that long
// before SIGKILL.
func (s *Server) end(grace time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.cmd == nil {
		return nil
	}
	s.stopped = true
	if grace > 0 {
		_ = syscall.Kill(s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.done:
			return nil
		case <-time.After(grace):
		}
	}
	_ = syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
	return nil
}

// Restart stops the server and starts it again on the same ports and configuration folder
// (users, devices and tokens kept). A non-nil tls replaces the certificate files first.
func (s *Server) Restart(ctx context.Context, tls *TLSFiles) error {
	if err := s.halt(); err != nil {
		return err
	}
	if tls != nil {
		s.opts.TLS = tls
	}
	return s.launch(ctx)
}
