package signalk

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

const (
	testSelf  = "urn:mrn:signalk:uuid:11111111-2222-4333-8444-555555555555"
	testHref  = "/signalk/v1/requests/r1"
	pendingJS = `{"state":"PENDING","requestId":"r1","statusCode":202,"href":"/signalk/v1/requests/r1"}`
	approved  = `{"state":"COMPLETED","statusCode":200,"accessRequest":{"permission":"APPROVED","token":"tok1"}}`
	deniedJS  = `{"state":"COMPLETED","statusCode":200,"accessRequest":{"permission":"DENIED"}}`
)

func selfOK(p *peer, token string) {
	p.on("GET", pathSelf, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`"vessels.` + testSelf + `"`))
	})
}

// Row: NO_SERVER → IDLE, then POST; IDLE 202 PENDING with href → REQUESTED, href persisted.
func TestTokenRequestThenRequested(t *testing.T) {
	p := newPeer(t, false)
	p.pendingRequest(http.StatusOK, pendingJS)
	r := newRig(t, p, nil).start()
	st := r.waitState(StateRequested, true)
	if st.Pending != testHref {
		t.Fatalf("pending href %q", st.Pending)
	}
	posts := p.calls("POST", pathRequests)
	if len(posts) != 1 {
		t.Fatalf("%d requests", len(posts))
	}
	var body map[string]string
	if err := json.Unmarshal([]byte(posts[0].Body), &body); err != nil {
		t.Fatal(err)
	}
	if body["clientId"] != r.c.ClientID() || body["permissions"] != "readwrite" || body["description"] == "" {
		t.Fatalf("request body %v", body)
	}
	if posts[0].Auth != "" || posts[0].Accept != "application/json" {
		t.Fatalf("request headers auth=%q accept=%q", posts[0].Auth, posts[0].Accept)
	}
	// The client id is a v4 UUID in device state.
	if u, err := uuid.Parse(r.c.ClientID()); err != nil || u.Version() != 4 {
		t.Fatalf("client id %q", r.c.ClientID())
	}
	if v, ok, _ := r.st.Get(keyClientID); !ok || v != r.c.ClientID() {
		t.Fatalf("client id not in the store: %q", v)
	}
	// The href is persisted for this server (address key until its self URN is known).
	recs := r.c.st.records()
	found := false
	for _, rec := range recs {
		found = found || rec.Href == testHref
	}
	if !found {
		t.Fatalf("href not persisted: %v", recs)
	}
	if r.stream.target().Host != "" {
		t.Fatalf("stream target while REQUESTED: %+v", r.stream.target())
	}
}

// Row: REQUESTED polls every 5 s growing ×1.5 up to 60 s while PENDING.
func TestTokenPollBackoff(t *testing.T) {
	p, r := requestedRig(t, http.StatusOK, pendingJS)
	want := []time.Duration{5000, 7500, 11250, 16875, 25312, 37968, 56953, 60000, 60000}
	for i, w := range want {
		got := r.nextRetry()
		if d := got - w*time.Millisecond; d < -time.Millisecond || d > time.Millisecond {
			t.Fatalf("poll %d: delay %s, want %s", i, got, w*time.Millisecond)
		}
		n := len(p.calls("GET", testHref))
		r.clk.Advance(got)
		eventually(t, "poll", func() bool { return len(p.calls("GET", testHref)) == n+1 && r.nextRetry() > 0 })
	}
	if r.c.tm.Status().State != StateRequested {
		t.Fatal("left REQUESTED while PENDING")
	}
}

