package main_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"devhost/host/signalk/sktest"
	"devhost/host/signalk/sktest/testcert"
)

// The whole device against the real signalk-server serving https: the probe finds TLS behind
// the http port, first use pins the CA, a renewal by that CA passes unnoticed, a leaf from
// another CA is cert_error (token kept, alarm raised, no plaintext), DELETE /sk/tls re-pins and
// resumes with the same token, and a power cut keeps both pin and token.
func TestSignalKTLSEndToEnd(t *testing.T) {
	s, ca1, leaf1 := tlsSignalK(t)
	ctx := guardCtx(t, 2)

	d := newDev(t)
	seen := collectEvents(d.events())
	d.putConfig(tofuConfig(s, `"health_s":1`))
	httpsAddr := net.JoinHostPort(s.Host, strconv.Itoa(s.HTTPSPort))

	// onHTTPS checks the scheme the device uses: https on the port the probe found, never a guess.
	onHTTPS := func(what string, st skStatus) {
		t.Helper()
		if st.Server.Scheme != "https" || st.Server.Port != s.HTTPSPort || st.Server.Host != s.Host || st.Server.Guess {
			t.Fatalf("%s: server %+v, want https on %s", what, st.Server, httpsAddr)
		}
	}
	tlsDoc := func() skTLSDoc {
		t.Helper()
		return getDoc[skTLSDoc](d, "/api/v1/sk/tls")
	}
	certCondition := func() string {
		t.Helper()
		state, _ := d.condition("skCertificate")["state"].(string)
		return state
	}
	waitCertCondition := func(want string) {
		t.Helper()
		pollUntil(t, "skCertificate, want "+want, hangGuard, certCondition, func(got string) bool { return got == want })
	}
	// uptime is the device's telemetry as the server holds it (a server restart forgets it).
	waitUptime := func(what string, ok func(float64) bool) float64 {
		t.Helper()
		var up float64
		if _, err := s.WaitValue(ctx, "dev.dev-abcd.uptime", func(v json.RawMessage) bool {
			return json.Unmarshal(v, &up) == nil && ok(up)
		}); err != nil {
			t.Fatalf("%s: telemetry on the server: %v", what, err)
		}
		return up
	}
	// tokenKept fails when an sk event since mark shows the token dropped or asked for anew.
	tokenKept := func(what string, mark int) {
		t.Helper()
		for _, e := range seen.since(mark) {
			if e.name != "sk" {
				continue
			}
			var st skStatus
			if err := json.Unmarshal([]byte(e.data), &st); err != nil {
				t.Fatalf("sk event %q: %v", e.data, err)
			}
			switch st.Token.State {
			case "IDLE", "REQUESTED", "DENIED", "ERROR":
				t.Fatalf("%s: the token machine went through %s: %s", what, st.Token.State, e.data)
			}
			if st.Token.State != "NO_SERVER" && !st.Token.HasToken {
				t.Fatalf("%s: the token was dropped: %s", what, e.data)
			}
		}
	}

	// 1. The probe finds https behind the http port; the request is approved over TLS.
	st := d.approveSK(ctx, s)
	onHTTPS("while requesting", st)
	clientID := st.Token.ClientID
	st = d.waitSK("approved and streaming", skStreaming)
	onHTTPS("approved", st)
	if st.Server.Self != s.Self || !st.Token.HasToken || st.Token.ClientID != clientID {
		t.Fatalf("approved status: %+v (server self %s)", st, s.Self)
	}
	up := waitUptime("first connection", func(float64) bool { return true })

	// 2. First use pinned the CA for the leaf's names.
	doc := tlsDoc()
	pinnedAt := checkPinnedCA(t, "after first use", doc, httpsAddr, ca1, leaf1)
	if doc.Presented.ChainLength != 2 {
		t.Fatalf("presented chain length %d, want 2", doc.Presented.ChainLength)
	}
	if c := certCondition(); c != "normal" && c != "" {
		t.Fatalf("skCertificate while trusted: %q", c)
	}
	seen.wait(t, 0, hangGuard, "sk_tls event with the CA pinned", func(e event) bool {
		var doc skTLSDoc
		return e.name == "sk_tls" && json.Unmarshal([]byte(e.data), &doc) == nil &&
			doc.State == "trusted" && doc.Pinned != nil && doc.Pinned.SHA256 == testcert.Fingerprint(ca1.Cert)
	})

	// 3. A renewal by the same CA: the device reconnects by itself and keeps streaming.
	mark := seen.len()
	renewed := ca1.Issue(t, skLeaf)
	if err := s.Restart(ctx, testcert.Files(t, renewed)); err != nil {
		t.Fatal(err)
	}
	seen.wait(t, mark, hangGuard, "sk_ws disconnected by the restart", wsConnected(false))
	seen.wait(t, mark, hangGuard, "sk_ws connected after the renewal", wsConnected(true))
	waitUptime("after the renewal", func(v float64) bool { return v >= up })
	st = d.waitSK("streaming after the renewal", skStreaming)
	onHTTPS("after the renewal", st)
	doc = tlsDoc()
	if at := checkPinnedCA(t, "after the renewal", doc, httpsAddr, ca1, renewed); !at.Equal(pinnedAt) {
		t.Fatalf("the renewal re-pinned: pinned_at %v, was %v", at, pinnedAt)
	}
	for _, e := range seen.since(mark) {
		if e.name == "sk" || e.name == "sk_ws" || e.name == "sk_tls" {
			if bytes.Contains([]byte(e.data), []byte("cert_error")) || bytes.Contains([]byte(e.data), []byte(`"mismatch"`)) {
				t.Fatalf("the renewal was refused: %s %s", e.name, e.data)
			}
		}
	}
	tokenKept("renewal", mark)

	// 4. A leaf from another CA (same subject): cert_error, token kept, alarm, no plaintext.
	mark = seen.len()
	ca2 := testcert.NewCA(t, "Boat CA")
	changed := ca2.Issue(t, skLeaf)
	if err := s.Restart(ctx, testcert.Files(t, changed)); err != nil {
		t.Fatal(err)
	}
	st = d.waitSK("cert_error after the changed leaf", func(st skStatus) bool { return st.Token.State == "cert_error" })
	onHTTPS("in cert_error", st)
	if st.Token.Reason == "" || !st.Token.HasToken || st.WS.Connected || st.Token.ClientID != clientID {
		t.Fatalf("cert_error status: %+v", st)
	}
	if st.Token.Resume != "APPROVED" && st.Token.Resume != "VERIFYING" {
		t.Fatalf("cert_error resumes %q, want the approved flow", st.Token.Resume)
	}
	seen.wait(t, mark, hangGuard, "sk event with cert_error", func(e event) bool {
		var st skStatus
		return e.name == "sk" && json.Unmarshal([]byte(e.data), &st) == nil &&
			st.Token.State == "cert_error" && st.Token.Reason != "" && st.Server.Scheme == "https"
	})
	seen.wait(t, mark, hangGuard, "sk_tls event with the mismatch", func(e event) bool {
		var doc skTLSDoc
		return e.name == "sk_tls" && json.Unmarshal([]byte(e.data), &doc) == nil && doc.State == "mismatch" &&
			doc.Presented != nil && doc.Presented.SHA256 == testcert.Fingerprint(changed.Leaf)
	})
	doc = tlsDoc()
	if doc.State != "mismatch" || doc.Error == "" || doc.Server != httpsAddr ||
		doc.Pinned == nil || doc.Pinned.SHA256 != testcert.Fingerprint(ca1.Cert) ||
		doc.Presented == nil || doc.Presented.SHA256 != testcert.Fingerprint(changed.Leaf) ||
		doc.Presented.CA == nil || doc.Presented.CA.SHA256 != testcert.Fingerprint(ca2.Cert) {
		t.Fatalf("GET /sk/tls in cert_error: %+v", doc)
	}
	waitCertCondition("alarm")
	// The stream stays down and nothing reaches the server by any port: the restart emptied
	// its data, so any delta from the device would bring the uptime back.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if v, ok, err := s.Value(ctx, "dev.dev-abcd.uptime"); err != nil || ok {
			t.Fatalf("telemetry reached the server in cert_error: %s %v", v, err)
		}
		st := d.sk()
		onHTTPS("in cert_error", st)
		if st.Token.State != "cert_error" || st.WS.Connected {
			t.Fatalf("left cert_error by itself: %+v", st)
		}
	}
	tokenKept("changed leaf", mark)

	// 5. DELETE /sk/tls: the new CA is pinned and the same token streams again.
	mark = seen.len()
	r := d.call("DELETE", "/api/v1/sk/tls", "")
	var del skTLSDoc
	if r.status != 200 || json.Unmarshal(r.body, &del) != nil || del.Mode != "tofu" {
		t.Fatalf("DELETE /sk/tls: %d %s", r.status, r.body)
	}
	// The retry runs at once, so the answer may already show the new pin, never the old one.
	if del.Pinned != nil && del.Pinned.SHA256 != testcert.Fingerprint(ca2.Cert) {
		t.Fatalf("DELETE /sk/tls kept the old pin: %s", r.body)
	}
	st = d.waitSK("streaming after DELETE /sk/tls", skStreaming)
	onHTTPS("after DELETE /sk/tls", st)
	up = waitUptime("after DELETE /sk/tls", func(float64) bool { return true })
	doc = tlsDoc()
	repinnedAt := checkPinnedCA(t, "after DELETE /sk/tls", doc, httpsAddr, ca2, changed)
	waitCertCondition("normal")
	tokenKept("DELETE /sk/tls", mark)
	noNewRequest(ctx, t, s, "after DELETE /sk/tls", clientID)

	// 6. A power cut keeps the pin and the token.
	d.powerCut()
	d.powerOn()
	seen = collectEvents(d.events())
	st = d.waitSK("streaming after the power cut", skStreaming)
	onHTTPS("after the power cut", st)
	if st.Token.ClientID != clientID {
		t.Fatalf("client id after the power cut: %q, was %q", st.Token.ClientID, clientID)
	}
	// The app's uptime starts again, so a smaller value is telemetry of the new boot.
	waitUptime("after the power cut", func(v float64) bool { return v < up })
	if at := checkPinnedCA(t, "after the power cut", tlsDoc(), httpsAddr, ca2, changed); !at.Equal(repinnedAt) {
		t.Fatalf("the power cut re-pinned: pinned_at %v, was %v", at, repinnedAt)
	}
	tokenKept("power cut", 0)
	noNewRequest(ctx, t, s, "after the power cut", clientID)
	if c := certCondition(); c != "normal" && c != "" {
		t.Fatalf("skCertificate after the power cut: %q", c)
	}
}

