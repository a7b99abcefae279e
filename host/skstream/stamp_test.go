package skstream

import (
	"sync"
	"testing"
	"time"
)

// The device clock is read once per wallRefresh; in between the stream clock carries the time
// forward, and a step of the device clock shows in the stamps from the next reading on.
func TestStampCarriesTheDeviceClockForward(t *testing.T) {
	at := time.Date(2024, 5, 6, 7, 8, 9, 123e6, time.UTC)
	var (
		mu    sync.Mutex
		wall  = at
		reads int
	)
	f := newFixture(t, func(o *Options) {
		o.WallClock = func() (time.Time, bool) {
			mu.Lock()
			defer mu.Unlock()
			reads++
			return wall, true
		}
	})
	c := f.connect()
	stampOf := func() string {
		t.Helper()
		d := nextDelta(t, c)
		if d.Updates[0].Timestamp == nil {
			t.Fatal("delta without a timestamp")
		}
		return *d.Updates[0].Timestamp
	}

	must(t, f.s.PublishNumber("a.b", 1))
	f.clk.Advance(30 * time.Millisecond)
	// The device clock is set an hour ahead; the reading taken 30 ms ago still serves.
	mu.Lock()
	wall = at.Add(time.Hour)
	mu.Unlock()
	must(t, f.s.PublishNumber("a.c", 2))
	f.advance(1, 70*time.Millisecond)
	if got, want := stampOf(), "2024-05-06T07:08:09.153Z"; got != want {
		t.Fatalf("first batch stamped %s, want %s (the newest value, 30 ms after the first)", got, want)
	}

	// wallRefresh has passed since the reading: the next value reads the device clock again.
	must(t, f.s.PublishNumber("a.b", 3))
	f.advance(1, 100*time.Millisecond)
	if got, want := stampOf(), "2024-05-06T08:08:09.123Z"; got != want {
		t.Fatalf("second batch stamped %s, want %s (the device clock as set)", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if reads != 2 {
		t.Fatalf("the device clock was read %d times for 3 values over 100 ms, want 2", reads)
	}
}

// A device clock that is not set yet gives no stamps until a reading finds it set.
func TestStampWaitsForTheDeviceClock(t *testing.T) {
	at := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	var (
		mu  sync.Mutex
		set bool
	)
	f := newFixture(t, func(o *Options) {
		o.WallClock = func() (time.Time, bool) {
			mu.Lock()
			defer mu.Unlock()
			return at, set
		}
	})
	c := f.connect()
	must(t, f.s.PublishNumber("a.b", 1))
	mu.Lock()
	set = true
	mu.Unlock()
	f.advance(1, 100*time.Millisecond)
	if d := nextDelta(t, c); d.Updates[0].Timestamp != nil {
		t.Fatalf("stamped %s while the clock was not set", *d.Updates[0].Timestamp)
	}
	must(t, f.s.PublishNumber("a.b", 2))
	f.advance(1, 100*time.Millisecond)
	d := nextDelta(t, c)
	if d.Updates[0].Timestamp == nil || *d.Updates[0].Timestamp != "2024-05-06T07:08:09.000Z" {
		t.Fatalf("timestamp %v once the clock is set", d.Updates[0].Timestamp)
	}
}
