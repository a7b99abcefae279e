package signalk

import (
	"context"
	"testing"

	"devhost/host/signalk/sktest"
)

// realRig points a client at the real server (sk.server_host) with a fake clock: the HTTP
// calls are real, the spec's timers are advanced by hand.
func realRig(t *testing.T, s *sktest.Server) *rig {
	r := newRig(t, nil, nil)
	r.cfg.Set("sk", "server_host", s.Host)
	r.cfg.Set("sk", "server_port", s.Port)
	return r.start()
}

// requestOn waits until a started rig has asked for access and the real server s lists the
// request, which it answers.
func (r *rig) requestOn(ctx context.Context, s *sktest.Server) sktest.AccessRequest {
	r.t.Helper()
	r.waitState(StateRequested, true)
	req, err := s.WaitRequest(ctx, r.c.ClientID())
	if err != nil {
		r.t.Fatal(err)
	}
	return req
}

// approveOn takes a started rig through its access request to APPROVED on the real server s:
// the request reaches s, s approves it, and the next poll fetches the token.
func (r *rig) approveOn(ctx context.Context, s *sktest.Server) {
	r.t.Helper()
	r.requestOn(ctx, s)
	if err := s.Approve(ctx, r.c.ClientID(), "readwrite"); err != nil {
		r.t.Fatal(err)
	}
	r.clk.Advance(r.nextRetry())
	r.waitState(StateApproved, true)
}
