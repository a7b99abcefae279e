package skstream

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"devhost/host/skstream/skpeer"
)

// BenchmarkCPUPerValue is make bench's signalk.cpu_per_kvalue figure without the server: the
// process CPU time spent per published value by the device stream and, in the same run, by a
// plain gorilla/websocket client writing the same values in frames of the same size (the
// device's average), each into a peer that sends the hello and then throws the socket's bytes
// away unread by any WebSocket code. The peer runs in this process for both sides alike, so
// its cost is in both figures and the ratio is a lower bound of the one against a real server.
//
// The device side is set up as cmd/devbench sets it up: sk.batch_ms 100, a 1024-message /
// 1024 KiB ring, two publishers cycling through 1024 paths each, waiting, once the ring is past
// half its bytes, until it is down to a quarter. One op is one value on each side; the figures are:
//
//	dev-cpu-ns/value    process CPU per value, device stream (publish, batch, encode, write)
//	plain-cpu-ns/value  process CPU per value, plain client (encode a frame, write)
//	cpu-ratio           dev / plain
//
// "integer" publishes whole numbers (as devbench does), "fraction" numbers with a fraction
// part, which both sides format as the shortest decimal.
func BenchmarkCPUPerValue(b *testing.B) {
	for _, kind := range []string{"integer", "fraction"} {
		b.Run("values="+kind, func(b *testing.B) {
			num := func(v uint64) float64 { return float64(1_000_000_000 + v%1_000_000_000) }
			if kind == "fraction" {
				num = func(v uint64) float64 { return float64(v%1_000_000) / 64 }
			}
			integer := kind == "integer"
			url := discardPeer(b)
			b.ReportAllocs()
			b.ResetTimer()
			devCPU, perFrame := cpuDeviceSide(b, url, b.N, num)
			plainCPU := cpuPlainSide(b, url, b.N, perFrame, num, integer)
			b.StopTimer()
			dev := float64(devCPU.Nanoseconds()) / float64(b.N)
			plain := float64(plainCPU.Nanoseconds()) / float64(b.N)
			b.ReportMetric(dev, "dev-cpu-ns/value")
			b.ReportMetric(plain, "plain-cpu-ns/value")
			if plain > 0 {
				b.ReportMetric(dev/plain, "cpu-ratio")
			}
		})
	}
}

// discardPeer accepts WebSocket connections, sends the hello and reads the rest of each
// connection into io.Discard without decoding frames.
func discardPeer(b *testing.B) string {
	up := websocket.Upgrader{}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []*websocket.Conn
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		wg.Add(1)
		defer wg.Done()
		mu.Lock()
		conns = append(conns, ws)
		mu.Unlock()
		defer ws.Close()
		if err := ws.WriteMessage(websocket.TextMessage, []byte(skpeer.Hello)); err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, ws.NetConn())
	}))
	b.Cleanup(func() {
		srv.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "ws://" + srv.Listener.Addr().String()
}

// processCPU is this process's user plus system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuBenchPaths are the paths of one publisher, all of one width (as devbench's).
func cpuBenchPaths(side string) []string {
	ps := make([]string, 1024)
	for i := range ps {
		ps[i] = fmt.Sprintf("bench.%s.p%04d", side, i)
	}
	return ps
}

// cpuDeviceSide publishes n values through a connected stream and flushes; it returns the CPU
// time that took and the average number of values per message.
func cpuDeviceSide(b *testing.B, url string, n int, num func(uint64) float64) (time.Duration, int) {
	set := DefaultSettings()
	set.BatchMS, set.BufferMsgs, set.BufferKB = 100, 1024, 1024
	highWater := set.BufferKB * 1024 / 2
	s := connectedStream(b, url, set)
	defer s.Close()
	before := s.Status()
	const publishers = 2
	var failed atomic.Value
	cpu0 := processCPU(b)
	var wg sync.WaitGroup
	for g := range publishers {
		paths := cpuBenchPaths("dev" + strconv.Itoa(g))
		share := n / publishers
		if g == 0 {
			share += n % publishers
		}
		wg.Go(func() {
			for i := range share {
				// As devbench does: every 1024 values (36 KiB of the 512 KiB below the
				// budget), past half the budget, wait until it is down to a quarter.
				if i%1024 == 0 && s.Status().BufferedBytes > highWater {
					if err := s.WaitBuffered(context.Background(), highWater/2); err != nil {
						failed.Store(err)
						return
					}
				}
				if err := s.PublishNumber(paths[i%len(paths)], num(uint64(g)<<40|uint64(i))); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := s.Flush(context.Background(), time.Minute); err != nil {
		b.Fatalf("flush: %v", err)
	}
	cpu := processCPU(b) - cpu0
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("publish: %v", err)
	}
	after := s.Status()
	if d := after.Dropped - before.Dropped; d > 0 {
		b.Fatalf("%d messages dropped: the figure would count values that never left", d)
	}
	msgs := after.Sent - before.Sent
	perFrame := 1
	if msgs > 0 {
		perFrame = max(1, int((uint64(n)+msgs/2)/msgs))
	}
	return cpu, perFrame
}

// cpuPlainSide writes n values in frames of perFrame values over one plain client connection
// and returns the CPU time that took. Whole numbers are written as integers, as devbench's
// plain client writes them; others as the shortest decimal.
func cpuPlainSide(b *testing.B, url string, n, perFrame int, num func(uint64) float64, integer bool) time.Duration {
	h := http.Header{}
	h.Set("Authorization", "Bearer t")
	conn, resp, err := (&websocket.Dialer{HandshakeTimeout: 10 * time.Second}).Dial(url+"/signalk/v1/stream?subscribe=none", h)
	if err != nil {
		b.Fatalf("plain dial: %v", err)
	}
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	defer conn.Close()
	if _, _, err := conn.ReadMessage(); err != nil {
		b.Fatalf("plain hello: %v", err)
	}
	var paths []string
	a, c := cpuBenchPaths("pln0"), cpuBenchPaths("pln1")
	for i := range a {
		paths = append(paths, a[i], c[i])
	}
	frame := make([]byte, 0, 32*1024)
	cpu0 := processCPU(b)
	for seq := 0; seq < n; seq += perFrame {
		k := min(perFrame, n-seq)
		frame = frame[:0]
		frame = append(frame, `{"context":"vessels.self","updates":[{"timestamp":"`...)
		frame = time.Now().UTC().AppendFormat(frame, "2006-01-02T15:04:05.000Z")
		frame = append(frame, `","source":{"label":"bench"},"values":[`...)
		for i := range k {
			if i > 0 {
				frame = append(frame, ',')
			}
			v := uint64(seq + i)
			frame = append(frame, `{"path":"`...)
			frame = append(frame, paths[v%uint64(len(paths))]...)
			frame = append(frame, `","value":`...)
			if integer {
				frame = strconv.AppendInt(frame, int64(num(v)), 10)
			} else {
				frame = strconv.AppendFloat(frame, num(v), 'f', -1, 64)
			}
			frame = append(frame, '}')
		}
		frame = append(frame, `]}]}`...)
		_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
			b.Fatalf("plain write: %v", err)
		}
	}
	return processCPU(b) - cpu0
}
