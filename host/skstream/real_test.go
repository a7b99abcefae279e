package skstream

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"

	"devhost/host/signalk/sktest"
	"devhost/host/sk"
)

func TestMain(m *testing.M) { os.Exit(sktest.Main(m)) }

// deviceToken walks a device access request to an approved readwrite token.
func deviceToken(ctx context.Context, t *testing.T, s *sktest.Server) string {
	t.Helper()
	id := uuid.NewString()
	st, body, err := s.Do(ctx, http.MethodPost, "/signalk/v1/access/requests", "",
		map[string]string{"clientId": id, "description": "skstream test", "permissions": "readwrite"})
	if err != nil || st != http.StatusAccepted {
		t.Fatalf("access request: %d %s %v", st, body, err)
	}
	var req struct{ Href string }
	must(t, json.Unmarshal(body, &req))
	if _, err := s.WaitRequest(ctx, id); err != nil {
		t.Fatal(err)
	}
	must(t, s.Approve(ctx, id, "readwrite"))
	st, body, err = s.Do(ctx, http.MethodGet, req.Href, "", nil)
	var ans struct {
		AccessRequest struct{ Permission, Token string }
	}
	if err != nil || st != http.StatusOK || json.Unmarshal(body, &ans) != nil || ans.AccessRequest.Token == "" {
		t.Fatalf("poll: %d %s %v", st, body, err)
	}
	return ans.AccessRequest.Token
}

// pollPut follows a REST PUT's href until it is no longer PENDING.
func pollPut(ctx context.Context, t *testing.T, s *sktest.Server, body []byte) (state string, code int) {
	t.Helper()
	var r struct {
		State      string
		StatusCode int
		Href       string
	}
	must(t, json.Unmarshal(body, &r))
	for r.State == "PENDING" {
		select {
		case <-ctx.Done():
			t.Fatalf("PUT still pending: %s", body)
		case <-time.After(50 * time.Millisecond):
		}
		st, b, err := s.Do(ctx, http.MethodGet, r.Href, s.AdminToken, nil)
		if err != nil || st != http.StatusOK {
			t.Fatalf("poll %s: %d %s %v", r.Href, st, b, err)
		}
		body = b
		must(t, json.Unmarshal(b, &r))
	}
	return r.State, r.StatusCode
}

