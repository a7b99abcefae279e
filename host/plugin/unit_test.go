package plugin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"devhost/abi"
	sktypes "devhost/host/sk"
)

func TestInbox(t *testing.T) {
	b := newInbox()
	if b.push(1, queued{kind: abi.EvTimer, timer: 1}) {
		t.Fatal("accepted an event with no instance")
	}
	gen := b.open()
	if b.push(gen-1, queued{kind: abi.EvTimer, timer: 1}) {
		t.Fatal("accepted an event of an earlier instance")
	}
	delta := func(path string) queued {
		return queued{kind: abi.EvDelta, payload: abi.AppendValue(nil, path, abi.Number(1)), n: 1}
	}
	b.push(gen, delta("a.b"))
	b.push(gen, delta("a.c")) // merged with the previous delta
	b.push(gen, queued{kind: abi.EvTimer, timer: 3, payload: abi.AppendTimer(nil, 3)})
	b.push(gen, queued{kind: abi.EvTimer, timer: 3, payload: abi.AppendTimer(nil, 3)}) // still queued: dropped
	b.push(gen, queued{kind: abi.EvTimer, timer: 4, payload: abi.AppendTimer(nil, 4)})
	b.dropTimer(4)
	b.markConfig(gen)
	select {
	case <-b.kick:
	default:
		t.Fatal("no signal")
	}
	evs, cfg := b.take()
	if len(evs) != 2 || evs[0].kind != abi.EvDelta || evs[1].kind != abi.EvTimer || !cfg {
		t.Fatalf("batch %+v config %v", evs, cfg)
	}
	vals, err := abi.DecodeValues(evs[0].payload, 0)
	if err != nil || len(vals) != 2 {
		t.Fatalf("merged delta: %v %v", vals, err)
	}
	// Once taken, the timer can queue again.
	if !b.push(gen, queued{kind: abi.EvTimer, timer: 3, payload: abi.AppendTimer(nil, 3)}) {
		t.Fatal("timer not requeued")
	}
	// The cap on queued bytes.
	big := make([]byte, MaxQueued)
	if b.push(gen, queued{kind: abi.EvCAN, payload: big}) || b.droppedCount() != 1 {
		t.Fatal("the queue grew past its cap")
	}
	// A batch holds at most MaxEventBatch; the rest waits for the next one.
	for i := 0; i < 3; i++ {
		b.push(gen, queued{kind: abi.EvCAN, payload: make([]byte, abi.MaxEventBatch/2)})
	}
	evs, _ = b.take()
	size := 0
	for _, e := range evs {
		size += abi.EventHeader + len(e.payload)
	}
	if size > abi.MaxEventBatch || len(evs) != 2 {
		t.Fatalf("batch of %d bytes in %d events", size, len(evs))
	}
	if left := b.close(); len(left) != 2 {
		t.Fatalf("close handed back %d events", len(left))
	}
	if b.push(gen, delta("a.b")) {
		t.Fatal("accepted after close")
	}
}