// Rows: REQUESTED COMPLETED APPROVED → VERIFYING (token persisted); VERIFYING 200 → APPROVED,
// self URN learned, re-check every sk.check_s; the stream gets the token.
func TestTokenApprovedVerifiedApproved(t *testing.T) {
	p := approvingPeer(t)
	r := newRig(t, p, nil)
	r.cfg.Set("sk", "check_s", 600)
	r.start()
	r.waitState(StateRequested, true)
	r.clk.Advance(PollFirst)
	r.waitState(StateApproved, true)
	if d := r.nextRetry(); d != 600*time.Second {
		t.Fatalf("re-check in %s, want 600 s", d)
	}
	rec, err := r.c.st.load(testSelf)
	if err != nil || rec.Token != "tok1" || rec.Href != "" {
		t.Fatalf("record under the self URN: %+v %v", rec, err)
	}
	if r.c.Status().Server.Self != testSelf {
		t.Fatalf("self not learned: %+v", r.c.Status().Server)
	}
	if tg := r.stream.target(); tg.Token != "tok1" || tg.Host == "" {
		t.Fatalf("stream target %+v", tg)
	}
	// Re-check after check_s.
	n := len(p.calls("GET", pathSelf))
	r.clk.Advance(600 * time.Second)
	eventually(t, "re-check", func() bool { return len(p.calls("GET", pathSelf)) == n+1 })
	r.waitState(StateApproved, true)
	// After a reboot the stored token goes straight to VERIFYING (row NO_SERVER, token stored).
	r.stop()
	p.mu.Lock()
	p.log = nil
	p.mu.Unlock()
	r2 := newRig(t, p, nil)
	r2.st, r2.opts.Store = r.st, r.st
	r2.start()
	r2.waitState(StateApproved, true)
	if len(p.calls("POST", pathRequests)) != 0 || len(p.calls("GET", pathSelf)) != 1 {
		t.Fatalf("reboot with a token: %d requests, %d verifies", len(p.calls("POST", pathRequests)), len(p.calls("GET", pathSelf)))
	}
	if r2.c.ClientID() != r.c.ClientID() {
		t.Fatal("client id changed across a reboot")
	}
}

// Row: NO_SERVER with a pending href stored → REQUESTED, polling resumes at once.
func TestTokenPendingResumes(t *testing.T) {
	p := newPeer(t, false)
	p.answer("GET", testHref, http.StatusOK, pendingJS)
	r := newRig(t, p, nil)
	r.keep(p, record{Href: testHref})
	r.start()
	r.waitState(StateRequested, true)
	if len(p.calls("GET", testHref)) != 1 || len(p.calls("POST", pathRequests)) != 0 {
		t.Fatal("polling did not resume without a new request")
	}
}

// Rows: IDLE 404 → OPEN (no token, re-POST every 60 s); a 202 later → REQUESTED.
func TestTokenOpen(t *testing.T) {
	p := newPeer(t, false)
	p.answer("POST", pathRequests, http.StatusNotFound, "Not Found")
	r := newRig(t, p, nil).start()
	r.waitState(StateOpen, true)
	if tg := r.stream.target(); tg.Host == "" || tg.Token != "" {
		t.Fatalf("OPEN streams without a token: %+v", tg)
	}
	r.clk.Advance(59 * time.Second)
	time.Sleep(20 * time.Millisecond)
	if n := len(p.calls("POST", pathRequests)); n != 1 {
		t.Fatalf("re-POST before 60 s: %d", n)
	}
	r.clk.Advance(time.Second)
	eventually(t, "re-POST", func() bool { return len(p.calls("POST", pathRequests)) == 2 })
	r.waitState(StateOpen, true)
	p.pendingRequest(http.StatusOK, pendingJS)
	r.clk.Advance(60 * time.Second)
	r.waitState(StateRequested, true)
	if tg := r.stream.target(); tg.Host != "" {
		t.Fatalf("stream kept a target after security came on: %+v", tg)
	}
}

// Row: IDLE 403 → DENIED, no retry; POST /sk/request asks again.
func TestTokenForbiddenDenied(t *testing.T) {
	p := newPeer(t, false)
	p.answer("POST", pathRequests, http.StatusForbidden, "Forbidden")
	r := newRig(t, p, nil).start()
	st := r.waitState(StateDenied, false)
	if st.NextRetryS != nil {
		t.Fatal("DENIED schedules a retry")
	}
	r.clk.Advance(24 * time.Hour)
	time.Sleep(20 * time.Millisecond)
	if n := len(p.calls("POST", pathRequests)); n != 1 {
		t.Fatalf("DENIED retried on its own: %d requests", n)
	}
}

// Row: IDLE 400 already requested → ERROR, retry in 60 s (flat).
func TestTokenAlreadyRequested(t *testing.T) {
	p := newPeer(t, false)
	p.answer("POST", pathRequests, http.StatusBadRequest,
		`{"state":"COMPLETED","statusCode":400,"message":"A device with clientId 'x' has already requested access"}`)
	r := newRig(t, p, nil).start()
	for i := 1; i <= 3; i++ {
		r.waitState(StateError, true)
		if d := r.nextRetry(); d != FlatRetry {
			t.Fatalf("attempt %d: retry in %s, want 60 s", i, d)
		}
		r.clk.Advance(FlatRetry)
		eventually(t, "retry", func() bool { return len(p.calls("POST", pathRequests)) == i+1 })
	}
}

