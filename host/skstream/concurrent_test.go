package skstream

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The publishers of TestConcurrentPublishers: each worker owns one path per kind and publishes
// its round number into it in order; all of them also race on one shared path.
const (
	concWorkers = 8
	concRounds  = 150
	concShared  = "conc.shared"
	concLast    = -1 // published to concShared after every worker finished
)

func concPath(w int, kind string) string { return fmt.Sprintf("conc.w%d.%s", w, kind) }

// concRound recovers the round a worker-owned value was published in; bools carry only parity.
func concRound(t *testing.T, kind string, raw json.RawMessage) int {
	t.Helper()
	var n int
	var err error
	switch kind {
	case "num":
		err = json.Unmarshal(raw, &n)
	case "str":
		var s string
		if err = json.Unmarshal(raw, &s); err == nil {
			n, err = strconv.Atoi(s)
		}
	case "json":
		var v struct{ Round int }
		err = json.Unmarshal(raw, &v)
		n = v.Round
	case "bool":
		var b bool
		err = json.Unmarshal(raw, &b)
		if b {
			n = 1
		}
	}
	if err != nil {
		t.Fatalf("%s value %s: %v", kind, raw, err)
	}
	return n
}

// TestConcurrentPublishers publishes numbers, strings, booleans and JSON from several goroutines
// at once into a connected stream (run it with -race). What the server sees must follow the
// spec: per path, values arrive in publishing order without repeats; a path appears at most
// once per message (the last value of its window); the last value of every path arrives; with
// sk.batch_ms 0 nothing is coalesced, so every value arrives exactly once. The ring is large
// enough that it never drops, so no other loss is allowed.
func TestConcurrentPublishers(t *testing.T) {
	for _, batchMS := range []int{100, 0} {
		t.Run(fmt.Sprintf("batch_ms=%d", batchMS), func(t *testing.T) {
			f := newFixture(t, withSettings(func(s *Settings) {
				s.BatchMS, s.BufferMsgs, s.BufferKB = batchMS, 1<<16, 1<<16
			}))
			c := f.connect()

			// Collect every delta until the one carrying the final shared value.
			msgs := make(chan []wireValue, 1)
			go func() {
				var all []wireValue
				defer func() { msgs <- all }()
				deadline := time.After(wait)
				for {
					select {
					case b := <-c.Frames():
						vs, ok := decodeValues(b)
						if !ok {
							t.Errorf("not a delta: %s", b)
							return
						}
						all = append(all, vs...)
						for _, v := range vs {
							if v.path == concShared && string(v.value) == strconv.Itoa(concLast) {
								return
							}
						}
					case <-deadline:
						t.Error("the final shared value never arrived")
						return
					}
				}
			}()

			// With batching on, windows close on the fake clock while the workers run.
			stopTick, ticked := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(ticked)
				for {
					select {
					case <-stopTick:
						return
					case <-time.After(200 * time.Microsecond):
						f.clk.Advance(time.Duration(batchMS) * time.Millisecond)
					}
				}
			}()

			var wg sync.WaitGroup
			start := make(chan struct{})
			for w := 0; w < concWorkers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for i := 0; i < concRounds; i++ {
						errs := []error{
							f.s.PublishNumber(concPath(w, "num"), float64(i)),
							f.s.PublishString(concPath(w, "str"), strconv.Itoa(i)),
							f.s.PublishBool(concPath(w, "bool"), i%2 == 1),
							f.s.PublishJSON(concPath(w, "json"), fmt.Appendf(nil, `{"round":%d,"worker":%d}`, i, w)),
							f.s.PublishNumber(concShared, float64(w*concRounds+i)),
						}
						for _, err := range errs {
							if err != nil {
								t.Errorf("worker %d round %d: %v", w, i, err)
								return
							}
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			close(stopTick)
			<-ticked
			must(t, f.s.PublishNumber(concShared, concLast))
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			must(t, f.s.Flush(ctx, time.Hour))
			got := <-msgs
			if t.Failed() {
				return
			}
			c.ExpectNone(t)

			// Per message, a path at most once.
			seen, messages := map[string]bool{}, 0
			for _, v := range got {
				if v.first {
					clear(seen)
					messages++
				}
				if seen[v.path] {
					t.Fatalf("%s twice in one message", v.path)
				}
				seen[v.path] = true
			}

			t.Logf("%d values in %d messages", len(got), messages)
			byPath := map[string][]json.RawMessage{}
			for _, v := range got {
				byPath[v.path] = append(byPath[v.path], v.value)
			}
			for w := 0; w < concWorkers; w++ {
				for _, kind := range []string{"num", "str", "json", "bool"} {
					path := concPath(w, kind)
					vals := byPath[path]
					if len(vals) == 0 {
						t.Fatalf("%s never arrived", path)
					}
					last := concRound(t, kind, vals[len(vals)-1])
					want := concRounds - 1
					if kind == "bool" {
						want %= 2
					}
					if last != want {
						t.Fatalf("%s ends at %d, want %d", path, last, want)
					}
					if batchMS == 0 && len(vals) != concRounds {
						t.Fatalf("%s arrived %d times, want every one of %d values", path, len(vals), concRounds)
					}
					if kind == "bool" {
						continue
					}
					prev := -1
					for _, raw := range vals {
						r := concRound(t, kind, raw)
						if r <= prev {
							t.Fatalf("%s: round %d after %d", path, r, prev)
						}
						prev = r
					}
				}
			}
			shared := byPath[concShared]
			if string(shared[len(shared)-1]) != strconv.Itoa(concLast) {
				t.Fatalf("%s ends at %s", concShared, shared[len(shared)-1])
			}
			once := map[string]bool{}
			for _, raw := range shared {
				if once[string(raw)] {
					t.Fatalf("%s value %s arrived twice", concShared, raw)
				}
				once[string(raw)] = true
			}
			if batchMS == 0 && len(shared) != concWorkers*concRounds+1 {
				t.Fatalf("%s arrived %d times, want %d", concShared, len(shared), concWorkers*concRounds+1)
			}
			if st := f.s.Status(); st.Dropped != 0 || st.Buffered != 0 {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

// wireValue is one value of an outbound delta; first marks the first value of its message.
type wireValue struct {
	path  string
	value json.RawMessage
	first bool
}

func decodeValues(b []byte) ([]wireValue, bool) {
	var d wireDelta
	if err := json.Unmarshal(b, &d); err != nil || len(d.Updates) != 1 {
		return nil, false
	}
	var out []wireValue
	for i, v := range d.Updates[0].Values {
		out = append(out, wireValue{path: v.Path, value: v.Value, first: i == 0})
	}
	return out, len(out) > 0
}