func TestPartition(t *testing.T) {
	dir := t.TempDir()
	pt := partition{dir: dir}
	if err := pt.open(); err != nil {
		t.Fatal(err)
	}
	rec := record{ID: "app", Granted: []string{"log"}, Wanted: WantRunning}
	if err := pt.install(rec, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	rec.Granted = []string{"log", "http"}
	if err := pt.install(rec, []byte("v2")); err != nil {
		t.Fatal(err)
	}
	b, _ := pt.readBundle("app")
	r, _ := pt.readRecord("app")
	if string(b) != "v2" || len(r.Granted) != 2 {
		t.Fatalf("after replace: %q %+v", b, r)
	}
	// An interrupted replacement: the old one moved aside, the new one not yet in place.
	if err := os.Rename(pt.pluginDir("app"), filepath.Join(dir, oldPrefix+"app")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, newPrefix+"app"), 0o755); err != nil {
		t.Fatal(err)
	}
	// An interrupted removal.
	if err := pt.install(record{ID: "gone", Wanted: WantStopped}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(pt.pluginDir("gone"), filepath.Join(dir, delPrefix+"gone")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, uploadsDir, "stale"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := pt.open(); err != nil {
		t.Fatal(err)
	}
	ids, _ := pt.list()
	if len(ids) != 1 || ids[0] != "app" {
		t.Fatalf("after recovery: %v", ids)
	}
	if b, _ := pt.readBundle("app"); string(b) != "v2" {
		t.Fatalf("recovered bundle %q", b)
	}
	for _, n := range []string{newPrefix + "app", oldPrefix + "app", delPrefix + "gone", filepath.Join(uploadsDir, "stale")} {
		if _, err := os.Stat(filepath.Join(dir, n)); !os.IsNotExist(err) {
			t.Errorf("%s left behind", n)
		}
	}
	if err := pt.remove("app"); err != nil {
		t.Fatal(err)
	}
	if ids, _ := pt.list(); len(ids) != 0 {
		t.Fatal(ids)
	}
	// A record that names another plugin is refused.
	if err := pt.install(record{ID: "a"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pt.pluginDir("a"), recordFile), []byte(`{"id":"b"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pt.readRecord("a"); err == nil {
		t.Fatal("mismatched record accepted")
	}
}

func TestFetch(t *testing.T) {
	body := make([]byte, 1000)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			_, _ = w.Write(body)
		case "/stream":
			w.(http.Flusher).Flush()
			_, _ = w.Write(body)
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/ftp":
			http.Redirect(w, r, "ftp://example/x", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer ts.Close()
	c := newHTTPClient(DefaultDownload)
	ctx := context.Background()
	if b, err := fetch(ctx, c, ts.URL+"/redirect", 1000); err != nil || len(b) != 1000 {
		t.Fatalf("redirect: %v", err)
	}
	for _, p := range []string{"/ok", "/stream"} {
		if _, err := fetch(ctx, c, ts.URL+p, 999); !errors.Is(err, errTooLarge) {
			t.Errorf("%s over the cap: %v", p, err)
		}
	}
	for _, u := range []string{ts.URL + "/missing", ts.URL + "/ftp", "file:///etc/passwd", "http://"} {
		if _, err := fetch(ctx, c, u, 1000); err == nil {
			t.Errorf("%s fetched", u)
		}
	}
}

// sk_publish's decoder converts every kind, hands the client a slice it reuses for the next
// message (the fake, like the real clients, copies the values), refuses a bad message
// whole, and keeps nothing of the last batch once released.
func TestPublisherDecode(t *testing.T) {
	var p publisher
	sk := newFakeSK()
	msgs := [][]byte{
		abi.AppendValues(nil, []abi.PathValue{{Path: "a.b", Value: abi.Number(1.5)}, {Path: "c.d", Value: abi.String("x")}}),
		abi.AppendValues(nil, []abi.PathValue{{Path: "a.b", Value: abi.Bool(true)}, {Path: "e.f", Value: abi.JSON([]byte(`{"v":1}`))}, {Path: "g", Value: abi.Null()}}),
	}
	for _, m := range msgs {
		out, err := p.decode(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := sk.Publish(out...); err != nil {
			t.Fatal(err)
		}
		p.release()
	}
	want := []sktypes.Value{{Path: "a.b", Value: 1.5}, {Path: "c.d", Value: "x"}, {Path: "a.b", Value: true},
		{Path: "e.f", Value: json.RawMessage(`{"v":1}`)}, {Path: "g", Value: nil}}
	if !reflect.DeepEqual(sk.values, want) {
		t.Errorf("published %+v, want %+v", sk.values, want)
	}
	if out, err := p.decode(append(msgs[0], abi.AppendValue(nil, "a..b", abi.Number(1))...)); err == nil || out != nil {
		t.Errorf("a message with a bad path gave %+v, %v", out, err)
	}
	if _, err := p.decode(msgs[1]); err != nil {
		t.Fatal(err)
	}
	p.release()
	for i, v := range p.out[:cap(p.out)] {
		if v != (sktypes.Value{}) {
			t.Errorf("slot %d keeps %+v after release", i, v)
		}
	}
}

// A batch taken stays as it was while the worker delivers it, whatever is queued meanwhile;
// the queue reuses its array at the next take, and keeps the order throughout.
func TestInboxTakeKeepsBatch(t *testing.T) {
	b := newInbox()
	gen := b.open()
	timer := func(id uint32) queued {
		return queued{kind: abi.EvTimer, timer: id, payload: abi.AppendTimer(nil, id)}
	}
	ids := func(evs []queued) []uint32 {
		var out []uint32
		for _, e := range evs {
			out = append(out, e.timer)
		}
		return out
	}
	next := uint32(1)
	for round := 0; round < 4; round++ {
		for i := 0; i < 3; i++ {
			b.push(gen, timer(next))
			next++
		}
		evs, _ := b.take()
		want := ids(evs)
		for i := 0; i < 5; i++ { // queued while the batch is being delivered
			b.push(gen, timer(next))
			next++
		}
		if got := ids(evs); !slices.Equal(got, want) {
			t.Fatalf("round %d: batch became %v, was %v", round, got, want)
		}
		rest, _ := b.take()
		if got := ids(rest); len(got) != 5 || got[0] != want[len(want)-1]+1 || got[4] != next-1 {
			t.Fatalf("round %d: next batch %v after %v", round, got, want)
		}
	}
}

// fakeGather is the inbox's gathering timer, fired by the test.
type fakeGather struct {
	t       *testing.T
	armed   bool
	stopped int
}

func (f *fakeGather) Reset(d time.Duration) bool {
	if d != CANGather {
		f.t.Errorf("gathering for %v", d)
	}
	was := f.armed
	f.armed = true
	return was
}

func (f *fakeGather) Stop() bool {
	was := f.armed
	f.armed = false
	f.stopped++
	return was
}

// CAN frames wait for company (CANGather) unless enough of them or another event comes.
func TestInboxGathersCAN(t *testing.T) {
	b := newInbox()
	timer := &fakeGather{t: t}
	b.gather = timer
	armed := func() bool { return timer.armed }
	// fire is the timer's firing as the worker sees it: due ready, then flushHeld.
	fire := func() {
		timer.armed = false
		b.flushHeld()
	}
	kicked := func() bool {
		select {
		case <-b.kick:
			return true
		default:
			return false
		}
	}
	frame := queued{kind: abi.EvCAN, payload: abi.AppendCANFrame(nil, abi.CANFrame{ID: 1, Data: []byte{1}})}
	gen := b.open()
	for i := 0; i < 3; i++ {
		b.push(gen, frame)
	}
	if kicked() || !armed() {
		t.Fatal("a CAN frame called the plugin at once")
	}
	fire() // the gathering time is over
	if !kicked() {
		t.Fatal("held frames not signalled")
	}
	if evs, _ := b.take(); len(evs) != 3 {
		t.Fatalf("batch of %d frames", len(evs))
	}
	// Another kind of event takes the held frames along at once.
	b.push(gen, frame)
	b.push(gen, queued{kind: abi.EvTimer, timer: 1, payload: abi.AppendTimer(nil, 1)})
	if !kicked() || timer.stopped != 1 || armed() {
		t.Fatalf("timer event: kicked no, gathering stopped %d times", timer.stopped)
	}
	if evs, _ := b.take(); len(evs) != 2 || evs[0].kind != abi.EvCAN {
		t.Fatalf("batch %+v", evs)
	}
	// A full gathering goes at once.
	for i := 0; i < CANGatherFrames; i++ {
		b.push(gen, frame)
	}
	if !kicked() {
		t.Fatal("a full gathering waited")
	}
	if evs, _ := b.take(); len(evs) != CANGatherFrames {
		t.Fatalf("batch of %d frames", len(evs))
	}
	fire() // a late firing after the frames went: nothing to signal
	if kicked() {
		t.Fatal("signalled an empty gathering")
	}
}