// checkPinnedCA checks a trusted /sk/tls document with ca pinned for leaf's names and leaf
// presented, and answers pinned_at.
func checkPinnedCA(t *testing.T, what string, doc skTLSDoc, addr string, ca *testcert.CA, leaf tls.Certificate) time.Time {
	t.Helper()
	p := doc.Pinned
	switch {
	case doc.Server != addr || doc.Mode != "tofu" || doc.State != "trusted" || doc.Error != "":
		t.Fatalf("%s: /sk/tls %+v, want tofu trusted for %s", what, doc, addr)
	case doc.Anchor == nil || *doc.Anchor != "ca":
		t.Fatalf("%s: anchor %v, want ca", what, doc.Anchor)
	case p == nil || p.Kind != "ca" || !p.IsCA || p.SHA256 != testcert.Fingerprint(ca.Cert) || p.Subject != ca.Cert.Subject.String():
		t.Fatalf("%s: pinned %+v, want the CA %s", what, p, testcert.Fingerprint(ca.Cert))
	case !reflect.DeepEqual(p.Names, []string{"127.0.0.1", "localhost"}):
		t.Fatalf("%s: pinned names %v", what, p.Names)
	case p.PinnedAt.IsZero():
		t.Fatalf("%s: pinned_at unset", what)
	case doc.Presented == nil || doc.Presented.SHA256 != testcert.Fingerprint(leaf.Leaf) || doc.Presented.IsCA:
		t.Fatalf("%s: presented %+v, want the leaf %s", what, doc.Presented, testcert.Fingerprint(leaf.Leaf))
	case doc.Presented.CA == nil || doc.Presented.CA.SHA256 != testcert.Fingerprint(ca.Cert):
		t.Fatalf("%s: presented CA %+v", what, doc.Presented.CA)
	}
	return p.PinnedAt
}

