package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"devhost/host/signalk/sktest"
	"devhost/host/testio"
)

// The black-box tests wait on conditions the device reaches in its own time. These helpers are
// the one polling loop they share (host/testio's), so every wait has the same shape: ask,
// check, and fail only when timeout (hangGuard unless a test has a reason for less) has passed.

// pollUntil calls get until ok accepts its answer and returns that answer. After timeout the
// test fails with what and the last answer.
func pollUntil[T any](t *testing.T, what string, timeout time.Duration, get func() T, ok func(T) bool) T {
	t.Helper()
	return testio.Await(t, timeout, what, get, ok)
}

// eventually waits until ok holds, failing after hangGuard.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	pollUntil(t, what+" did not happen", hangGuard, ok, func(b bool) bool { return b })
}

// getDoc reads the document at path as a T; anything but 200 with a body that decodes into a
// T fails the test.
func getDoc[T any](d *dev, path string) T {
	d.t.Helper()
	var v T
	r := d.call("GET", path, "")
	if r.status != 200 || json.Unmarshal(r.body, &v) != nil {
		d.t.Fatalf("GET %s: %d %s", path, r.status, r.body)
	}
	return v
}

// config answers the namespace ns as GET /config?ns= lists it.
func (d *dev) config(ns string) map[string]any {
	d.t.Helper()
	return getDoc[map[string]map[string]any](d, "/api/v1/config?ns="+ns)[ns]
}

// waitDoc polls GET path until ok accepts the JSON object it answers.
func (d *dev) waitDoc(what, path string, timeout time.Duration, ok func(map[string]any) bool) map[string]any {
	d.t.Helper()
	return pollUntil(d.t, what+": GET "+path, timeout, func() map[string]any {
		r, err := d.try("GET", path, "")
		if err, isNet := err.(net.Error); isNet && err.Timeout() {
			// A route of a plugin that is starting (a dormant one woken by this very request)
			// answers once the plugin runs: on a loaded machine later than one call's timeout.
			return nil
		}
		if err != nil {
			d.t.Fatalf("GET %s: %v", path, err)
		}
		return r.json(d.t)
	}, ok)
}

// connectSK points the device at s and approves its access request, then waits for the
// stream.
func connectSK(ctx context.Context, t *testing.T, d *dev, s *sktest.Server) {
	t.Helper()
	d.putConfig(fmt.Sprintf(`{"sk":{"server_host":%q,"server_port":%d}}`, s.Host, s.Port))
	d.approveSK(ctx, s)
	d.waitSK("stream connected", func(st skStatus) bool { return st.WS.Connected })
}

// skStatus is the part of GET /sk/status (and the sk event) the tests read.
type skStatus struct {
	Server struct {
		Host   string
		Port   int
		Scheme string
		Self   string
		Guess  bool `json:"scheme_guessed"`
	}
	Token struct {
		State    string
		ClientID string `json:"client_id"`
		HasToken bool   `json:"has_token"`
		Reason   string
		Resume   string
	}
	WS struct {
		Connected bool
		State     string
	}
}

// skStreaming reports a device that holds its approved token and streams.
func skStreaming(st skStatus) bool {
	return st.Token.State == "APPROVED" && st.Token.HasToken && st.WS.Connected
}

// sk reads GET /sk/status.
func (d *dev) sk() skStatus {
	d.t.Helper()
	return getDoc[skStatus](d, "/api/v1/sk/status")
}

// waitSK polls GET /sk/status until ok accepts it.
func (d *dev) waitSK(what string, ok func(skStatus) bool) skStatus {
	d.t.Helper()
	return pollUntil(d.t, what, hangGuard, d.sk, ok)
}

// approveSK waits for the device's access request to s, has s approve it read/write, and
// answers the status that showed the request (its client id).
func (d *dev) approveSK(ctx context.Context, s *sktest.Server) skStatus {
	d.t.Helper()
	st := d.waitSK("access requested", func(st skStatus) bool { return st.Token.State == "REQUESTED" })
	if _, err := s.WaitRequest(ctx, st.Token.ClientID); err != nil {
		d.t.Fatalf("the server never saw the request of %q: %v", st.Token.ClientID, err)
	}
	if err := s.Approve(ctx, st.Token.ClientID, "readwrite"); err != nil {
		d.t.Fatal(err)
	}
	return st
}

// condition answers the health condition key as GET /health lists it, nil when it is not listed.
func (d *dev) condition(key string) map[string]any {
	d.t.Helper()
	h := getDoc[struct {
		Conditions []map[string]any `json:"conditions"`
	}](d, "/api/v1/health")
	for _, c := range h.Conditions {
		if c["key"] == key {
			return c
		}
	}
	return nil
}

// windowFresh reports whether a recovery window of full seconds, opened after since, shows
// rs seconds left as GET /auth/status rounds them (up): no more than full, and no less than
// full less the time that has passed since then, however slowly the machine got there.
func windowFresh(rs float64, full int, since time.Time) bool {
	return rs <= float64(full) && rs >= float64(full)-time.Since(since).Seconds()
}

// noNewRequest fails when the server s lists an access request from clientID: the device asked
// for access again instead of using the token it holds. what says since when.
func noNewRequest(ctx context.Context, t *testing.T, s *sktest.Server, what, clientID string) {
	t.Helper()
	reqs, err := s.Requests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if r.ClientID == clientID {
			t.Fatalf("%s: the device asked for access again: %+v", what, r)
		}
	}
}

// condWait waits on c, whose lock the caller holds, until done answers true (it runs with the
// lock held, after each broadcast) and answers true then; after timeout it answers false. A
// timer wakes the wait at the timeout, so no broadcast is needed to end it.
func condWait(c *sync.Cond, timeout time.Duration, done func() bool) bool {
	deadline := time.Now().Add(timeout)
	timer := time.AfterFunc(timeout, func() { c.L.Lock(); c.Broadcast(); c.L.Unlock() })
	defer timer.Stop()
	for !done() {
		if time.Now().After(deadline) {
			return false
		}
		c.Wait()
	}
	return true
}
