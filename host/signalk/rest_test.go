package signalk

import (
	"devhost/host/sk"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// answeringStream is a stream whose PUTs are answered by script: at once on another goroutine
// before Put returns (as a fast server and the stream's result goroutine can), or refused, or
// held until released.
type answeringStream struct {
	*fakeStream
	mu     sync.Mutex
	refuse map[string]error
	hold   map[string]chan error
	// early answers each PUT before Put returns, with the path as the message.
	early bool
}

func (s *answeringStream) Put(path string, _ json.RawMessage, answer func(sk.PutAnswer)) error {
	s.mu.Lock()
	err, hold, early := s.refuse[path], s.hold[path], s.early
	s.mu.Unlock()
	if hold != nil {
		err = <-hold
	}
	if err != nil {
		return err
	}
	if early {
		done := make(chan struct{})
		go func() { defer close(done); answer(sk.PutAnswer{State: "COMPLETED", StatusCode: 200, Message: path}) }()
		<-done
	}
	return nil
}

func getPutRecord(t *testing.T, c *Client) PutRecord {
	t.Helper()
	rec := httptest.NewRecorder()
	c.getPut(rec, httptest.NewRequest(http.MethodGet, "/api/v1/sk/put", nil))
	var r PutRecord
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("GET /sk/put: %s", rec.Body)
	}
	return r
}

func answeringRig(t *testing.T) (*answeringStream, *rig) {
	s := &answeringStream{fakeStream: newFakeStream(), refuse: map[string]error{}, hold: map[string]chan error{}}
	_, r := approvedRig(t, func(o *Options) { o.Stream = s })
	return s, r
}

// An answer that arrives before Put returns is kept: GET /sk/put shows it, not PENDING.
func TestPutAnswerBeforePutReturns(t *testing.T) {
	s, r := answeringRig(t)
	s.early = true
	if rec := postJSON(t, r.c.postPut, `{"path":"electrical.switches.a.state","value":true}`); rec.Code != http.StatusAccepted {
		t.Fatalf("POST /sk/put: %d %s", rec.Code, rec.Body)
	}
	got := getPutRecord(t, r.c)
	if got.State != "COMPLETED" || got.StatusCode != 200 || got.Path != "electrical.switches.a.state" {
		t.Fatalf("fast answer lost: %+v", got)
	}
}