func wsConnected(want bool) func(event) bool {
	return func(e event) bool {
		var ws struct{ Connected bool }
		return e.name == "sk_ws" && json.Unmarshal([]byte(e.data), &ws) == nil && ws.Connected == want
	}
}

// skTLSIdentity and skTLSDoc are the /sk/tls document (and the sk_tls event).
type skTLSIdentity struct {
	Subject string
	SHA256  string
	IsCA    bool `json:"is_ca"`
}

type skTLSDoc struct {
	Server string
	Mode   string
	State  string
	Anchor *string
	Pinned *struct {
		skTLSIdentity
		Kind     string
		Names    []string
		PinnedAt time.Time `json:"pinned_at"`
	}
	Presented *struct {
		skTLSIdentity
		CA          *skTLSIdentity
		ChainLength int `json:"chain_length"`
	}
	Error string
}

// eventLog keeps every event of one /events subscription so a phase can look back at what
// happened since it began; its goroutine ends when the subscription does.
type eventLog struct {
	mu   sync.Mutex
	all  []event
	done bool
	cond *sync.Cond
}

func collectEvents(evs <-chan event) *eventLog {
	l := &eventLog{}
	l.cond = sync.NewCond(&l.mu)
	go func() {
		for e := range evs {
			l.mu.Lock()
			l.all = append(l.all, e)
			l.cond.Broadcast()
			l.mu.Unlock()
		}
		l.mu.Lock()
		l.done = true
		l.cond.Broadcast()
		l.mu.Unlock()
	}()
	return l
}

