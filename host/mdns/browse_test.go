package mdns

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

const skHTTP = "_signalk-http._tcp"

var t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)

func skPTR(inst string, ttl uint32) record {
	return record{Name: skHTTP + ".local.", Type: dnsmessage.TypePTR, TTL: ttl, Target: inst + "." + skHTTP + ".local."}
}

func skSRV(inst, host string, port uint16, ttl uint32) record {
	return record{Name: inst + "." + skHTTP + ".local.", Type: dnsmessage.TypeSRV, Flush: true, TTL: ttl, Port: port, Target: host + ".local."}
}

func skTXT(inst string, ttl uint32, text ...string) record {
	return record{Name: inst + "." + skHTTP + ".local.", Type: dnsmessage.TypeTXT, Flush: true, TTL: ttl, Text: text}
}

func hostA(host, ip string, ttl uint32) record {
	return record{Name: host + ".local.", Type: dnsmessage.TypeA, Flush: true, TTL: ttl, Addr: netip.MustParseAddr(ip)}
}

func fullResponse(inst, host, ip string) *message {
	return &message{Response: true,
		Answers: []record{skPTR(inst, 4500)},
		Additionals: []record{
			hostA(host, ip, 120), // addresses before the SRV naming them still count
			skSRV(inst, host, 3000, 120),
			skTXT(inst, 4500, "self=urn:mrn:signalk:uuid:1", "roles=master, main", "swname=signalk-server", "swvers=2.32.0"),
		}}
}

