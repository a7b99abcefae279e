package signalk

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"devhost/host/signalk/sktest"
)

func TestMain(m *testing.M) { os.Exit(sktest.Main(m)) }

// The main path against the real server: request → approve → token → verified → the token
// opens the stream.
func TestRealServerApprove(t *testing.T) {
	s := sktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := realRig(t, s)
	req := r.requestOn(ctx, s)
	if req.Permissions != "readwrite" || !strings.Contains(req.Description, "dev-ab12") {
		t.Fatalf("request as the server sees it: %+v", req)
	}
	// Still pending: a poll keeps REQUESTED.
	r.clk.Advance(r.nextRetry())
	eventually(t, "second poll scheduled", func() bool { return r.nextRetry() > 6*time.Second })
	r.waitState(StateRequested, true)

	if err := s.Approve(ctx, r.c.ClientID(), "readwrite"); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(r.nextRetry())
	r.waitState(StateApproved, true)
	doc := r.c.Status()
	if doc.Server.Self != s.Self || doc.Server.Scheme != "http" || doc.Server.Source != "manual" {
		t.Fatalf("server %+v, want self %s", doc.Server, s.Self)
	}
	tg := r.stream.target()
	if tg.Token == "" || tg.Host != s.Host || tg.Port != s.Port {
		t.Fatalf("stream target %+v", tg)
	}
	rec, err := r.c.st.load(s.Self)
	if err != nil || rec.Token != tg.Token {
		t.Fatalf("token not stored under the self URN: %+v %v", rec, err)
	}
	// The token the stream was given opens the server's stream; a wrong one does not.
	url := fmt.Sprintf("ws://%s:%d/signalk/v1/stream?subscribe=none", s.Host, s.Port)
	if _, resp, err := websocket.DefaultDialer.DialContext(ctx, url, http.Header{"Authorization": {"Bearer x" + tg.Token}}); err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("stream with a wrong token: %v %v", resp, err)
	}
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, url, http.Header{"Authorization": {"Bearer " + tg.Token}})
	if err != nil {
		t.Fatalf("stream with the device token: %v", err)
	}
	defer conn.Close()
	var hello struct{ Self string }
	if err := conn.ReadJSON(&hello); err != nil || !strings.HasSuffix(hello.Self, s.Self) {
		t.Fatalf("hello %+v %v", hello, err)
	}
	// The helper sends the token: the server answers the device's REST calls.
	if st, body, err := r.c.HTTP(ctx, "GET", "/signalk/v1/api/self", nil); err != nil || st != 200 || !strings.Contains(string(body), s.Self) {
		t.Fatalf("helper call: %d %s %v", st, body, err)
	}
	// A refused token by hand: 400, the approved token stays.
	if rec := postJSON(t, r.c.postToken, `{"token":"not-a-token"}`); rec.Code != http.StatusBadRequest {
		t.Fatalf("bad token by hand: %d %s", rec.Code, rec.Body)
	}
	if r.c.tm.Status().State != StateApproved {
		t.Fatal("a refused hand token changed the state")
	}
}

// DENIED against the real server, then POST /sk/request asks again and the approval works.
func TestRealServerDenied(t *testing.T) {
	s := sktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := realRig(t, s)
	r.requestOn(ctx, s)
	if err := s.Deny(ctx, r.c.ClientID()); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(r.nextRetry())
	st := r.waitState(StateDenied, false)
	if st.NextRetryS != nil || st.HasToken {
		t.Fatalf("DENIED: %+v", st)
	}
	if tg := r.stream.target(); tg.Host != "" {
		t.Fatalf("stream target while DENIED: %+v", tg)
	}
	if rec := postJSON(t, r.c.postRequest, ""); rec.Code != http.StatusAccepted {
		t.Fatalf("POST /sk/request: %d %s", rec.Code, rec.Body)
	}
	r.approveOn(ctx, s)
}