func (l *eventLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

func (l *eventLog) since(i int) []event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]event(nil), l.all[i:]...)
}

// wait answers the first event from index from on that ok accepts.
func (l *eventLog) wait(t *testing.T, from int, timeout time.Duration, what string, ok func(event) bool) event {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	i, hit := from, -1
	if !condWait(l.cond, timeout, func() bool {
		for ; i < len(l.all); i++ {
			if ok(l.all[i]) {
				hit = i
				return true
			}
		}
		return l.done
	}) {
		t.Fatalf("%s: no such event within %v", what, timeout)
	}
	if hit < 0 {
		t.Fatalf("%s: the event stream ended", what)
	}
	return l.all[hit]
}

// skLeaf is what the device's server certificate names: the addresses it dials.
var skLeaf = testcert.Leaf{CN: "signalk-server", DNS: []string{"localhost"}, IPs: []string{"127.0.0.1"}}

// tlsSignalK starts the real server serving https with a leaf for skLeaf issued by a new CA,
// and answers the server, the CA and the leaf.
func tlsSignalK(t *testing.T) (*sktest.Server, *testcert.CA, tls.Certificate) {
	t.Helper()
	ca := testcert.NewCA(t, "Boat CA")
	leaf := ca.Issue(t, skLeaf)
	return sktest.Require(t, sktest.Options{TLS: testcert.Files(t, leaf)}), ca, leaf
}

// tofuConfig is the configuration that points a device at s with the scheme probed and the
// CA pinned on first use; skExtra adds members to the sk namespace. A short WiFi backoff cap
// lets the stream notice each restart of the server within seconds.
func tofuConfig(s *sktest.Server, skExtra string) string {
	sk := fmt.Sprintf(`"server_host":%q,"server_port":%d,"scheme":"auto","tls_trust":"tofu"`, s.Host, s.Port)
	if skExtra != "" {
		sk += "," + skExtra
	}
	return `{"sk":{` + sk + `},"wifi":{"backoff_max_s":2}}`
}
