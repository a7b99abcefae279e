package sktest

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestAccessRequestApproveAndDeny walks a device access request through approval and denial on
// the real server, the way the device's token machine will.
func TestAccessRequestApproveAndDeny(t *testing.T) {
	s := Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !strings.HasPrefix(s.Self, "urn:mrn:signalk:uuid:") {
		t.Fatalf("self %q", s.Self)
	}
	// Security is on and tokens are mandatory.
	if st, _, err := s.Do(ctx, http.MethodGet, "/signalk/v1/api/self", "", nil); err != nil || st != http.StatusUnauthorized {
		t.Fatalf("GET self without token: %d %v", st, err)
	}
	request := func(clientID string) string {
		st, body, err := s.Do(ctx, http.MethodPost, "/signalk/v1/access/requests", "",
			map[string]string{"clientId": clientID, "description": "sktest", "permissions": "readwrite"})
		if err != nil || st != http.StatusAccepted {
			t.Fatalf("access request: %d %s %v", st, body, err)
		}
		var r struct{ State, Href string }
		if err := json.Unmarshal(body, &r); err != nil || r.State != "PENDING" || r.Href == "" {
			t.Fatalf("access request answer %s: %v", body, err)
		}
		if _, err := s.WaitRequest(ctx, clientID); err != nil {
			t.Fatal(err)
		}
		return r.Href
	}
	poll := func(href string) (permission, token string) {
		st, body, err := s.Do(ctx, http.MethodGet, href, "", nil)
		if err != nil || st != http.StatusOK {
			t.Fatalf("poll: %d %s %v", st, body, err)
		}
		var r struct {
			State         string
			AccessRequest struct{ Permission, Token string }
		}
		if err := json.Unmarshal(body, &r); err != nil || r.State != "COMPLETED" {
			t.Fatalf("poll answer %s: %v", body, err)
		}
		return r.AccessRequest.Permission, r.AccessRequest.Token
	}

	href := request("sktest-approve")
	if err := s.Approve(ctx, "sktest-approve", "readwrite"); err != nil {
		t.Fatal(err)
	}
	perm, token := poll(href)
	if perm != "APPROVED" || token == "" {
		t.Fatalf("approved poll: %s %q", perm, token)
	}
	st, body, err := s.Do(ctx, http.MethodGet, "/signalk/v1/api/self", token, nil)
	if err != nil || st != http.StatusOK || !strings.Contains(string(body), s.Self) {
		t.Fatalf("GET self with the device token: %d %s %v", st, body, err)
	}

	href = request("sktest-deny")
	if err := s.Deny(ctx, "sktest-deny"); err != nil {
		t.Fatal(err)
	}
	if perm, token := poll(href); perm != "DENIED" || token != "" {
		t.Fatalf("denied poll: %s %q", perm, token)
	}

	if _, ok, err := s.Value(ctx, "electrical.nothing.here"); err != nil || ok {
		t.Fatalf("missing path: ok=%v err=%v", ok, err)
	}
}

// TestStopByPid: Stop ends the node process itself and a second Stop is harmless.
func TestStopByPid(t *testing.T) {
	s := Require(t, Options{})
	pid := s.Pid()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("pid %d still alive after Stop", pid)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.ConfigDir()); !os.IsNotExist(err) {
		t.Fatalf("temporary config dir left: %v", err)
	}
}

func TestInstallIsIdempotent(t *testing.T) {
	dir := Ensure(t)
	if !Installed(dir) {
		t.Fatal("Ensure returned but the folder is not installed")
	}
	// A no-op takes neither the folder's lock nor npm: with its context already ended, any
	// work would fail at the lock, and nothing may be logged.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var log strings.Builder
	if err := Install(ctx, dir, &log); err != nil || log.Len() != 0 {
		t.Fatalf("a second install did work (%v, log %q); it must be a no-op", err, log.String())
	}
}

// Config reads what was set, as the zero value for a missing key or another type, hands out
// copies of blobs, and tells listeners after the change.
func TestConfig(t *testing.T) {
	c := NewConfig(map[string]any{"sk.port": 3000, "sk.scheme": "auto"})
	var told []string
	c.OnChange(func(ns, key string) { told = append(told, ns+"."+key+"="+c.String(ns, key)) })
	c.Set("sk", "scheme", "http")
	c.Set("sk", "ca", []byte("pem"))
	if c.Int("sk", "port") != 3000 || c.String("sk", "scheme") != "http" || c.String("sk", "port") != "" || c.Bool("sk", "none") {
		t.Fatalf("reads: %d %q", c.Int("sk", "port"), c.String("sk", "scheme"))
	}
	b := c.Blob("sk", "ca")
	b[0] = 'x'
	if string(c.Blob("sk", "ca")) != "pem" || c.Blob("sk", "none") != nil {
		t.Fatal("Blob does not hand out a copy")
	}
	if len(told) != 2 || told[0] != "sk.scheme=http" || told[1] != "sk.ca=" {
		t.Fatalf("listeners told %v", told)
	}
}
