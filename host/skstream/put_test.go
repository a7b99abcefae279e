package skstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"devhost/host/sk"
	"devhost/host/skstream/skpeer"
)

func readPut(t *testing.T, c *skpeer.Conn) putRequest {
	t.Helper()
	b := c.Next(t)
	var p putRequest
	if err := json.Unmarshal(b, &p); err != nil || p.RequestID == "" {
		t.Fatalf("not a PUT frame: %s", b)
	}
	return p
}

// results records PUT results.
type results = recorder[sk.PutAnswer]

func TestPutOutboundFrameAndAnswer(t *testing.T) {
	f := newFixture(t)
	if _, err := f.s.Put("steering.autopilot.target.headingTrue", 1.5, nil); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("put while down: %v", err)
	}
	c := f.connect()
	var rs results
	id, err := f.s.Put("steering.autopilot.target.headingTrue", 1.5, rs.add)
	must(t, err)
	p := readPut(t, c)
	u, err := uuid.Parse(p.RequestID)
	if err != nil || u.Version() != 4 || p.RequestID != id {
		t.Fatalf("requestId %q (%v)", p.RequestID, err)
	}
	if p.Context != "vessels.self" || p.Put.Path != "steering.autopilot.target.headingTrue" || string(p.Put.Value) != "1.5" {
		t.Fatalf("frame %+v", p)
	}
	if st := f.s.Status(); st.Put.Pending != 1 {
		t.Fatalf("pending %d", st.Put.Pending)
	}
	// An answer to someone else and a PENDING answer change nothing.
	c.Send(t, `{"requestId":"other","state":"COMPLETED","statusCode":200}`)
	c.Send(t, fmt.Sprintf(`{"requestId":%q,"state":"PENDING","statusCode":202,"href":"/signalk/v1/requests/x"}`, id))
	time.Sleep(30 * time.Millisecond)
	if len(rs.get()) != 0 {
		t.Fatalf("answered early: %+v", rs.get())
	}
	c.Send(t, fmt.Sprintf(`{"requestId":%q,"state":"COMPLETED","statusCode":200,"message":"ok","put":{"path":"x","value":1}}`, id))
	eventually(t, "answer", func() bool { return len(rs.get()) == 1 })
	r := rs.get()[0]
	if r.State != "COMPLETED" || r.StatusCode != 200 || r.Message != "ok" || !r.OK() || r.RequestID != id {
		t.Fatalf("result %+v", r)
	}
	st := f.s.Status()
	if st.Put.OK != 1 || st.Put.Failed != 0 || st.Put.Pending != 0 {
		t.Fatalf("put status %+v", st.Put)
	}
}