// Concurrent POSTs: each answer lands on its own PUT, and the newest PUT shows its own answer.
func TestPutConcurrentPosts(t *testing.T) {
	s, r := answeringRig(t)
	s.early = true
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"path":"electrical.switches.s%d.state","value":%d}`, i, i)
			if rec := postJSON(t, r.c.postPut, body); rec.Code != http.StatusAccepted {
				t.Errorf("POST %d: %d %s", i, rec.Code, rec.Body)
			}
			got := getPutRecord(t, r.c)
			if got.State != "COMPLETED" && got.State != "PENDING" || got.State == "COMPLETED" && got.Message != got.Path {
				t.Errorf("a record shows another PUT's answer: %+v", got)
			}
		}()
	}
	wg.Wait()
	got := getPutRecord(t, r.c)
	if got.State != "COMPLETED" || got.Message != got.Path {
		t.Fatalf("the last PUT's own answer: %+v", got)
	}
}

// A refused PUT was never sent: GET /sk/put keeps showing the newest PUT that was, also when
// refusals interleave.
func TestPutRefusedKeepsLastSent(t *testing.T) {
	s, r := answeringRig(t)
	s.refuse["x.refused"] = ErrInvalidState
	s.hold["x.b"] = make(chan error)
	s.hold["x.c"] = make(chan error)
	s.hold["x.d"] = make(chan error)
	post := func(path string) int {
		return postJSON(t, r.c.postPut, `{"path":"`+path+`","value":1}`).Code
	}
	if post("x.a") != http.StatusAccepted {
		t.Fatal("x.a not sent")
	}
	if post("x.refused") != http.StatusConflict {
		t.Fatal("x.refused not refused")
	}
	if got := getPutRecord(t, r.c); got.Path != "x.a" || got.State != "PENDING" {
		t.Fatalf("after a refusal: %+v", got)
	}
	// x.b and x.c are both in Put; x.b is refused first (x.c is newest, it stays), then x.c
	// (back past the refused x.b to x.a).
	codes := make(chan int, 2)
	go func() { codes <- post("x.b") }()
	eventually(t, "x.b in Put", func() bool { return getPutRecord(t, r.c).Path == "x.b" })
	go func() { codes <- post("x.c") }()
	eventually(t, "x.c in Put", func() bool { return getPutRecord(t, r.c).Path == "x.c" })
	s.hold["x.b"] <- ErrBusy
	if c := <-codes; c != http.StatusConflict {
		t.Fatalf("x.b: %d", c)
	}
	if got := getPutRecord(t, r.c); got.Path != "x.c" {
		t.Fatalf("x.c in flight, newest: %+v", got)
	}
	s.hold["x.c"] <- ErrInvalidState
	if c := <-codes; c != http.StatusConflict {
		t.Fatalf("x.c: %d", c)
	}
	if got := getPutRecord(t, r.c); got.Path != "x.a" {
		t.Fatalf("both refused: %+v", got)
	}
	// The other order: the newest is refused while the older is still in Put, which then goes
	// out and stays.
	go func() { codes <- post("x.d") }()
	eventually(t, "x.d in Put", func() bool { return getPutRecord(t, r.c).Path == "x.d" })
	if post("x.refused") != http.StatusConflict {
		t.Fatal("x.refused not refused")
	}
	if got := getPutRecord(t, r.c); got.Path != "x.d" {
		t.Fatalf("x.d in flight: %+v", got)
	}
	s.hold["x.d"] <- nil
	if c := <-codes; c != http.StatusAccepted {
		t.Fatalf("x.d: %d", c)
	}
	if got := getPutRecord(t, r.c); got.Path != "x.d" || got.State != "PENDING" {
		t.Fatalf("x.d sent: %+v", got)
	}
}

// heldStream answers PUTs of x.a later through its callback and holds the PUT of x.b until the
// test says how it ends.
type heldStream struct {
	*fakeStream
	mu      sync.Mutex
	answers map[string]func(sk.PutAnswer)
	hold    chan error
}

func (s *heldStream) Put(path string, _ json.RawMessage, answer func(sk.PutAnswer)) error {
	if path == "x.b" {
		return <-s.hold
	}
	s.mu.Lock()
	s.answers[path] = answer
	s.mu.Unlock()
	return nil
}

// An answer to a PUT that a newer one displaced still lands: when the newer PUT is refused,
// GET /sk/put goes back to the older one and shows its answer.
func TestPutAnswerKeptWhileDisplaced(t *testing.T) {
	s := &heldStream{fakeStream: newFakeStream(), answers: map[string]func(sk.PutAnswer){}, hold: make(chan error)}
	_, r := approvedRig(t, func(o *Options) { o.Stream = s })
	if c := postJSON(t, r.c.postPut, `{"path":"x.a","value":1}`).Code; c != http.StatusAccepted {
		t.Fatal(c)
	}
	done := make(chan int)
	go func() { done <- postJSON(t, r.c.postPut, `{"path":"x.b","value":1}`).Code }()
	eventually(t, "x.b in Put", func() bool { return getPutRecord(t, r.c).Path == "x.b" })
	s.mu.Lock()
	answer := s.answers["x.a"]
	s.mu.Unlock()
	answer(sk.PutAnswer{State: "COMPLETED", StatusCode: 200})
	s.hold <- ErrBusy
	if c := <-done; c != http.StatusConflict {
		t.Fatalf("refused PUT answered %d", c)
	}
	if got := getPutRecord(t, r.c); got.Path != "x.a" || got.State != "COMPLETED" || got.StatusCode != 200 {
		t.Fatalf("GET /sk/put after the newer PUT was refused: %+v", got)
	}
}