// Row: IDLE unreachable or 5xx → ERROR, backoff 10 s doubling to 5 min; junk answers too.
func TestTokenErrorBackoff(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(p *peer)
	}{
		{"5xx", func(p *peer) { p.answer("POST", pathRequests, http.StatusServiceUnavailable, "down") }},
		{"html", func(p *peer) { p.answer("POST", pathRequests, http.StatusAccepted, "<html>hello</html>") }},
		{"truncated", func(p *peer) {
			p.answer("POST", pathRequests, http.StatusAccepted, `{"state":"PENDING","href":"/x","pad":"`+strings.Repeat("a", 17000)+`"}`)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPeer(t, false)
			tc.script(p)
			r := newRig(t, p, nil).start()
			for i, want := range []time.Duration{10, 20, 40, 80, 160, 300, 300} {
				r.waitState(StateError, true)
				if d := r.nextRetry(); d != want*time.Second {
					t.Fatalf("attempt %d: backoff %s, want %s", i, d, want*time.Second)
				}
				r.clk.Advance(want * time.Second)
				eventually(t, "retry", func() bool { return len(p.calls("POST", pathRequests)) == i+2 })
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		p := newPeer(t, false)
		r := newRig(t, p, nil)
		p.Close() // nothing listens any more
		r.start()
		st := r.waitState(StateError, true)
		if d := r.nextRetry(); d != 10*time.Second || !strings.Contains(st.Reason, "unreachable") {
			t.Fatalf("unreachable: %s %q", d, st.Reason)
		}
	})
}

// Rows: REQUESTED COMPLETED DENIED → DENIED (no retry); POST /sk/request asks again.
func TestTokenDeniedThenRequestAgain(t *testing.T) {
	p, r := requestedRig(t, http.StatusOK, deniedJS)
	r.clk.Advance(PollFirst)
	r.waitState(StateDenied, false)
	r.clk.Advance(time.Hour)
	time.Sleep(20 * time.Millisecond)
	if n := len(p.calls("POST", pathRequests)); n != 1 {
		t.Fatalf("DENIED asked again on its own: %d", n)
	}
	p.answer("GET", testHref, http.StatusOK, pendingJS)
	rec := postJSON(t, r.c.postRequest, "")
	if rec.Code != http.StatusAccepted {
		t.Fatalf("POST /sk/request: %d %s", rec.Code, rec.Body)
	}
	r.waitState(StateRequested, true)
	if n := len(p.calls("POST", pathRequests)); n != 2 {
		t.Fatalf("requests after POST /sk/request: %d", n)
	}
}

// Row: REQUESTED poll answered 404, or 500 not found → IDLE, request again.
func TestTokenPollNotFound(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
	}{{404, "Not Found"}, {500, "Unable to check request: not found"}} {
		p, r := requestedRig(t, tc.status, tc.body)
		r.clk.Advance(PollFirst)
		eventually(t, "request again", func() bool { return len(p.calls("POST", pathRequests)) == 2 })
		r.stop()
	}
	// Any other 500 keeps polling.
	p, r := requestedRig(t, 500, "boom")
	r.clk.Advance(PollFirst)
	eventually(t, "poll", func() bool { return len(p.calls("GET", testHref)) == 1 })
	r.waitState(StateRequested, true)
	if len(p.calls("POST", pathRequests)) != 1 {
		t.Fatal("a plain 500 made the device request again")
	}
}

// Plaintext 401 rule: one 401 schedules a re-check in 5 s; two in a row drop the token.
func TestTokenPlaintext401Rule(t *testing.T) {
	p := approvingPeer(t)
	r := newRig(t, p, nil).start()
	r.approve()

	// A 401 from another call: re-check in 5 s, token kept.
	var refuse atomic.Bool
	refuse.Store(true)
	p.on("GET", "/signalk/v1/api/vessels/self/x", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
	})
	p.on("GET", pathSelf, func(w http.ResponseWriter, _ *http.Request) {
		if refuse.Load() {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`"vessels.` + testSelf + `"`))
	})
	if st, _, err := r.c.HTTP(t.Context(), "GET", "/signalk/v1/api/vessels/self/x", nil); err != nil || st != 401 {
		t.Fatalf("helper call: %d %v", st, err)
	}
	st := r.waitState(StateVerifying, true)
	if d := r.nextRetry(); d != RecheckPlain || !st.HasToken {
		t.Fatalf("after one 401: re-check in %s, token kept %v", d, st.HasToken)
	}
	// The re-check succeeds: one 401 alone never clears the token.
	refuse.Store(false)
	r.clk.Advance(RecheckPlain)
	r.waitState(StateApproved, true)

	// Now two in a row: the re-check is refused too.
	refuse.Store(true)
	_, _, _ = r.c.HTTP(t.Context(), "GET", "/signalk/v1/api/vessels/self/x", nil)
	r.waitState(StateVerifying, true)
	p.pendingRequest(http.StatusOK, pendingJS)
	r.clk.Advance(RecheckPlain)
	st = r.waitState(StateRequested, true)
	if st.HasToken {
		t.Fatal("token kept after two 401s in a row")
	}
	rec, _ := r.c.st.load(testSelf)
	if rec.Token != "" {
		t.Fatalf("dropped token still stored: %+v", rec)
	}
}

