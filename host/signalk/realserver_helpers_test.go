package signalk

import (
	"context"

	"devhost/host/signalk/sktest"
)

// approveOn takes a started rig through its access request to APPROVED on the real server s:
// the request reaches s, s approves it, and the next poll fetches the token.
func (r *rig) approveOn(ctx context.Context, s *sktest.Server) {
	r.t.Helper()
	r.waitState(StateRequested, true)
	if _, err := s.WaitRequest(ctx, r.c.ClientID()); err != nil {
		r.t.Fatal(err)
	}
	if err := s.Approve(ctx, r.c.ClientID(), "readwrite"); err != nil {
		r.t.Fatal(err)
	}
	r.clk.Advance(r.nextRetry())
	r.waitState(StateApproved, true)
}
