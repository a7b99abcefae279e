package signalk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Token states (the spec's access token table; the strings are what /sk/status shows).
const (
	StateNoServer  = "NO_SERVER"
	StateIdle      = "IDLE"
	StateRequested = "REQUESTED"
	StateVerifying = "VERIFYING"
	StateApproved  = "APPROVED"
	StateOpen      = "OPEN"
	StateDenied    = "DENIED"
	StateError     = "ERROR"
	StateCertError = "cert_error"
)

// Paths on the server.
const (
	pathRequests = "/signalk/v1/access/requests"
	pathSelf     = "/signalk/v1/api/self"
)

// TokenStatus is the `token` object of /sk/status.
type TokenStatus struct {
	State      string `json:"state"`
	SinceS     int64  `json:"since_s"`
	NextRetryS *int64 `json:"next_retry_s"`
	ClientID   string `json:"client_id"`
	HasToken   bool   `json:"has_token"`
	Pending    string `json:"pending_href,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// Resume is the state cert_error returns to when the handshake matches again.
	Resume string `json:"resume,omitempty"`
}

// tokenMachine is the access-token state machine. One goroutine (run) owns every field below
// mu's; other goroutines talk to it through cmds.
type tokenMachine struct {
	clk         clockwork.Clock
	log         *slog.Logger
	http        *httpHelper
	st          persist
	clientID    string
	permissions func() string
	description func() string
	checkEvery  func() time.Duration
	// changed is called (on the machine's goroutine) after every transition.
	changed func()
	// nudge makes the next publish call changed although nothing changed: OPEN's 60 s re-POST
	// confirming OPEN is the client's cue to retry a stream the server refused meanwhile.
	nudge bool
	// unreachable is told about a server that did not answer (discovered servers are skipped).
	unreachable func(Server)
	// guessTried is told after each call to a server whose scheme is a guess, so the scheme
	// is asked again before the next attempt.
	guessTried func()

	cmds chan func()

	// Owned by run.
	srv     *Server
	key     string
	rec     record
	state   string
	reason  string
	strikes int // consecutive 401/403 over plaintext
	backoff time.Duration
	poll    time.Duration
	resume  string // state to resume after cert_error
	timer   clockwork.Timer
	due     time.Time
	action  func()
	ctx     context.Context

	mu    sync.Mutex
	since time.Time // entered the current state
	snap  TokenStatus
	tok   string // current token for other calls (APPROVED/VERIFYING), "" otherwise
	cur   *Server
}

func newTokenMachine(clk clockwork.Clock, log *slog.Logger, h *httpHelper, st persist, clientID string) *tokenMachine {
	m := &tokenMachine{clk: clk, log: log, http: h, st: st, clientID: clientID,
		permissions: func() string { return "readwrite" },
		description: func() string { return "devhost" },
		checkEvery:  func() time.Duration { return time.Hour },
		changed:     func() {}, unreachable: func(Server) {}, guessTried: func() {},
		cmds: make(chan func(), 64), state: StateNoServer, since: clk.Now()}
	m.snap = TokenStatus{State: StateNoServer, ClientID: clientID}
	return m
}

// run is the machine's goroutine.
func (m *tokenMachine) run(ctx context.Context) {
	m.ctx = ctx
	for {
		var tc <-chan time.Time
		if m.timer != nil {
			tc = m.timer.Chan()
		}
		select {
		case <-ctx.Done():
			m.stopTimer()
			return
		case f := <-m.cmds:
			f()
		case <-tc:
			m.timer = nil
			a := m.action
			m.action = nil
			if a != nil {
				a()
			}
		}
		m.publish()
	}
}

// exec runs f on the machine's goroutine and waits for it (or ctx).
func (m *tokenMachine) exec(ctx context.Context, f func()) error {
	done := make(chan struct{})
	select {
	case m.cmds <- func() { f(); m.publish(); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// execOnServer is exec for an operator's call that needs a server: ErrNoServer when there is
// none, else f's own error.
func (m *tokenMachine) execOnServer(ctx context.Context, f func() error) error {
	var err error
	if e := m.exec(ctx, func() {
		if m.srv == nil {
			err = ErrNoServer
			return
		}
		err = f()
	}); e != nil {
		return e
	}
	return err
}

// send queues f, waiting for room (or ctx).
func (m *tokenMachine) send(ctx context.Context, f func()) {
	select {
	case m.cmds <- f:
	case <-ctx.Done():
	}
}

// post queues f without waiting; a full queue drops it (reports are level-like and repeat).
func (m *tokenMachine) post(f func()) {
	select {
	case m.cmds <- f:
	default:
		m.log.Warn("signalk: token machine busy, report dropped")
	}
}

func (m *tokenMachine) Status() TokenStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.snap
	s.SinceS = int64(m.clk.Since(m.since) / time.Second)
	if !m.due.IsZero() {
		n := int64((m.due.Sub(m.clk.Now()) + time.Second - 1) / time.Second)
		if n < 0 {
			n = 0
		}
		s.NextRetryS = &n
	}
	return s
}

// token answers the token other calls send and the server it belongs to.
func (m *tokenMachine) token() (string, *Server) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tok, m.cur
}

// publish refreshes the snapshot other goroutines read.
func (m *tokenMachine) publish() {
	s := TokenStatus{State: m.state, ClientID: m.clientID, HasToken: m.rec.Token != "",
		Pending: m.rec.Href, Reason: m.reason}
	if m.state == StateCertError {
		s.Resume = m.resume
	}
	tok := ""
	switch m.state {
	case StateApproved, StateVerifying:
		tok = m.rec.Token
	case StateCertError:
		tok = m.rec.Token
	}
	m.mu.Lock()
	old := m.snap
	oldTok, oldSrv := m.tok, m.cur
	m.snap = s
	m.tok = tok
	m.cur = m.srv
	if m.timer == nil {
		m.due = time.Time{}
	}
	m.mu.Unlock()
	if old != s || oldTok != tok || oldSrv != m.srv || m.nudge {
		m.nudge = false
		m.changed()
	}
}

// to moves to state with a reason (shown in /sk/status).
func (m *tokenMachine) to(state, reason string) {
	if state != m.state {
		m.log.Info("signalk: token state", "from", m.state, "to", state, "reason", reason)
		m.state = state
		m.mu.Lock()
		m.since = m.clk.Now()
		m.mu.Unlock()
	}
	m.reason = reason
}

func (m *tokenMachine) after(d time.Duration, f func()) {
	m.stopTimer()
	m.timer = m.clk.NewTimer(d)
	m.action = f
	m.mu.Lock()
	m.due = m.clk.Now().Add(d)
	m.mu.Unlock()
}

func (m *tokenMachine) stopTimer() {
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
	m.action = nil
	m.mu.Lock()
	m.due = time.Time{}
	m.mu.Unlock()
}

func (m *tokenMachine) save() {
	if m.srv == nil {
		return
	}
	m.rec.Host, m.rec.Port = m.srv.Host, m.srv.Port
	if err := m.st.save(m.key, m.rec); err != nil {
		m.log.Error("signalk: persist token state", "server", m.key, "err", err)
	}
}

// setServer is the "server known" edge (or its loss when s is nil).
func (m *tokenMachine) setServer(s *Server) {
	if s != nil && m.srv != nil && s.same(*m.srv) {
		if s.Guess != m.srv.Guess {
			// The probe answered (or lost its answer): the flow goes on, only the mark changes.
			// A copy, since other goroutines read the old value without the machine's lock.
			cp := *m.srv
			cp.Guess = s.Guess
			m.srv = &cp
		}
		return
	}
	m.stopTimer()
	m.strikes, m.backoff, m.resume = 0, 0, ""
	if s == nil {
		m.srv, m.key, m.rec = nil, "", record{}
		m.to(StateNoServer, "")
		return
	}
	cp := *s
	m.srv = &cp
	m.key = m.st.recordKey(cp)
	rec, err := m.st.load(m.key)
	if err != nil {
		m.log.Warn("signalk: stored token state unreadable, starting over", "err", err)
	}
	m.rec = rec
	m.to(StateNoServer, "")
	m.enter()
}

// enter applies the NO_SERVER rows for the current server.
func (m *tokenMachine) enter() {
	switch {
	case m.rec.Href != "":
		m.to(StateRequested, "pending request resumed")
		m.poll = PollFirst
		m.doPoll()
	case m.rec.Token != "":
		m.to(StateVerifying, "stored token")
		m.doVerify()
	case m.rec.Denied != "":
		m.to(StateDenied, m.rec.Denied)
	default:
		m.to(StateIdle, "")
		m.doRequest()
	}
}

// call makes one HTTP call to the current server, cancelled when the server changes.
func (m *tokenMachine) call(token, method, path string, body []byte) (*response, error) {
	ctx, cancel := context.WithCancel(m.ctx)
	defer cancel()
	srv := *m.srv
	resp, err := m.http.do(ctx, srv, token, method, path, body)
	if srv.Guess {
		m.guessTried()
	}
	return resp, err
}

// noStatus handles a call that got no HTTP status and reports whether it did: a certificate
// refusal moves the machine; otherwise the server is noted unreachable and the caller's retry
// runs with the reason.
func (m *tokenMachine) noStatus(resp *response, err error, retry func(reason string)) bool {
	if err == nil || resp != nil {
		return false
	}
	if errors.Is(err, errCert) {
		m.certError(err)
		return true
	}
	if m.srv != nil {
		m.unreachable(*m.srv)
	}
	retry("server unreachable: " + short(err))
	return true
}

func (m *tokenMachine) nextBackoff() time.Duration {
	if m.backoff < ErrorBackoffMin {
		m.backoff = ErrorBackoffMin
	} else {
		m.backoff *= 2
		if m.backoff > ErrorBackoffMax {
			m.backoff = ErrorBackoffMax
		}
	}
	return m.backoff
}

// doRequest POSTs the access request (from IDLE, ERROR's retry and OPEN's re-POST).
func (m *tokenMachine) doRequest() {
	body, _ := json.Marshal(map[string]string{
		"clientId": m.clientID, "description": m.description(), "permissions": m.permissions()})
	resp, err := m.call("", http.MethodPost, pathRequests, body)
	retry := func(reason string) {
		m.to(StateError, reason)
		m.after(m.nextBackoff(), m.retryRequest)
	}
	if m.noStatus(resp, err, retry) {
		return
	}
	if err != nil { // truncated
		retry(short(err))
		return
	}
	switch {
	case resp.Status == http.StatusAccepted:
		var a struct {
			State string `json:"state"`
			Href  string `json:"href"`
		}
		href := ""
		if json.Unmarshal(resp.Body, &a) == nil && a.State == "PENDING" {
			href = hrefPath(a.Href)
		}
		if href == "" {
			m.to(StateError, fmt.Sprintf("request answered 202 without a pending href: %s", snippet(resp.Body)))
			m.after(m.nextBackoff(), m.retryRequest)
			return
		}
		m.backoff = 0
		m.rec = record{Href: href}
		m.save()
		m.to(StateRequested, "")
		m.poll = PollFirst
		m.schedulePoll()
	case resp.Status == http.StatusNotFound:
		m.backoff = 0
		if m.rec.Token != "" || m.rec.Href != "" {
			m.rec = record{}
			m.save()
		}
		m.to(StateOpen, "security disabled on the server")
		m.after(FlatRetry, m.retryRequest)
	case resp.Status == http.StatusForbidden:
		m.backoff = 0
		m.rec = record{Denied: "device access requests disabled on the server"}
		m.save()
		m.to(StateDenied, m.rec.Denied)
	case resp.Status == http.StatusBadRequest:
		m.backoff = 0
		m.to(StateError, "already requested: "+snippet(resp.Body))
		m.after(FlatRetry, m.retryRequest)
	default:
		m.to(StateError, fmt.Sprintf("request answered %d: %s", resp.Status, snippet(resp.Body)))
		m.after(m.nextBackoff(), m.retryRequest)
	}
}

// retryRequest is ERROR's and OPEN's timer: IDLE, then POST.
func (m *tokenMachine) retryRequest() {
	if m.state == StateOpen {
		m.doRequest()
		// Paced by this timer, never by the refusal itself: a server that refuses the stream
		// yet answers 404 to requests gets one stream attempt per re-POST, not a tight loop.
		m.nudge = m.state == StateOpen
		return
	}
	m.to(StateIdle, "")
	m.doRequest()
}

// doPoll polls the pending request's href.
func (m *tokenMachine) doPoll() {
	resp, err := m.call("", http.MethodGet, m.rec.Href, nil)
	retry := func(reason string) {
		m.reason = reason
		m.schedulePoll()
	}
	if m.noStatus(resp, err, retry) {
		return
	}
	if err != nil {
		retry(short(err))
		return
	}
	out, tok := classifyPoll(resp.Status, resp.Body)
	switch out {
	case pollForget:
		m.rec.Href = ""
		m.save()
		m.to(StateIdle, "pending request unknown to the server")
		m.doRequest()
	case pollPending:
		m.reason = ""
		m.schedulePoll()
	case pollApproved:
		m.rec = record{Token: tok}
		m.save()
		m.strikes = 0
		m.to(StateVerifying, "approved")
		m.doVerify()
	case pollDenied:
		m.rec = record{Denied: "request denied on the server"}
		m.save()
		m.to(StateDenied, m.rec.Denied)
	case pollAgain:
		// Finished without a usable answer (approved without a token, an error code): ask again.
		m.rec.Href = ""
		m.save()
		m.to(StateIdle, "request completed without a token: "+snippet(resp.Body))
		m.doRequest()
	default:
		m.reason = fmt.Sprintf("poll answered %d: %s", resp.Status, snippet(resp.Body))
		m.schedulePoll()
	}
}

// Outcomes of a poll of the pending request.
type pollOutcome int

const (
	pollUnusable pollOutcome = iota // keep polling
	pollPending
	pollApproved
	pollDenied
	pollAgain  // completed without a usable answer: request again
	pollForget // the server does not know the request: request again
)

// classifyPoll reads a poll answer; tok is the token of an approval.
func classifyPoll(status int, body []byte) (out pollOutcome, tok string) {
	if status == http.StatusNotFound ||
		(status == http.StatusInternalServerError && strings.Contains(strings.ToLower(string(body)), "not found")) {
		return pollForget, ""
	}
	var a struct {
		State         string `json:"state"`
		AccessRequest *struct {
			Permission string `json:"permission"`
			Token      string `json:"token"`
		} `json:"accessRequest"`
	}
	if status/100 != 2 || json.Unmarshal(body, &a) != nil {
		return pollUnusable, ""
	}
	switch {
	case a.State == "PENDING":
		return pollPending, ""
	case a.State == "COMPLETED" && a.AccessRequest != nil && a.AccessRequest.Permission == "APPROVED" && a.AccessRequest.Token != "":
		return pollApproved, a.AccessRequest.Token
	case a.State == "COMPLETED" && a.AccessRequest != nil && a.AccessRequest.Permission == "DENIED":
		return pollDenied, ""
	case a.State == "COMPLETED":
		return pollAgain, ""
	}
	return pollUnusable, ""
}

func (m *tokenMachine) schedulePoll() {
	if m.poll < PollFirst {
		m.poll = PollFirst
	}
	d := m.poll
	m.poll = time.Duration(float64(m.poll) * PollFactor)
	if m.poll > PollMax {
		m.poll = PollMax
	}
	m.after(d, m.doPoll)
}

// doVerify checks the token with GET /signalk/v1/api/self.
func (m *tokenMachine) doVerify() {
	if m.rec.Token == "" {
		m.to(StateIdle, "no token")
		m.doRequest()
		return
	}
	resp, err := m.call(m.rec.Token, http.MethodGet, pathSelf, nil)
	m.judgeVerify(resp, err, "")
}

// judgeVerify moves the machine on the answer to a token check (GET /signalk/v1/api/self):
// approved with the reason why, refused, or checked again after the error backoff.
func (m *tokenMachine) judgeVerify(resp *response, err error, why string) {
	retry := func(reason string) {
		m.reason = reason
		m.after(m.verifyRetry(), m.doVerify)
	}
	if m.noStatus(resp, err, retry) {
		return
	}
	status := resp.Status
	switch {
	case verified(resp, err):
		m.backoff, m.strikes = 0, 0
		var self string
		if json.Unmarshal(resp.Body, &self) == nil {
			m.learnSelf(strings.TrimPrefix(self, "vessels."))
		}
		m.to(StateApproved, why)
		m.after(m.checkEvery(), m.doVerify)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		m.rejected(fmt.Sprintf("token refused (%d)", status))
	case err != nil:
		retry(short(err))
	default:
		retry(fmt.Sprintf("verify answered %d: %s", status, snippet(resp.Body)))
	}
}

// verified reports a check answered 200 with a JSON body. A 200 page of another kind (a
// captive portal, a proxy) proves nothing about the token: it is retried like a 5xx.
func verified(resp *response, err error) bool {
	return err == nil && resp.Status == http.StatusOK && json.Valid(resp.Body)
}

// verifyRetry is the retry delay of a check that got no usable answer: the error backoff,
// never longer than the regular re-check.
func (m *tokenMachine) verifyRetry() time.Duration {
	d := m.nextBackoff()
	if c := m.checkEvery(); m.state == StateApproved && c < d {
		return c
	}
	return d
}

// rejected applies the plaintext 401 rule: over TLS one refusal drops the token; over plaintext
// the first schedules a re-check in 5 s and the second in a row drops it.
func (m *tokenMachine) rejected(why string) {
	if m.srv != nil && !m.srv.TLS() && m.strikes == 0 {
		m.strikes = 1
		m.to(StateVerifying, why+"; re-checking")
		m.after(RecheckPlain, m.doVerify)
		return
	}
	m.strikes = 0
	m.rec.Token = ""
	m.save()
	m.to(StateIdle, why+"; token dropped")
	m.doRequest()
}

// learnSelf records the self URN the server reported with a valid token.
func (m *tokenMachine) learnSelf(self string) {
	if self == "" || m.srv == nil || m.key == self {
		return
	}
	if m.srv.Self != "" && m.srv.Self != self {
		m.log.Warn("signalk: server reports another self URN than it advertises",
			"advertised", m.srv.Self, "reported", self)
		return
	}
	m.rec.Host, m.rec.Port = m.srv.Host, m.srv.Port
	if err := m.st.learn(m.key, self, m.srv.Host, m.srv.Port, m.rec); err != nil {
		m.log.Error("signalk: persist learned self URN", "err", err)
		return
	}
	m.key = self
	// A copy: other goroutines hold the old value (token) and read it without the lock.
	cp := *m.srv
	cp.Self = self
	m.srv = &cp
}

// certError enters cert_error: the token is kept, the stream stays down, retry flat 60 s.
func (m *tokenMachine) certError(err error) {
	if m.state != StateCertError {
		m.resume = m.state
	}
	m.to(StateCertError, short(err))
	m.after(FlatRetry, m.certRetry)
}

// certRetry tries the interrupted flow again.
func (m *tokenMachine) certRetry() {
	prev := m.resume
	if prev == "" || prev == StateNoServer || prev == StateCertError {
		prev = StateIdle
	}
	m.resume = ""
	defer func() {
		// Still refused: the flow to resume is the one first interrupted, not the state the
		// retry passed through (APPROVED retries through VERIFYING).
		if m.state == StateCertError {
			m.resume = prev
		}
	}()
	switch {
	case prev == StateApproved || prev == StateVerifying || (m.rec.Token != "" && m.rec.Href == ""):
		m.to(StateVerifying, "retrying after a certificate refusal")
		m.doVerify()
	case m.rec.Href != "":
		m.to(StateRequested, "retrying after a certificate refusal")
		m.doPoll()
	case prev == StateOpen:
		m.to(StateOpen, "retrying after a certificate refusal")
		m.doRequest()
	default:
		m.to(StateIdle, "retrying after a certificate refusal")
		m.doRequest()
	}
}

// --- reports and commands from other goroutines ---

// reportUnauthorized is a 401/403 seen by another call (the stream, the REST helper) while
// sending tok to srv. While the server ran without security (OPEN) it means security is on
// now, so the device asks for access at once.
func (m *tokenMachine) reportUnauthorized(srv Server, tok string) {
	m.post(func() {
		if m.srv == nil || !srv.same(*m.srv) {
			return
		}
		switch {
		case m.state == StateOpen:
			m.stopTimer()
			m.to(StateIdle, "server requires a token now")
			m.doRequest()
		case (m.state == StateApproved || m.state == StateVerifying) && tok != "" && tok == m.rec.Token:
			m.stopTimer()
			m.rejected("token refused by the server")
		}
	})
}

// reportAccepted is a call that proved the token (a WebSocket 101): it breaks a run of 401s.
func (m *tokenMachine) reportAccepted(srv Server, tok string) {
	m.post(func() {
		if m.srv != nil && srv.same(*m.srv) && tok == m.rec.Token {
			m.strikes = 0
		}
	})
}

// reportCertError is a certificate refusal seen by another call.
func (m *tokenMachine) reportCertError(srv Server, err error) {
	m.post(func() {
		if m.srv == nil || !srv.same(*m.srv) {
			return
		}
		m.certError(err)
	})
}

// retryNow makes cert_error (and a waiting ERROR or poll) try again at once: the trust anchor
// changed, or the network came up.
func (m *tokenMachine) retryNow(onlyCert bool) {
	m.post(func() {
		if m.srv == nil || m.action == nil {
			return
		}
		if onlyCert && m.state != StateCertError {
			return
		}
		if m.state == StateApproved || m.state == StateDenied {
			return
		}
		a := m.action
		m.stopTimer()
		a()
	})
}

// requestAgain is POST /sk/request: forget the token, the pending request and a refusal, then
// ask at once.
func (m *tokenMachine) requestAgain(ctx context.Context) error {
	return m.execOnServer(ctx, func() error {
		m.stopTimer()
		m.strikes, m.backoff, m.resume = 0, 0, ""
		m.rec = record{}
		m.save()
		m.to(StateIdle, "asked again")
		m.doRequest()
		return nil
	})
}

// errTokenRefused: POST /sk/token with a token the server refused.
var errTokenRefused = errors.New("signalk: the server refused the token")

// setToken is POST /sk/token: the token is verified at once; it replaces the stored one only
// when the server did not refuse it.
func (m *tokenMachine) setToken(ctx context.Context, tok string) error {
	return m.execOnServer(ctx, func() error {
		resp, cerr := m.call(tok, http.MethodGet, pathSelf, nil)
		if cerr == nil && (resp.Status == http.StatusUnauthorized || resp.Status == http.StatusForbidden) {
			return fmt.Errorf("%w (%d)", errTokenRefused, resp.Status)
		}
		m.stopTimer()
		m.strikes, m.backoff = 0, 0
		m.rec = record{Token: tok}
		m.save()
		m.to(StateVerifying, "token set by the operator")
		m.judgeVerify(resp, cerr, "token set by the operator")
		return nil
	})
}

// hrefPath keeps only the path (and query) of an href: the device polls the server it asked,
// never another host named in an answer.
func hrefPath(h string) string {
	u, err := url.Parse(h)
	if err != nil || u.Path == "" || !strings.HasPrefix(u.Path, "/") {
		return ""
	}
	if u.RawQuery != "" {
		return u.EscapedPath() + "?" + u.RawQuery
	}
	return u.EscapedPath()
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

func short(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