func TestPutFailedAnswerAndTimeout(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	var rs results
	id1, err := f.s.Put("a.b", "x", rs.add)
	must(t, err)
	readPut(t, c)
	c.Send(t, fmt.Sprintf(`{"requestId":%q,"state":"COMPLETED","statusCode":405,"message":"no handler"}`, id1))
	eventually(t, "405", func() bool { return len(rs.get()) == 1 })
	if r := rs.get()[0]; r.OK() || r.StatusCode != 405 {
		t.Fatalf("405 result %+v", r)
	}
	// PENDING then silence: TIMEOUT 10 s after the send.
	id2, err := f.s.Put("a.b", true, rs.add)
	must(t, err)
	readPut(t, c)
	c.Send(t, fmt.Sprintf(`{"requestId":%q,"state":"PENDING","statusCode":202}`, id2))
	f.advance(1, PutTimeout-time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if len(rs.get()) != 1 {
		t.Fatal("timed out early")
	}
	f.advance(1, time.Millisecond)
	eventually(t, "timeout", func() bool { return len(rs.get()) == 2 })
	if r := rs.get()[1]; r.State != "TIMEOUT" || r.RequestID != id2 || r.Path != "a.b" {
		t.Fatalf("timeout result %+v", r)
	}
	// A late answer is ignored.
	c.Send(t, fmt.Sprintf(`{"requestId":%q,"state":"COMPLETED","statusCode":200}`, id2))
	time.Sleep(20 * time.Millisecond)
	if st := f.s.Status(); st.Put.Failed != 2 || st.Put.OK != 0 || len(rs.get()) != 2 {
		t.Fatalf("put status %+v, results %d", st.Put, len(rs.get()))
	}
	// FAILED passes through.
	id3, err := f.s.Put("a.b", 1, rs.add)
	must(t, err)
	readPut(t, c)
	c.Send(t, fmt.Sprintf(`{"requestId":%q,"state":"FAILED","statusCode":502,"message":"device error"}`, id3))
	eventually(t, "failed", func() bool { return len(rs.get()) == 3 })
	if r := rs.get()[2]; r.State != "FAILED" || r.StatusCode != 502 {
		t.Fatalf("failed result %+v", r)
	}
}

func TestPutInFlightCap(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	var rs results
	var ids []string
	for i := 0; i < MaxPutsInFlight; i++ {
		id, err := f.s.Put("a.b", i, rs.add)
		must(t, err)
		ids = append(ids, id)
	}
	if _, err := f.s.Put("a.b", 99, rs.add); !errors.Is(err, ErrLimit) {
		t.Fatalf("9th put: %v", err)
	}
	var seen []string
	for range ids {
		seen = append(seen, readPut(t, c).RequestID)
	}
	if !slices.Equal(seen, ids) {
		t.Fatalf("frames %v, want %v", seen, ids)
	}
	c.Send(t, fmt.Sprintf(`{"requestId":%q,"state":"COMPLETED","statusCode":200}`, ids[3]))
	eventually(t, "slot freed", func() bool { return f.s.Status().Put.Pending == MaxPutsInFlight-1 })
	// The answer's callback runs after the slot is freed, outside the stream's lock.
	eventually(t, "answer delivered", func() bool { return len(rs.get()) == 1 })
	if _, err := f.s.Put("a.b", 99, rs.add); err != nil {
		t.Fatalf("put after a slot freed: %v", err)
	}
	if r := rs.get()[0]; r.RequestID != ids[3] {
		t.Fatalf("answer matched to %s, want %s", r.RequestID, ids[3])
	}
}

func TestPutEndsWhenStreamDrops(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	var rs results
	_, err := f.s.Put("a.b", 1, rs.add)
	must(t, err)
	readPut(t, c)
	c.WS.Close()
	eventually(t, "failed on drop", func() bool { return len(rs.get()) == 1 })
	if r := rs.get()[0]; r.State != "FAILED" {
		t.Fatalf("result %+v", r)
	}
	if _, err := f.s.Put("a.b", 1, rs.add); !errors.Is(err, ErrInvalidState) {
		t.Fatalf("put while down: %v", err)
	}
}

func TestPutWait(t *testing.T) {
	f := newFixture(t)
	c := f.connect()
	go func() {
		p := readPut(t, c)
		c.Send(t, fmt.Sprintf(`{"requestId":%q,"state":"COMPLETED","statusCode":200}`, p.RequestID))
	}()
	r, err := f.s.PutWait(t.Context(), "a.b", json.RawMessage(`{"x":1}`))
	if err != nil || !r.OK() {
		t.Fatalf("PutWait %+v %v", r, err)
	}
	if _, err := f.s.Put("a.b", json.RawMessage(`{`), nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad raw value: %v", err)
	}
}

type answer struct {
	RequestID  string `json:"requestId"`
	State      string `json:"state"`
	StatusCode int    `json:"statusCode"`
	Message    string `json:"message"`
}

// nextAnswer skips deltas and returns the next PUT answer.
func nextAnswer(t *testing.T, c *skpeer.Conn) answer {
	t.Helper()
	for {
		b := c.Next(t)
		var a answer
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("frame %s: %v", b, err)
		}
		if a.RequestID != "" {
			return a
		}
	}
}

