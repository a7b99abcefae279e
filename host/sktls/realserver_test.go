package sktls

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"devhost/host/signalk/sktest"

	"devhost/host/signalk/sktest/testcert"
	"github.com/google/uuid"
	"github.com/gorilla/websocket"
)

// device is the part of the Signal K client the test needs: HTTP calls and the stream dial,
// both through the manager's dialer, as the real client makes them.
type device struct {
	t    *testing.T
	m    *Manager
	base string // https://host:port
}

func (d *device) do(ctx context.Context, method, path, token string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, d.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	tr := &http.Transport{DialTLSContext: d.m.DialTLSContext, DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<10))
	return resp.StatusCode, b, err
}

func (d *device) stream(token string) (*websocket.Conn, error) {
	dl := websocket.Dialer{NetDialTLSContext: d.m.DialTLSContext, HandshakeTimeout: 10 * time.Second}
	h := http.Header{"Authorization": {"Bearer " + token}}
	u := "wss" + strings.TrimPrefix(d.base, "https") + "/signalk/v1/stream?subscribe=none"
	c, _, err := dl.Dial(u, h)
	return c, err
}

// TestRealServerTLS runs the TLS rules against the real signalk-server serving https with
// certificates this test makes: the probe through its redirect server, first use pinning a CA
// anchor, the access request and stream over TLS, a renewal by the same CA, a changed leaf
// refused as cert_error with no plaintext fallback, DELETE and re-pin, a leaf anchor for a
// self-signed certificate without SAN, and ca mode with PUT /sk/tls/ca.
func TestRealServerTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("real server test")
	}
	ca1 := testcert.NewCA(t, "Boat CA")
	names := testcert.Leaf{DNS: []string{"localhost"}, IPs: []string{"127.0.0.1"}}
	s := sktest.Require(t, sktest.Options{TLS: testcert.Files(t, ca1.Issue(t, names))})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := newRig(t)

	// The probe: signalk-server's http port answers 302 https://host:sslport/…
	ep, err := r.m.Resolve(ctx, s.Host, s.Port, "")
	if err != nil {
		t.Fatal(err)
	}
	if ep.Scheme != "https" || ep.Port != s.HTTPSPort || ep.Guess {
		t.Fatalf("probe of the real server: %+v (https port %d)", ep, s.HTTPSPort)
	}
	d := &device{t: t, m: r.m, base: "https://" + ep.Addr()}

	// Access request over TLS: the 202 proves the connection and commits a CA anchor.
	clientID := uuid.NewString()
	st, body, err := d.do(ctx, http.MethodPost, "/signalk/v1/access/requests", "",
		map[string]string{"clientId": clientID, "description": "devhost sktls test", "permissions": "readwrite"})
	if err != nil || st != http.StatusAccepted {
		t.Fatalf("access request: %d %s %v", st, body, err)
	}
	r.wantPin(t, "after the first answer", ep.Addr(), KindCA, ca1.Cert)
	var req struct{ Href string }
	_ = json.Unmarshal(body, &req)
	if err := s.Approve(ctx, clientID, "readwrite"); err != nil {
		t.Fatal(err)
	}
	token := ""
	for token == "" {
		st, body, err := d.do(ctx, http.MethodGet, req.Href, "", nil)
		if err != nil || st != http.StatusOK {
			t.Fatalf("poll: %d %s %v", st, body, err)
		}
		var poll struct {
			State         string
			AccessRequest struct{ Permission, Token string }
		}
		_ = json.Unmarshal(body, &poll)
		token = poll.AccessRequest.Token
		if token == "" {
			time.Sleep(200 * time.Millisecond)
		}
	}
	verify := func() error {
		st, body, err := d.do(ctx, http.MethodGet, "/signalk/v1/api/self", token, nil)
		if err != nil {
			return err
		}
		if st != http.StatusOK {
			return fmt.Errorf("GET self: %d %s", st, body)
		}
		return nil
	}
	if err := verify(); err != nil {
		t.Fatal(err)
	}
	ws, err := d.stream(token)
	if err != nil {
		t.Fatalf("wss stream: %v", err)
	}
	var hello struct{ Self string }
	_ = ws.SetReadDeadline(time.Now().Add(hangGuard))
	if err := ws.ReadJSON(&hello); err != nil || hello.Self == "" {
		t.Fatalf("hello over wss: %+v %v", hello, err)
	}
	ws.Close()
	if doc := r.m.Document(); doc.State != StateTrusted || doc.Presented == nil || doc.Presented.ChainLength != 2 {
		t.Fatalf("document: %+v", doc)
	}
	pinned, _, _ := r.st.Get(PinPrefix + ep.Addr())

	// Renewal by the same CA for the same names: accepted, pin untouched.
	renewed := ca1.Issue(t, testcert.Leaf{DNS: names.DNS, IPs: names.IPs, NotBefore: time.Now()})
	if err := s.Restart(ctx, testcert.Files(t, renewed)); err != nil {
		t.Fatal(err)
	}
	if err := verify(); err != nil {
		t.Fatalf("after renewal: %v", err)
	}
	if now, _, _ := r.st.Get(PinPrefix + ep.Addr()); now != pinned {
		t.Fatal("the renewal rewrote the pin")
	}
	if doc := r.m.Document(); doc.Presented.SHA256 != fingerprint(renewed.Leaf) {
		t.Fatal("the document does not show the renewed leaf")
	}

	// A changed leaf from another CA: cert_error on every path, no plaintext fallback.
	ca2 := testcert.NewCA(t, "Boat CA")
	changed := ca2.Issue(t, names)
	if err := s.Restart(ctx, testcert.Files(t, changed)); err != nil {
		t.Fatal(err)
	}
	err = verify()
	if !IsCertError(err) {
		t.Fatalf("changed leaf over https: %v", err)
	}
	if _, err := d.stream(token); !IsCertError(err) {
		t.Fatalf("changed leaf over wss: %v", err)
	}
	if ep2, err := r.m.Resolve(ctx, s.Host, s.Port, ""); err != nil || ep2 != ep {
		t.Fatalf("a refusal changed the scheme: %+v %v", ep2, err)
	}
	doc := r.m.Document()
	if doc.State != StateMismatch || doc.Presented.CA == nil || doc.Presented.CA.SHA256 != fingerprint(ca2.Cert) || doc.Pinned.SHA256 != fingerprint(ca1.Cert) {
		t.Fatalf("mismatch document: %+v", doc)
	}

	// DELETE /sk/tls: retry at once, the new CA pinned after the proof; the token still works.
	retries := r.retries.Load()
	rec := httptest.NewRecorder()
	r.m.handleDelete(rec, httptest.NewRequest(http.MethodDelete, "/sk/tls", nil))
	if rec.Code != http.StatusOK || r.retries.Load() != retries+1 {
		t.Fatalf("DELETE: %d %s", rec.Code, rec.Body)
	}
	if err := verify(); err != nil {
		t.Fatalf("after DELETE: %v", err)
	}
	r.wantPin(t, "re-pinned to the new CA", ep.Addr(), "", ca2.Cert)

	// A self-signed certificate without SAN (a leaf anchor) after DELETE; its replacement
	// needs an explicit trust.
	bare := testcert.SelfSigned(t, testcert.Leaf{CN: "signalk-server"})
	if err := s.Restart(ctx, testcert.Files(t, bare)); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Forget(); err != nil {
		t.Fatal(err)
	}
	if err := verify(); err != nil {
		t.Fatalf("self-signed first use: %v", err)
	}
	r.wantPin(t, "leaf anchor", ep.Addr(), KindLeaf, bare.Leaf)
	if err := s.Restart(ctx, testcert.Files(t, testcert.SelfSigned(t, testcert.Leaf{CN: "signalk-server"}))); err != nil {
		t.Fatal(err)
	}
	if err := verify(); !IsCertError(err) {
		t.Fatalf("replaced self-signed leaf: %v", err)
	}

	// ca mode: the operator's CA anchors the server at once, whatever its names.
	if err := s.Restart(ctx, testcert.Files(t, ca2.Issue(t, testcert.Leaf{DNS: []string{"boat.example"}}))); err != nil {
		t.Fatal(err)
	}
	r.cfg.Set("sk", "tls_trust", ModeCA)
	if err := verify(); !IsCertError(err) {
		t.Fatalf("ca mode without a CA: %v", err)
	}
	if rec := putCA(r.m, `{"pem":`+jsonString(pemOf(ca2.Cert))+`}`); rec.Code != http.StatusOK {
		t.Fatalf("PUT /sk/tls/ca: %d %s", rec.Code, rec.Body)
	}
	if err := verify(); err != nil {
		t.Fatalf("ca mode with the operator CA: %v", err)
	}
}