// TestRealServer runs the stream against signalk-server with security on: publish and read back
// over REST, metadata reconciliation, subscription echo, inbound PUT routed from a REST client
// to the device's handler, outbound PUT, and a refused token.
func TestRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("real signalk-server test skipped in -short mode")
	}
	srv := sktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	token := deviceToken(ctx, t, srv)

	var unauthorized sync.WaitGroup
	unauthorized.Add(1)
	var unauthOnce sync.Once
	set := DefaultSettings()
	set.BatchMS = 20
	s := New(Options{
		Clock:    clockwork.NewRealClock(),
		Logger:   newFixtureLogger(t),
		Hostname: "sktest-probe",
		WallClock: func() (time.Time, bool) {
			return time.Now(), true
		},
		HTTP: func(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
			var b any
			if body != nil {
				b = json.RawMessage(body)
			}
			return srv.Do(ctx, method, path, token, b)
		},
		Settings:       set,
		OnUnauthorized: func(Unauthorized) { unauthOnce.Do(unauthorized.Done) },
	})
	defer s.Close()

	_, err := s.HandlePut((&modeState{mode: "standby"}).path("dev.skstream.mode"))
	must(t, err)
	must(t, s.DeclareMeta("dev.skstream.temperature", map[string]any{"units": "K", "description": "probe"}, 2*time.Second))
	echo := make(chan sk.Delta, 16)
	_, err = s.Subscribe("dev.skstream.echo*", func(d sk.Delta) { echo <- d })
	must(t, err)

	must(t, s.Start(ctx))
	s.SetTarget(&Target{URL: srv.URL(), Token: token})
	eventually(t, "connected to signalk-server", s.Connected)
	if h := s.Hello(); h.Version == "" || !strings.Contains(h.Self, srv.Self) {
		t.Fatalf("hello %+v (server self %s)", h, srv.Self)
	}

	t.Run("publish and read back", func(t *testing.T) {
		must(t, s.PublishNumber("dev.skstream.temperature", 293.15))
		must(t, s.PublishString("dev.skstream.label", "port"))
		must(t, s.PublishBool("dev.skstream.ok", true))
		must(t, s.Flush(ctx, 5*time.Second))
		for path, want := range map[string]string{"dev.skstream.temperature": "293.15", "dev.skstream.label": `"port"`,
			"dev.skstream.ok": "true", "dev.skstream.mode": `"standby"`} {
			if _, err := srv.WaitValue(ctx, path, func(v json.RawMessage) bool { return string(v) == want }); err != nil {
				t.Fatal(err)
			}
		}
		leaf, _, err := srv.Leaf(ctx, "dev.skstream.temperature")
		must(t, err)
		var node struct {
			Source    string `json:"$source"`
			Timestamp string `json:"timestamp"`
		}
		must(t, json.Unmarshal(leaf, &node))
		if node.Source != "dev.sktest-probe."+SourceSrc || node.Timestamp == "" {
			t.Fatalf("leaf %s", leaf)
		}
	})

	t.Run("another context", func(t *testing.T) {
		const target = "vessels.urn:mrn:imo:mmsi:230999001"
		must(t, s.PublishContext(target, sk.Value{Path: "navigation.speedOverGround", Value: 3.5},
			sk.Value{Path: "", Value: json.RawMessage(`{"name":"ILMATAR"}`)},
			sk.Value{Path: "", Value: json.RawMessage(`{"mmsi":"230999001"}`)}))
		must(t, s.Flush(ctx, 5*time.Second))
		base := "/signalk/v1/api/vessels/urn:mrn:imo:mmsi:230999001/"
		for addr, want := range map[string]string{"navigation/speedOverGround/value": "3.5", "name": `"ILMATAR"`, "mmsi": `"230999001"`} {
			eventually(t, addr, func() bool {
				st, body, err := srv.Do(ctx, http.MethodGet, base+addr, srv.AdminToken, nil)
				return err == nil && st == http.StatusOK && string(body) == want
			})
		}
		if v, _, err := srv.Value(ctx, "navigation.speedOverGround"); err != nil || string(v) == "3.5" {
			t.Fatalf("the target's value on the own vessel: %s %v", v, err)
		}
	})

	t.Run("meta reconciled", func(t *testing.T) {
		eventually(t, "meta reconciled", func() bool { return s.Status().Meta.Reconciled == 1 })
		st, body, err := srv.Do(ctx, http.MethodGet, "/signalk/v1/api/vessels/self/dev/skstream/temperature/meta", srv.AdminToken, nil)
		var meta struct {
			Units   string  `json:"units"`
			Timeout float64 `json:"timeout"`
		}
		if err != nil || st != http.StatusOK || json.Unmarshal(body, &meta) != nil || meta.Units != "K" || meta.Timeout != 5 {
			t.Fatalf("server meta: %d %s %v", st, body, err)
		}
	})

	t.Run("subscription echo", func(t *testing.T) {
		deadline := time.After(10 * time.Second)
		must(t, s.PublishNumber("dev.skstream.echoA", 7))
		for {
			select {
			case d := <-echo:
				if d.Path == "dev.skstream.echoA" && string(d.Value) == "7" && !d.Meta {
					return
				}
			case <-deadline:
				t.Fatal("no echo of the published value")
			}
		}
	})

	t.Run("inbound PUT from a REST client", func(t *testing.T) {
		st, body, err := srv.Do(ctx, http.MethodPut, "/signalk/v1/api/vessels/self/dev/skstream/mode", srv.AdminToken,
			map[string]any{"value": "auto"})
		if err != nil || st != http.StatusAccepted {
			t.Fatalf("REST PUT: %d %s %v", st, body, err)
		}
		if state, code := pollPut(ctx, t, srv, body); state != "COMPLETED" || code != 200 {
			t.Fatalf("PUT ended %s %d", state, code)
		}
		if _, err := srv.WaitValue(ctx, "dev.skstream.mode", func(v json.RawMessage) bool { return string(v) == `"auto"` }); err != nil {
			t.Fatal(err)
		}
		st, body, err = srv.Do(ctx, http.MethodPut, "/signalk/v1/api/vessels/self/dev/skstream/mode", srv.AdminToken,
			map[string]any{"value": 5})
		if err != nil || (st != http.StatusAccepted && st != http.StatusBadRequest) {
			t.Fatalf("REST PUT: %d %s %v", st, body, err)
		}
		if state, code := pollPut(ctx, t, srv, body); state != "COMPLETED" || code != 400 {
			t.Fatalf("invalid PUT ended %s %d", state, code)
		}
	})

	t.Run("outbound PUT", func(t *testing.T) {
		r, err := s.PutWait(ctx, "dev.skstream.mode", "manual")
		if err != nil || !r.OK() {
			t.Fatalf("PUT routed back to the device: %+v %v", r, err)
		}
		r, err = s.PutWait(ctx, "dev.skstream.nobody", 1)
		if err != nil || r.State != "COMPLETED" || r.StatusCode != 405 {
			t.Fatalf("PUT without a handler: %+v %v", r, err)
		}
		if st := s.Status(); st.Put.OK != 1 || st.Put.Failed != 1 || st.Put.Inbound < 3 {
			t.Fatalf("put status %+v", st.Put)
		}
	})

	t.Run("bad token is reported", func(t *testing.T) {
		s.SetTarget(&Target{URL: srv.URL(), Token: "not-a-token"})
		done := make(chan struct{})
		go func() { unauthorized.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("no unauthorized report")
		}
		if st := s.Status(); st.State != StateUnauthorized {
			t.Fatalf("state %s", st.State)
		}
		if err := s.Flush(ctx, time.Second); !errors.Is(err, ErrInvalidState) {
			t.Fatalf("flush while refused: %v", err)
		}
	})
}