func TestInboundPutHandlerTable(t *testing.T) {
	type step struct {
		state string
		code  int
	}
	var later func(sk.PutResult, string)
	var mu sync.Mutex
	keep := func(reply func(sk.PutResult, string)) {
		mu.Lock()
		later = reply
		mu.Unlock()
	}
	deferThen := func(_ sk.PutRequest, reply func(sk.PutResult, string)) {
		reply(sk.PutDeferred, "")
		keep(reply)
	}
	cases := []struct {
		name     string
		handler  sk.PutHandler
		final    sk.PutResult // when deferred, the later reply
		finalMsg string
		want     []step
		msg      string
	}{
		{"success", func(_ sk.PutRequest, reply func(sk.PutResult, string)) { reply(sk.PutSuccess, "") }, 0, "",
			[]step{{"COMPLETED", 200}}, ""},
		{"invalid", func(_ sk.PutRequest, reply func(sk.PutResult, string)) { reply(sk.PutInvalid, "out of range") }, 0, "",
			[]step{{"COMPLETED", 400}}, "out of range"},
		{"failure", func(_ sk.PutRequest, reply func(sk.PutResult, string)) { reply(sk.PutFailure, "bus down") }, 0, "",
			[]step{{"COMPLETED", 502}}, "bus down"},
		{"failure without a message", func(_ sk.PutRequest, reply func(sk.PutResult, string)) { reply(sk.PutFailure, "") }, 0, "",
			[]step{{"COMPLETED", 502}}, "failed"},
		{"panic", func(sk.PutRequest, func(sk.PutResult, string)) { panic("bug") }, 0, "",
			[]step{{"COMPLETED", 502}}, ""},
		{"deferred then success", deferThen, sk.PutSuccess, "", []step{{"PENDING", 202}, {"COMPLETED", 200}}, ""},
		{"deferred then invalid", deferThen, sk.PutInvalid, "no", []step{{"PENDING", 202}, {"COMPLETED", 400}}, "no"},
		{"deferred then failure", deferThen, sk.PutFailure, "relay stuck",
			[]step{{"PENDING", 202}, {"COMPLETED", 502}}, "relay stuck"},
		{"no reply before return", func(_ sk.PutRequest, reply func(sk.PutResult, string)) { keep(reply) },
			sk.PutInvalid, "late", []step{{"PENDING", 202}, {"COMPLETED", 400}}, "late"},
		{"deferred and final before return", func(_ sk.PutRequest, reply func(sk.PutResult, string)) {
			reply(sk.PutDeferred, "")
			reply(sk.PutSuccess, "")
		}, 0, "", []step{{"COMPLETED", 200}}, ""},
		{"no handler", nil, 0, "", []step{{"COMPLETED", 405}}, ""},
	}
	for _, form := range []string{"array", "object"} {
		for _, tc := range cases {
			t.Run(form+"/"+tc.name, func(t *testing.T) {
				f := newFixture(t)
				var got []sk.PutRequest
				if tc.handler != nil {
					_, err := f.s.HandlePut(PutPath{Path: "dev.probe.mode", Handle: func(r sk.PutRequest, reply func(sk.PutResult, string)) {
						got = append(got, r)
						tc.handler(r, reply)
					}})
					must(t, err)
				}
				c := f.connect()
				item := `{"path":"dev.probe.mode","value":"auto"}`
				if form == "array" {
					item = "[" + item + "]"
				}
				c.Send(t, `{"requestId":"req-1","context":"vessels.self","put":`+item+`}`)
				for i, w := range tc.want {
					if i == 1 {
						mu.Lock()
						fn := later
						mu.Unlock()
						fn(tc.final, tc.finalMsg)
					}
					a := nextAnswer(t, c)
					if a.RequestID != "req-1" || a.State != w.state || a.StatusCode != w.code {
						t.Fatalf("answer %d: %+v, want %+v", i, a, w)
					}
					if i == len(tc.want)-1 && tc.msg != "" && a.Message != tc.msg {
						t.Fatalf("message %q, want %q", a.Message, tc.msg)
					}
				}
				c.ExpectNone(t)
				if tc.handler != nil && (len(got) != 1 || string(got[0].Value) != `"auto"` || got[0].Context != "vessels.self") {
					t.Fatalf("handler saw %+v", got)
				}
				// One request, answered once: a PENDING on the way is not a second answer.
				if st := f.s.Status(); st.Put.Inbound != 1 || st.Put.Answered != 1 {
					t.Fatalf("status %+v", st.Put)
				}
			})
		}
	}
}

func TestInboundPutEdgeCases(t *testing.T) {
	f := newFixture(t)
	var calls []string
	h := func(r sk.PutRequest, reply func(sk.PutResult, string)) {
		calls = append(calls, r.Path)
		if r.Path == "dev.b.x" {
			reply(sk.PutInvalid, "b refuses")
			return
		}
		reply(sk.PutSuccess, "")
	}
	_, err := f.s.HandlePut(PutPath{Path: "dev.a.*", Handle: h})
	must(t, err)
	_, err = f.s.HandlePut(PutPath{Path: "dev.b.x", Handle: h})
	must(t, err)
	c := f.connect()
	cases := []struct {
		frame string
		code  int
	}{
		{`{"requestId":"r1","context":"vessels.self","put":[{"path":"dev.a.one","value":1}]}`, 200}, // family handler
		{`{"requestId":"r2","put":[{"path":"dev.a.one","value":1},{"path":"dev.b.x","value":2}]}`, 400},
		{`{"requestId":"r3","put":[{"path":"dev.a.one","value":1},{"path":"dev.c","value":2}]}`, 405},
		{`{"requestId":"r4","put":[]}`, 400},
		{`{"requestId":"r5","put":[{"value":1}]}`, 400},
		{`{"requestId":"r6","put":{"path":"bad path","value":1}}`, 400},
	}
	for _, tc := range cases {
		c.Send(t, tc.frame)
		if a := nextAnswer(t, c); a.StatusCode != tc.code || a.State != "COMPLETED" {
			t.Fatalf("%s: %+v, want %d", tc.frame, a, tc.code)
		}
	}
	// r3 never reached a handler: nothing runs when any path has none.
	if want := []string{"dev.a.one", "dev.a.one", "dev.b.x"}; !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	// No requestId: nothing to answer to.
	c.Send(t, `{"put":[{"path":"dev.a.one","value":1}]}`)
	c.ExpectNone(t)
}