func evTypes(evs []Event) []EventType {
	var out []EventType
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func TestBrowseStateLifecycle(t *testing.T) {
	st := newBrowseState(skHTTP, t0)
	qs, known, evs := st.due(t0)
	if len(evs) != 0 || len(known) != 0 || !slices.Equal(qs, []question{{Name: "_signalk-http._tcp.local.", Type: dnsmessage.TypePTR}}) {
		t.Fatalf("first due: %+v %+v %+v", qs, known, evs)
	}

	evs = st.receive(t0, fullResponse("boat", "pi", "10.0.0.5"))
	want := Event{Type: Added, Instance: "boat", Service: skHTTP, Host: "pi.local", Port: 3000,
		Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.5")},
		TXT:   map[string]string{"self": "urn:mrn:signalk:uuid:1", "roles": "master, main", "swname": "signalk-server", "swvers": "2.32.0"}}
	if len(evs) != 1 || !evs[0].same(want) || evs[0].Type != Added {
		t.Fatalf("added: %+v", evs)
	}
	// The same records again change nothing.
	if evs := st.receive(t0.Add(time.Second), fullResponse("boat", "pi", "10.0.0.5")); len(evs) != 0 {
		t.Fatalf("repeat: %+v", evs)
	}
	// A second address (no flush bit) is added; a new TXT (flush) replaces the old.
	evs = st.receive(t0.Add(2*time.Second), &message{Response: true, Answers: []record{
		{Name: "pi.local.", Type: dnsmessage.TypeAAAA, TTL: 120, Addr: netip.MustParseAddr("fd00::5")},
	}})
	if len(evs) != 1 || evs[0].Type != Updated || len(evs[0].Addrs) != 2 {
		t.Fatalf("second address: %+v", evs)
	}
	evs = st.receive(t0.Add(3*time.Second), &message{Response: true, Answers: []record{skTXT("boat", 4500, "self=urn:mrn:signalk:uuid:1", "swvers=2.33.0")}})
	if len(evs) != 1 || evs[0].Type != Updated || evs[0].TXT["swvers"] != "2.33.0" {
		t.Fatalf("new TXT: %+v", evs)
	}
	// The newest TXT counts at once; the old one is flushed from the cache a second later.
	_, _, evs = st.due(t0.Add(4 * time.Second))
	if len(evs) != 0 || len(st.find("boat._signalk-http._tcp.local.", dnsmessage.TypeTXT)) != 1 {
		t.Fatalf("after flush: %+v, %d TXT records", evs, len(st.find("boat._signalk-http._tcp.local.", dnsmessage.TypeTXT)))
	}
	// Goodbye: removed one second later, with the last known state.
	evs = st.receive(t0.Add(5*time.Second), &message{Response: true, Answers: []record{skPTR("boat", 0)}})
	if len(evs) != 0 {
		t.Fatalf("goodbye reported at once: %+v", evs)
	}
	if next := st.next(t0.Add(5 * time.Second)); next != t0.Add(6*time.Second) {
		t.Fatalf("next after goodbye %v", next.Sub(t0))
	}
	_, _, evs = st.due(t0.Add(6 * time.Second))
	if len(evs) != 1 || evs[0].Type != Removed || evs[0].Instance != "boat" || evs[0].Port != 3000 {
		t.Fatalf("removed: %+v", evs)
	}
	// It comes back: Added again.
	evs = st.receive(t0.Add(7*time.Second), fullResponse("boat", "pi", "10.0.0.5"))
	if !slices.Equal(evTypes(evs), []EventType{Added}) {
		t.Fatalf("back: %+v", evs)
	}
}

func TestBrowseStateExpiryAndRefresh(t *testing.T) {
	st := newBrowseState(skHTTP, t0)
	st.due(t0)
	st.receive(t0, &message{Response: true, Answers: []record{skPTR("boat", 100), skSRV("boat", "pi", 3000, 100), skTXT("boat", 100, "self=x"), hostA("pi", "10.0.0.5", 100)}})
	// Periodic queries: 1 s, then 2 s, 4 s … after the first.
	at := []time.Duration{time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second, 31 * time.Second, 63 * time.Second}
	for _, d := range at {
		if next := st.next(t0); next.Sub(t0) > d {
			t.Fatalf("next %v, want by %v", next.Sub(t0), d)
		}
		qs, known, _ := st.due(t0.Add(d))
		if !slices.ContainsFunc(qs, func(q question) bool { return q.Type == dnsmessage.TypePTR }) {
			t.Fatalf("no PTR query at %v: %+v", d, qs)
		}
		// Known answers carry the PTR with its remaining TTL while over half is left.
		if d < 50*time.Second && (len(known) != 1 || known[0].TTL != uint32(100-d/time.Second)) {
			t.Fatalf("known answers at %v: %+v", d, known)
		}
		if d > 50*time.Second && len(known) != 0 {
			t.Fatalf("known answers at %v: %+v", d, known)
		}
	}
	// Refresh at 80 % of the TTL asks for every record of the instance, again at 90 %.
	qs, _, _ := st.due(t0.Add(80 * time.Second))
	if len(qs) != 4 {
		t.Fatalf("refresh at 80%%: %+v", qs)
	}
	if qs, _, _ := st.due(t0.Add(85 * time.Second)); len(qs) != 0 {
		t.Fatalf("between refreshes: %+v", qs)
	}
	if qs, _, _ := st.due(t0.Add(90 * time.Second)); len(qs) != 4 {
		t.Fatalf("refresh at 90%%: %+v", qs)
	}
	// Nobody answered: at 100 % the instance is gone.
	_, _, evs := st.due(t0.Add(100 * time.Second))
	if !slices.Equal(evTypes(evs), []EventType{Removed}) {
		t.Fatalf("expiry: %+v", evs)
	}
	if len(st.cache) != 0 {
		t.Fatalf("cache keeps %d records", len(st.cache))
	}
}

func TestBrowseStateResolvesMissingParts(t *testing.T) {
	st := newBrowseState(skHTTP, t0)
	st.due(t0)
	// Only the PTR: ask for SRV and TXT after a short wait.
	if evs := st.receive(t0, &message{Response: true, Answers: []record{skPTR("boat", 4500)}}); len(evs) != 0 {
		t.Fatal(evs)
	}
	if next := st.next(t0); next != t0.Add(resolveDelay) {
		t.Fatalf("resolve at %v", next.Sub(t0))
	}
	qs, _, _ := st.due(t0.Add(resolveDelay))
	want := []question{{Name: "boat._signalk-http._tcp.local.", Type: dnsmessage.TypeSRV}, {Name: "boat._signalk-http._tcp.local.", Type: dnsmessage.TypeTXT}}
	if !slices.Equal(qs, want) {
		t.Fatalf("resolve questions %+v", qs)
	}
	// SRV and TXT, no address: ask for the host's A record.
	st.receive(t0.Add(time.Second), &message{Response: true, Answers: []record{skSRV("boat", "pi", 3000, 120), skTXT("boat", 4500)}})
	qs, _, _ = st.due(t0.Add(time.Second + resolveDelay))
	if !slices.Contains(qs, question{Name: "pi.local.", Type: dnsmessage.TypeA}) {
		t.Fatalf("no A question: %+v", qs)
	}
	evs := st.receive(t0.Add(2*time.Second), &message{Response: true, Answers: []record{hostA("pi", "10.0.0.5", 120)}})
	if !slices.Equal(evTypes(evs), []EventType{Added}) || len(evs[0].TXT) != 0 {
		t.Fatalf("resolved: %+v", evs)
	}
}

func TestBrowseStateIgnoresOthers(t *testing.T) {
	st := newBrowseState(skHTTP, t0)
	evs := st.receive(t0, &message{Response: true, Answers: []record{
		{Name: "_http._tcp.local.", Type: dnsmessage.TypePTR, TTL: 4500, Target: "x._http._tcp.local."},
		{Name: skHTTP + ".local.", Type: dnsmessage.TypePTR, TTL: 4500, Target: "x._http._tcp.local."}, // points elsewhere
		hostA("stranger", "10.0.0.9", 120), // no SRV names it
		{Name: "a.b." + skHTTP + ".local.", Type: dnsmessage.TypeSRV, TTL: 120, Target: "pi.local."},
	}})
	if len(evs) != 0 || len(st.cache) != 0 {
		t.Fatalf("cached %d records, events %+v", len(st.cache), evs)
	}
	// A flood fills the cache up to its bound only.
	var flood []record
	for i := 0; i < maxCached+100; i++ {
		flood = append(flood, skPTR("i"+string(rune('a'+i%26))+string(rune('a'+i/26%26)), 4500))
	}
	for i := 0; i < len(flood); i += 200 {
		st.receive(t0, &message{Response: true, Answers: flood[i:min(i+200, len(flood))]})
	}
	if len(st.cache) > maxCached {
		t.Fatalf("cache grew to %d", len(st.cache))
	}
}

func TestBrowseThroughResponder(t *testing.T) {
	h := newHarness(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan Event, 8)
	done := make(chan error, 1)
	go func() { done <- h.r.Browse(ctx, skHTTP, func(e Event) { events <- e }) }()
	// The browse waits for the responder.
	select {
	case s := <-h.link.out:
		t.Fatalf("query before start: %+v", s.m)
	case <-time.After(30 * time.Millisecond):
	}
	h.start()
	var q sent
	for {
		q = h.next()
		if !q.m.Response && q.m.Questions[0].Type == dnsmessage.TypePTR {
			break
		}
	}
	if q.m.Questions[0].Name != "_signalk-http._tcp.local." || q.dst != nil {
		t.Fatalf("query %+v", q)
	}
	h.inject(*fullResponse("boat", "pi", "10.0.0.5"), peer)
	select {
	case e := <-events:
		if e.Type != Added || e.Instance != "boat" || e.TXT["swname"] != "signalk-server" {
			t.Fatalf("event %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("browse ended with %v", err)
	}

	go func() { done <- h.r.Browse(context.Background(), skHTTP, func(Event) {}) }()
	time.Sleep(20 * time.Millisecond)
	_ = h.r.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("browse after close: %v", err)
	}
	for _, bad := range []string{"http._tcp", "_http", "_http._sctp", "_http._tcp.local"} {
		if err := h.r.Browse(context.Background(), bad, func(Event) {}); !errors.Is(err, ErrInvalid) {
			t.Errorf("Browse(%q) = %v", bad, err)
		}
	}
}
