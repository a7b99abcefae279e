package skstream

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"devhost/host/skstream/skpeer"
)

// expectBackoffKeepingData checks that a bad server leaves the stream backing off with its
// buffered message intact and that it tries again after the first backoff step.
func expectBackoffKeepingData(t *testing.T, f *fixture, wantErr string) {
	t.Helper()
	eventually(t, "backoff", func() bool { return f.s.Status().State == StateBackoff })
	st := f.s.Status()
	if st.Buffered != 1 || st.Dropped != 0 || st.Connected || !strings.Contains(st.LastError, wantErr) {
		t.Fatalf("status %+v, want last_error containing %q", st, wantErr)
	}
	n := f.p.dials.Load()
	f.advance(1, time.Second)
	eventually(t, "another attempt", func() bool { return f.p.dials.Load() > n })
}

func bufferOne(t *testing.T, f *fixture) {
	t.Helper()
	must(t, f.s.PublishNumber("keep.me", 42))
	f.advance(1, 100*time.Millisecond)
	eventually(t, "buffered", func() bool { return f.s.Status().Buffered == 1 })
}

func TestMalformedHello(t *testing.T) {
	cases := map[string]func(c *websocket.Conn){
		"not json":      func(c *websocket.Conn) { _ = c.WriteMessage(websocket.TextMessage, []byte("Welcome!")) },
		"no version":    func(c *websocket.Conn) { _ = c.WriteMessage(websocket.TextMessage, []byte(`{"name":"x"}`)) },
		"a delta first": func(c *websocket.Conn) { _ = c.WriteMessage(websocket.TextMessage, []byte(`{"updates":[]}`)) },
		"binary":        func(c *websocket.Conn) { _ = c.WriteMessage(websocket.BinaryMessage, []byte(skpeer.Hello)) },
		"huge": func(c *websocket.Conn) {
			_ = c.WriteMessage(websocket.TextMessage, []byte(`{"version":"`+strings.Repeat("1", MaxFrameBytes)+`"}`))
		},
		"closed at once": func(c *websocket.Conn) { c.Close() },
	}
	for name, hello := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			bufferOne(t, f)
			f.p.SetHello(hello)
			f.s.SetTarget(&Target{URL: f.p.URL()})
			want := "hello"
			if name == "closed at once" {
				want = "read"
			}
			expectBackoffKeepingData(t, f, want)
		})
	}
}

func TestHelloTimeout(t *testing.T) {
	f := newFixture(t)
	bufferOne(t, f)
	f.p.SetHello(func(*websocket.Conn) {})
	f.s.SetTarget(&Target{URL: f.p.URL()})
	eventually(t, "dialed", func() bool { return f.p.dials.Load() == 1 })
	f.advance(1, 10*time.Second)
	expectBackoffKeepingData(t, f, "no hello")
}

func TestServerAnsweringHTML(t *testing.T) {
	f := newFixture(t)
	bufferOne(t, f)
	f.p.set(func(p *peer) {
		p.raw = func(w http.ResponseWriter) bool {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html><body>Router login</body></html>"))
			return true
		}
	})
	f.s.SetTarget(&Target{URL: f.p.URL(), Token: "t"})
	expectBackoffKeepingData(t, f, "200")
	f.mu.Lock()
	got := len(f.unauth)
	f.mu.Unlock()
	if got != 0 {
		t.Fatalf("HTML reported as unauthorized %d times", got)
	}
}

func TestGarbageFramesKeepTheStreamUp(t *testing.T) {
	f := newFixture(t)
	got, c := f.connectSubscribed("ok.*")
	for _, g := range []string{"garbage", "[1,2,3]", `{"updates":5}`, `{"updates":[{"values":7}]}`,
		`{"requestId":"x","state":"COMPLETED","statusCode":"two hundred"}`, `{"requestId":"x","put":"nope"}`, "{", ""} {
		c.Send(t, g)
	}
	_ = c.WS.WriteMessage(websocket.BinaryMessage, []byte{0, 1, 2})
	c.Send(t, `{"unknown":"shape"}`)
	c.Send(t, `"period assumes policy 'fixed', ignoring policy instant"`) // a server notice, not garbage
	c.Send(t, `{"updates":[{"values":[{"path":"ok.v","value":1},{"value":2}]}]}`)
	eventually(t, "good frame delivered", func() bool { return got.len() == 1 })
	st := f.s.Status()
	if !st.Connected || st.In.Bad != 9 || st.In.Frames != 12 {
		t.Fatalf("status %+v", st.In)
	}
}

// TestServerVanishesMidFrame: the server sends the head of a frame and disappears; the stream
// backs off and keeps the backlog it had not sent yet.
func TestServerVanishesMidFrame(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS, s.DrainPerS = 0, 1 }))
	for i := 0; i < 3; i++ {
		must(t, f.s.PublishNumber("p.n", float64(i)))
	}
	c := f.connect()
	nextDelta(t, c)
	// A text frame header announcing 100 bytes, 10 of them sent, then the TCP connection ends.
	raw := c.WS.NetConn()
	_, _ = raw.Write(append([]byte{0x81, 100}, []byte(`{"updates"`)...))
	raw.Close()
	eventually(t, "backoff", func() bool { return f.s.Status().State == StateBackoff })
	st := f.s.Status()
	if st.Buffered != 2 || st.Dropped != 0 || !strings.Contains(st.LastError, "read") {
		t.Fatalf("status %+v", st)
	}
	f.advance(1, time.Second)
	c2 := f.p.Accept(t)
	for _, want := range []string{"p.n=1", "p.n=2"} {
		if got := deltaValues(t, f.pump(c2, time.Second)); got[0] != want {
			t.Fatalf("got %v, want %s", got, want)
		}
	}
}

// TestConnectionRefused: nothing listens; the stream backs off and keeps its data.
func TestConnectionRefused(t *testing.T) {
	f := newFixture(t)
	bufferOne(t, f)
	addr := f.p.Addr()
	f.p.Close()
	f.s.SetTarget(&Target{URL: "ws://" + addr})
	eventually(t, "backoff", func() bool { return f.s.Status().State == StateBackoff })
	if st := f.s.Status(); st.Buffered != 1 || !strings.Contains(st.LastError, "dial") {
		t.Fatalf("status %+v", st)
	}
	if st := f.s.Status(); st.NextRetryS != 1 {
		t.Fatalf("next_retry_s %d", st.NextRetryS)
	}
}

// TestHijackedGarbageUpgrade: a peer that answers the upgrade with a broken HTTP response.
func TestHijackedGarbageUpgrade(t *testing.T) {
	f := newFixture(t)
	bufferOne(t, f)
	f.p.set(func(p *peer) {
		p.raw = func(w http.ResponseWriter) bool {
			conn, rw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return false
			}
			defer conn.Close()
			_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: nonsense\r\n\r\n")
			_ = rw.Flush()
			_, _ = bufio.NewReader(conn).ReadByte()
			return true
		}
	})
	f.s.SetTarget(&Target{URL: f.p.URL()})
	expectBackoffKeepingData(t, f, "upgrade answered 101")
}