func TestPutableStatePublishedAtBootConnectAndChange(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS = 0 }))
	_, err := f.s.HandlePut((&modeState{mode: "standby"}).path("dev.probe.mode"))
	must(t, err)
	// Registered after start: published at once (buffered while down).
	if st := f.s.Status(); st.Buffered != 1 {
		t.Fatalf("state not published at registration: %+v", st)
	}
	c := f.connect()
	// The buffered state, then the state again for this connection.
	for i := 0; i < 2; i++ {
		if got := deltaValues(t, f.pump(c, 50*time.Millisecond)); !slices.Equal(got, []string{`dev.probe.mode="standby"`}) {
			t.Fatalf("state %d: %v", i, got)
		}
	}
	eventually(t, "drained", func() bool { return !f.s.Status().Draining })
	c.Send(t, `{"requestId":"r1","context":"vessels.self","put":[{"path":"dev.probe.mode","value":"auto"}]}`)
	var sawAnswer, sawState bool
	for !sawAnswer || !sawState {
		b := c.Next(t)
		switch {
		case json.Valid(b) && string(b) == `{"requestId":"r1","state":"COMPLETED","statusCode":200}`:
			sawAnswer = true
		default:
			if got := deltaValues(t, b); !slices.Equal(got, []string{`dev.probe.mode="auto"`}) {
				t.Fatalf("republished %v", got)
			}
			sawState = true
		}
	}
	// A refused PUT republishes nothing.
	c.Send(t, `{"requestId":"r2","context":"vessels.self","put":[{"path":"dev.probe.mode","value":5}]}`)
	if a := nextAnswer(t, c); a.StatusCode != 400 {
		t.Fatalf("answer %+v", a)
	}
	c.ExpectNone(t)
}

func TestHandlePutRegistration(t *testing.T) {
	f := newFixture(t)
	nop := func(_ sk.PutRequest, reply func(sk.PutResult, string)) { reply(sk.PutSuccess, "") }
	if _, err := f.s.HandlePut(PutPath{Path: "a.*", Handle: nop, Current: func() any { return 1 }}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("getter on a family: %v", err)
	}
	if _, err := f.s.HandlePut(PutPath{Path: "a.b"}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("nil handler: %v", err)
	}
	cancel, err := f.s.HandlePut(PutPath{Path: "a.b", Handle: nop})
	must(t, err)
	cancel()
	c := f.connect()
	c.Send(t, `{"requestId":"r","put":[{"path":"a.b","value":1}]}`)
	if a := nextAnswer(t, c); a.StatusCode != 405 {
		t.Fatalf("after cancel: %+v", a)
	}
}

// The owner of a PUT-able path publishes a newer state between the stream's read of the current
// state and its publish of it: the stream reads again and the newer state is the last value
// the server sees.
func TestPutableStateNotOvertakenByAnOlderRead(t *testing.T) {
	f := newFixture(t, withSettings(func(s *Settings) { s.BatchMS = 0 }))
	// The stream reads every current state once more after it connected, outside its lock
	// and after Connected is already true. A sentinel path whose getter publishes nothing
	// tells when that read is done, so the path below is registered after it and the only
	// reads of its state are the ones this test scripts.
	reads0 := make(chan struct{}, 4)
	_, err := f.s.HandlePut(PutPath{
		Path:   "dev.probe.sentinel",
		Handle: func(_ sk.PutRequest, reply func(sk.PutResult, string)) { reply(sk.PutSuccess, "") },
		Current: func() any {
			select {
			case reads0 <- struct{}{}:
			default:
			}
			return nil
		},
	})
	must(t, err)
	c := f.connect()
	for i, what := range []string{"at registration", "after connecting"} {
		select {
		case <-reads0:
		case <-time.After(wait):
			t.Fatalf("sentinel state not read %s (read %d times)", what, i)
		}
	}
	var mu sync.Mutex
	state, reads := "on", 0
	_, err = f.s.HandlePut(PutPath{
		Path:   "dev.probe.pump",
		Handle: func(_ sk.PutRequest, reply func(sk.PutResult, string)) { reply(sk.PutSuccess, "") },
		Current: func() any {
			mu.Lock()
			defer mu.Unlock()
			reads++
			if reads == 1 {
				// This read sees "on"; before the stream publishes it the owner switches
				// to "off" and publishes that.
				state = "off"
				must(t, f.s.PublishString("dev.probe.pump", "off"))
				return "on"
			}
			return state
		},
	})
	must(t, err)
	var seen []string
	for len(seen) < 3 {
		seen = append(seen, deltaValues(t, c.Next(t))...)
	}
	if want := []string{`dev.probe.pump="off"`, `dev.probe.pump="on"`, `dev.probe.pump="off"`}; !slices.Equal(seen, want) {
		t.Fatalf("values %v, want %v", seen, want)
	}
	c.ExpectNone(t)
}