// The stream's 401 is reported to the token machine like any other call's.
func TestTokenStream401(t *testing.T) {
	p := approvingPeer(t)
	r := newRig(t, p, nil).start()
	r.approve()
	// The target is handed to the stream just after the state is published.
	eventually(t, "stream target", func() bool { return r.stream.target().Token == "tok1" })
	r.c.StreamUnauthorized()
	r.waitState(StateVerifying, true)
	if r.nextRetry() != RecheckPlain {
		t.Fatal("stream 401 did not schedule the 5 s re-check")
	}
	r.c.StreamUnauthorized() // a second one before the re-check: two in a row
	p.answer("GET", testHref, http.StatusOK, pendingJS)
	st := r.waitState(StateRequested, true)
	if st.HasToken {
		t.Fatal("token kept")
	}
}

// POST /sk/token is verified at once: accepted → APPROVED (200); refused → 400, nothing kept.
func TestTokenSetByHand(t *testing.T) {
	p := newPeer(t, false)
	p.answer("POST", pathRequests, http.StatusForbidden, "Forbidden")
	selfOK(p, "good")
	r := newRig(t, p, nil).start()
	r.waitState(StateDenied, false)

	rec := postJSON(t, r.c.postToken, `{"token":"bad"}`)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"path":"token"`) {
		t.Fatalf("refused token: %d %s", rec.Code, rec.Body)
	}
	if r.c.tm.Status().State != StateDenied {
		t.Fatal("a refused token changed the state")
	}
	rec = postJSON(t, r.c.postToken, `{"token":"good"}`)
	if rec.Code != http.StatusOK {
		t.Fatalf("good token: %d %s", rec.Code, rec.Body)
	}
	var doc StatusDoc
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.Token.State != StateApproved || doc.Server.Self != testSelf {
		t.Fatalf("answer %s: %v", rec.Body, err)
	}
	if tg := r.stream.target(); tg.Token != "good" {
		t.Fatalf("stream target %+v", tg)
	}
	for _, tc := range []struct{ body, path string }{
		{`{}`, "token"},
		{`{"token":""}`, "token"},
		{`{"token":5}`, "token"},
		{`{"token":"a","x":1}`, "x"},
		{`{"token":"a b"}`, "token"},
		{`[]`, ""},
	} {
		rec := postJSON(t, r.c.postToken, tc.body)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"path":"`+tc.path+`"`) {
			t.Fatalf("%s: %d %s, want 400 naming %q", tc.body, rec.Code, rec.Body, tc.path)
		}
	}
}

// Without a server: NO_SERVER, and the endpoints answer 409.
func TestTokenNoServer(t *testing.T) {
	r := newRig(t, nil, nil).start()
	r.waitState(StateNoServer, false)
	if rec := postJSON(t, r.c.postToken, `{"token":"x"}`); rec.Code != http.StatusConflict {
		t.Fatalf("POST /sk/token without server: %d", rec.Code)
	}
	if rec := postJSON(t, r.c.postRequest, ""); rec.Code != http.StatusConflict {
		t.Fatalf("POST /sk/request without server: %d", rec.Code)
	}
	if doc := r.c.Status(); doc.Server.Source != "none" {
		t.Fatalf("server %+v", doc.Server)
	}
}

// approvingPeer is a server that answers the access request PENDING, then APPROVED with
// token tok1 at the first poll, and accepts that token.
func approvingPeer(t *testing.T) *peer {
	p := newPeer(t, false)
	p.pendingRequest(http.StatusOK, approved)
	selfOK(p, "tok1")
	return p
}

// approve takes a started rig through REQUESTED to APPROVED at the first poll.
func (r *rig) approve() {
	r.waitState(StateRequested, true)
	r.clk.Advance(PollFirst)
	r.waitState(StateApproved, true)
}
