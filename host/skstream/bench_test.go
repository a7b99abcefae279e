package skstream

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jonboulle/clockwork"

	"devhost/host/skstream/skpeer"
)

// benchPeer accepts one stream, sends the hello and counts values; with stall set it never
// reads after the hello, so the device's socket fills up and its writer blocks.
func benchPeer(b *testing.B, stall bool) (url string, values *atomic.Int64) {
	values = new(atomic.Int64)
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		_ = ws.WriteMessage(websocket.TextMessage, []byte(skpeer.Hello))
		if stall {
			<-r.Context().Done()
			return
		}
		for {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			values.Add(int64(bytes.Count(msg, []byte(`{"path":`))))
		}
	}))
	b.Cleanup(srv.Close)
	return "ws://" + srv.Listener.Addr().String(), values
}

func benchStream(b *testing.B, url string, set ...func(*Settings)) *Stream {
	st := DefaultSettings()
	for _, fn := range set {
		fn(&st)
	}
	s := connectedStream(b, url, st)
	b.Cleanup(s.Close)
	return s
}

// connectedStream starts a stream with the wall clock and waits until it is connected to
// url; the caller closes it.
func connectedStream(b *testing.B, url string, st Settings) *Stream {
	s := New(Options{Clock: clockwork.NewRealClock(), Hostname: "bench", Settings: st,
		WallClock: func() (time.Time, bool) { return time.Now(), true }})
	if err := s.Start(context.Background()); err != nil {
		s.Close()
		b.Fatal(err)
	}
	s.SetTarget(&Target{URL: url, Token: "t"})
	for deadline := time.Now().Add(10 * time.Second); !s.Connected(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			s.Close()
			b.Fatal("not connected")
		}
	}
	return s
}

func benchPaths(n int) []string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = fmt.Sprintf("dev.bench.sensor%d.value", i)
	}
	return ps
}

// benchPublisher is a stream connected to a reading peer with the default settings and the 64
// paths it publishes to, the timer reset: what the caller-cost benchmarks share.
func benchPublisher(b *testing.B) (*Stream, []string) {
	url, _ := benchPeer(b, false)
	s := benchStream(b, url)
	paths := benchPaths(64)
	b.ReportAllocs()
	b.ResetTimer()
	return s, paths
}

// BenchmarkPublishNumber is the caller's cost of one published number (connected, 100 ms
// batches, 64 distinct paths).
func BenchmarkPublishNumber(b *testing.B) {
	s, paths := benchPublisher(b)
	for i := 0; i < b.N; i++ {
		if err := s.PublishNumber(paths[i&63], float64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPublishParallel publishes from every P at once.
func BenchmarkPublishParallel(b *testing.B) {
	s, paths := benchPublisher(b)
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			_ = s.PublishNumber(paths[i&63], float64(i))
			i++
		}
	})
}

// BenchmarkEndToEnd publishes distinct values as fast as the loop goes and reports how many
// values per second reach the server side with batching on (sk.batch_ms 100), and how many
// messages the ring dropped: with the default 32 KiB ring a publisher faster than the socket
// loses the oldest batches; with the largest ring (1024 KiB) it shows the socket's rate.
func BenchmarkEndToEnd(b *testing.B) {
	for _, kb := range []int{32, 1024} {
		b.Run(fmt.Sprintf("buffer_kb=%d", kb), func(b *testing.B) {
			url, got := benchPeer(b, false)
			s := benchStream(b, url, func(st *Settings) { st.BufferKB = kb; st.BufferMsgs = 4096 })
			paths := benchPaths(4096)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				_ = s.PublishNumber(paths[i&4095], float64(i))
			}
			if err := s.Flush(context.Background(), time.Minute); err != nil {
				b.Fatal(err)
			}
			// The server side reads asynchronously: wait for the count to settle.
			for last := int64(-1); got.Load() != last; time.Sleep(20 * time.Millisecond) {
				last = got.Load()
			}
			el := time.Since(start)
			st := s.Status()
			b.ReportMetric(float64(got.Load())/el.Seconds(), "values/s")
			b.ReportMetric(float64(st.Dropped), "dropped-msgs")
		})
	}
}

// BenchmarkPublishLatency measures single Publish calls on a live socket and on one whose
// server stopped reading (the device's writer blocked in the socket, the ring dropping). Equal
// percentiles show that Publish never waits for the socket; the maximum is scheduler and
// garbage-collector noise present in both.
func BenchmarkPublishLatency(b *testing.B) {
	for _, stall := range []bool{false, true} {
		name := "live"
		if stall {
			name = "stalled"
		}
		b.Run(name, func(b *testing.B) {
			url, _ := benchPeer(b, stall)
			s := benchStream(b, url)
			paths := benchPaths(256)
			if stall {
				// Fill the socket buffers first so the writer is really blocked.
				for i := 0; i < 200000; i++ {
					_ = s.PublishString(paths[i&255], "padding-padding-padding-padding-padding-padding")
					if i%1000 == 0 {
						time.Sleep(time.Millisecond)
					}
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				_ = s.PublishNumber(paths[i&255], float64(i))
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
			b.ReportMetric(float64(lat[len(lat)*999/1000].Nanoseconds()), "p99.9-ns")
			b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "max-ns")
			if st := s.Status(); stall && st.Dropped == 0 {
				b.Logf("socket did not stall (sent %d)", st.Sent)
			}
		})
	}
}
