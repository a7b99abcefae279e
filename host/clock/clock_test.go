package clock

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// t0 is a plausible wall time, far from the fake clock's own notion of now, so a test that
// read the host or fake clock's absolute value instead of its advance would fail.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func newTest(t *testing.T, opts Options) (*Clock, *clockwork.FakeClock) {
	t.Helper()
	fc := clockwork.NewFakeClockAt(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	opts.Clock = fc
	return New(opts), fc
}

func TestSourceNamesAndRanks(t *testing.T) {
	want := []struct {
		src  Source
		name string
		rank int
	}{
		{SourceNone, "none", 0}, {SourceRTC, "rtc", 1}, {SourceSK, "sk", 2},
		{SourceManual, "manual", 3}, {SourceSNTP, "sntp", 4},
	}
	for _, w := range want {
		if got := w.src.String(); got != w.name {
			t.Errorf("String(%d) = %q, want %q", w.src, got, w.name)
		}
		if got := w.src.Rank(); got != w.rank {
			t.Errorf("Rank(%s) = %d, want %d", w.name, got, w.rank)
		}
		b, err := w.src.MarshalText()
		if err != nil || string(b) != w.name {
			t.Errorf("MarshalText(%s) = %q, %v", w.name, b, err)
		}
		p, err := ParseSource(w.name)
		if err != nil || p != w.src {
			t.Errorf("ParseSource(%q) = %v, %v", w.name, p, err)
		}
	}
	if _, err := Source(9).MarshalText(); err == nil {
		t.Error("MarshalText of an unknown source succeeded")
	}
	if _, err := ParseSource("gps"); err == nil {
		t.Error("ParseSource(gps) succeeded")
	}
}

// holdBy returns a clock held by src at t0.
func holdBy(t *testing.T, src Source) (*Clock, *clockwork.FakeClock) {
	t.Helper()
	switch src {
	case SourceNone:
		return newTest(t, Options{})
	case SourceRTC:
		return newTest(t, Options{RTC: &RTCValue{Wall: t0, Source: SourceSNTP, SyncedAt: t0}})
	default:
		c, fc := newTest(t, Options{})
		if err := c.Set(src, t0); err != nil {
			t.Fatalf("Set(%s): %v", src, err)
		}
		return c, fc
	}
}

func TestRankTable(t *testing.T) {
	all := []Source{SourceNone, SourceRTC, SourceSK, SourceManual, SourceSNTP}
	later := t0.Add(time.Hour)
	for _, holder := range all {
		for _, setter := range all {
			t.Run(fmt.Sprintf("%s_then_%s", holder, setter), func(t *testing.T) {
				c, _ := holdBy(t, holder)
				err := c.Set(setter, later)
				now, src, _ := c.Now()
				switch {
				case setter == SourceNone:
					if !errors.Is(err, ErrInvalidSource) {
						t.Fatalf("Set(none) = %v, want ErrInvalidSource", err)
					}
					if src != holder {
						t.Fatalf("source %s after a refused set, want %s", src, holder)
					}
				case setter.Rank() >= holder.Rank(): // higher overrides, same rank refreshes
					if err != nil {
						t.Fatalf("Set = %v, want success", err)
					}
					if src != setter || !now.Equal(later) {
						t.Fatalf("Now = %v %s, want %v %s", now, src, later, setter)
					}
				default:
					if !errors.Is(err, ErrOutranked) {
						t.Fatalf("Set = %v, want ErrOutranked", err)
					}
					if src != holder || !now.Equal(t0) {
						t.Fatalf("Now = %v %s, want the holder's %v %s", now, src, t0, holder)
					}
				}
			})
		}
	}
}

func TestNowFollowsMonotonicAdvance(t *testing.T) {
	c, fc := newTest(t, Options{})
	if err := c.Set(SourceSK, t0); err != nil {
		t.Fatal(err)
	}
	for _, step := range []time.Duration{0, time.Millisecond, 90 * time.Minute, 36 * time.Hour} {
		fc.Advance(step)
	}
	want := t0.Add(time.Millisecond + 90*time.Minute + 36*time.Hour)
	now, src, synced := c.Now()
	if !now.Equal(want) || src != SourceSK || !synced {
		t.Fatalf("Now = %v %s %v, want %v sk true", now, src, synced, want)
	}
	if now.Location() != time.UTC {
		t.Fatalf("Now is in %v, want UTC", now.Location())
	}
	wc, ok := c.WallClock()
	if !ok || !wc.Equal(want) {
		t.Fatalf("WallClock = %v %v", wc, ok)
	}
	// A refresh re-anchors: the new value plus the advance since.
	if err := c.Set(SourceSK, t0); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Second)
	if now, _, _ := c.Now(); !now.Equal(t0.Add(time.Second)) {
		t.Fatalf("after refresh Now = %v", now)
	}
}

func TestNeverReports1970(t *testing.T) {
	c, fc := newTest(t, Options{})
	now, src, synced := c.Now()
	if !now.IsZero() || src != SourceNone || synced {
		t.Fatalf("unset Now = %v %s %v", now, src, synced)
	}
	if _, ok := c.WallClock(); ok {
		t.Fatal("WallClock ok while unset")
	}
	d := c.Document()
	if d.Now != 0 || d.ISO != "" || d.Source != SourceNone || d.Synced {
		t.Fatalf("unset document %+v", d)
	}
	for _, bad := range []time.Time{
		{}, time.Unix(0, 0), time.Unix(1, 0), Floor.Add(-time.Millisecond), Ceiling, Ceiling.Add(time.Hour),
	} {
		if err := c.Set(SourceSNTP, bad); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("Set(%v) = %v, want ErrOutOfRange", bad, err)
		}
	}
	fc.Advance(time.Hour)
	if _, ok := c.WallClock(); ok {
		t.Fatal("a refused time set the clock")
	}
	if err := c.Set(SourceManual, Floor); err != nil {
		t.Fatalf("Set(Floor) = %v", err)
	}
	if err := c.Set(SourceManual, Ceiling.Add(-time.Millisecond)); err != nil {
		t.Fatalf("Set(Ceiling-1ms) = %v", err)
	}
}

func TestRTCAdoptedOnlyWhenGiven(t *testing.T) {
	v := &RTCValue{Wall: t0, Source: SourceSNTP, SyncedAt: t0.Add(-time.Hour), SleptFor: 5 * time.Minute}
	c, fc := newTest(t, Options{RTC: v, StaleAfter: DefaultStaleAfter})
	fc.Advance(10 * time.Second)
	now, src, synced := c.Now()
	if want := t0.Add(5*time.Minute + 10*time.Second); !now.Equal(want) || src != SourceRTC || !synced {
		t.Fatalf("woken Now = %v %s %v, want %v rtc true", now, src, synced, want)
	}

	// Power-on, panic or OTA reboot: the caller passes no value and the clock stays unset.
	c2, _ := newTest(t, Options{StaleAfter: DefaultStaleAfter})
	if _, src, _ := c2.Now(); src != SourceNone {
		t.Fatalf("no value given, source %s", src)
	}

	// An impossible value is ignored, not adopted.
	for name, bad := range map[string]RTCValue{
		"source none":     {Wall: t0, Source: SourceNone, SyncedAt: t0},
		"wall 1970":       {Wall: time.Unix(5, 0), Source: SourceSK, SyncedAt: time.Unix(5, 0)},
		"synced after":    {Wall: t0, Source: SourceSK, SyncedAt: t0.Add(time.Second)},
		"negative sleep":  {Wall: t0, Source: SourceSK, SyncedAt: t0, SleptFor: -time.Second},
		"wake past limit": {Wall: t0, Source: SourceSK, SyncedAt: t0, SleptFor: Ceiling.Sub(t0)},
	} {
		c3, _ := newTest(t, Options{RTC: &bad})
		if _, src, _ := c3.Now(); src != SourceNone {
			t.Errorf("%s: adopted as %s", name, src)
		}
	}
}

func TestRTCStaleRule(t *testing.T) {
	// Synced 23 h before the sleep, slept 30 min: 23.5 h old at the wake.
	v := RTCValue{Wall: t0, Source: SourceManual, SyncedAt: t0.Add(-23 * time.Hour), SleptFor: 30 * time.Minute}
	steps := []struct {
		advance    time.Duration
		synced24h  bool
		syncedZero bool
	}{
		{0, true, true},
		{30 * time.Minute, true, true},  // exactly 24 h: not older than
		{time.Millisecond, false, true}, // older than 24 h
		{240 * time.Hour, false, true},  // stays stale
	}
	for _, stale := range []time.Duration{DefaultStaleAfter, 0} {
		c, fc := newTest(t, Options{RTC: &v, StaleAfter: stale})
		var elapsed time.Duration
		for i, s := range steps {
			fc.Advance(s.advance)
			elapsed += s.advance
			now, src, synced := c.Now()
			want := s.synced24h
			if stale == 0 {
				want = s.syncedZero
			}
			if synced != want {
				t.Errorf("StaleAfter %v step %d: synced %v, want %v", stale, i, synced, want)
			}
			// The stale case still reports the best guess as rtc.
			if src != SourceRTC || !now.Equal(t0.Add(30*time.Minute+elapsed)) {
				t.Errorf("StaleAfter %v step %d: Now %v %s", stale, i, now, src)
			}
			if d := c.Document(); d.Synced != want || d.Source != SourceRTC || d.Now == 0 {
				t.Errorf("StaleAfter %v step %d: document %+v", stale, i, d)
			}
		}
		// A real source makes the clock synced again.
		if err := c.Set(SourceSK, t0.Add(300*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, src, synced := c.Now(); src != SourceSK || !synced {
			t.Errorf("StaleAfter %v after sk: %s %v", stale, src, synced)
		}
	}
}

func TestRTCAgeCarriesAcrossSleeps(t *testing.T) {
	// First wake: synced 20 h before the sleep, slept 1 h.
	v := &RTCValue{Wall: t0, Source: SourceSNTP, SyncedAt: t0.Add(-20 * time.Hour), SleptFor: time.Hour}
	c, fc := newTest(t, Options{RTC: v, StaleAfter: DefaultStaleAfter})
	fc.Advance(time.Minute)
	blob := c.EncodeRTC(4 * time.Hour)
	v2, err := DecodeRTC(blob)
	if err != nil {
		t.Fatal(err)
	}
	if v2.Source != SourceRTC || !v2.SyncedAt.Equal(v.SyncedAt) {
		t.Fatalf("carried value %+v: want source rtc and the original synced-at", v2)
	}
	// Second wake: 21 h 1 min + 4 h old, stale although each sleep alone was short.
	c2, _ := newTest(t, Options{RTC: v2, StaleAfter: DefaultStaleAfter})
	if _, src, synced := c2.Now(); src != SourceRTC || synced {
		t.Fatalf("second wake: %s synced=%v, want rtc stale", src, synced)
	}
	// A clock set by a real source carries its set time as synced-at.
	c3, fc3 := newTest(t, Options{})
	if err := c3.Set(SourceManual, t0); err != nil {
		t.Fatal(err)
	}
	fc3.Advance(2 * time.Hour)
	r, ok := c3.RTC(time.Minute)
	if !ok || !r.SyncedAt.Equal(t0) || !r.Wall.Equal(t0.Add(2*time.Hour)) || r.Source != SourceManual || r.SleptFor != time.Minute {
		t.Fatalf("RTC() = %+v %v", r, ok)
	}
}

func TestRTCBlobRoundTrip(t *testing.T) {
	c, _ := newTest(t, Options{})
	if b := c.EncodeRTC(time.Minute); b != nil {
		t.Fatalf("unset clock encoded %x", b)
	}
	if _, ok := c.RTC(time.Minute); ok {
		t.Fatal("unset clock has an RTC value")
	}
	v := RTCValue{Wall: t0.Add(1234567 * time.Microsecond), Source: SourceSK, SyncedAt: t0.Add(-time.Hour), SleptFor: 299*time.Second + 999*time.Millisecond}
	b, err := v.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRTC(b)
	if err != nil {
		t.Fatal(err)
	}
	want := v
	want.Wall = v.Wall.Truncate(time.Millisecond)
	if !got.Wall.Equal(want.Wall) || got.Source != want.Source || !got.SyncedAt.Equal(want.SyncedAt) || got.SleptFor != want.SleptFor {
		t.Fatalf("round trip %+v, want %+v", got, want)
	}
}

func TestRTCDamagedBlobIgnored(t *testing.T) {
	v := RTCValue{Wall: t0, Source: SourceSNTP, SyncedAt: t0, SleptFor: time.Minute}
	good, err := v.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for i := range good {
		for bit := 0; bit < 8; bit++ {
			b := append([]byte(nil), good...)
			b[i] ^= 1 << bit
			if _, err := DecodeRTC(b); !errors.Is(err, ErrBadRTC) {
				t.Fatalf("bit %d of byte %d flipped: %v, want ErrBadRTC", bit, i, err)
			}
		}
	}
	for name, b := range map[string][]byte{
		"empty":     nil,
		"truncated": good[:len(good)-1],
		"extended":  append(append([]byte(nil), good...), 0),
		"zeroes":    make([]byte, len(good)),
	} {
		if _, err := DecodeRTC(b); !errors.Is(err, ErrBadRTC) {
			t.Errorf("%s: %v, want ErrBadRTC", name, err)
		}
	}
	// A well-formed blob of another version or with an impossible value, checksum fixed up.
	for name, mutate := range map[string]func([]byte){
		"version 2":   func(b []byte) { b[4] = 2 },
		"source none": func(b []byte) { b[5] = 0 },
		"source 9":    func(b []byte) { b[5] = 9 },
		"wall 1970":   func(b []byte) { clear(b[6:14]) },
	} {
		b := append([]byte(nil), good...)
		mutate(b)
		fixCRC(b)
		if _, err := DecodeRTC(b); !errors.Is(err, ErrBadRTC) {
			t.Errorf("%s: %v, want ErrBadRTC", name, err)
		}
	}
	// The wiring pattern: a damaged blob decodes to nil and the clock starts unset.
	bad := append([]byte(nil), good...)
	bad[10] ^= 0xff
	rv, _ := DecodeRTC(bad)
	c, _ := newTest(t, Options{RTC: rv})
	if _, src, _ := c.Now(); src != SourceNone {
		t.Fatalf("damaged blob adopted as %s", src)
	}
}

func TestSubscriberSlots(t *testing.T) {
	c, _ := newTest(t, Options{})
	got := make([][]Source, MaxSubscribers)
	cancels := make([]func(), MaxSubscribers)
	for i := range MaxSubscribers {
		cancel, err := c.Subscribe(func(s Source) { got[i] = append(got[i], s) })
		if err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
		cancels[i] = cancel
	}
	if _, err := c.Subscribe(func(Source) {}); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("fifth subscriber: %v, want ErrNoSlot", err)
	}
	if _, err := c.Subscribe(nil); err == nil {
		t.Fatal("nil subscriber accepted")
	}

	if err := c.Set(SourceSK, t0); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(SourceSNTP, t0); err != nil {
		t.Fatal(err)
	}
	_ = c.Set(SourceSK, t0) // outranked: nobody is told
	for i := range got {
		if fmt.Sprint(got[i]) != "[sk sntp]" {
			t.Errorf("subscriber %d saw %v, want [sk sntp]", i, got[i])
		}
	}

	// Cancel frees exactly one slot; a second cancel frees nothing more.
	cancels[1]()
	cancels[1]()
	var fifth []Source
	if _, err := c.Subscribe(func(s Source) { fifth = append(fifth, s) }); err != nil {
		t.Fatalf("after cancel: %v", err)
	}
	cancels[1]()
	if _, err := c.Subscribe(func(Source) {}); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("stale cancel freed the new subscriber's slot: %v", err)
	}
	if err := c.Set(SourceSNTP, t0); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got[1]) != "[sk sntp]" || fmt.Sprint(fifth) != "[sntp]" {
		t.Fatalf("cancelled saw %v, new saw %v", got[1], fifth)
	}
}

// A subscriber may read the clock: it runs after the clock's lock is released.
func TestSubscriberMayReadClock(t *testing.T) {
	c, _ := newTest(t, Options{})
	var seen time.Time
	if _, err := c.Subscribe(func(Source) { seen, _ = c.WallClock() }); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(SourceManual, t0); err != nil {
		t.Fatal(err)
	}
	if !seen.Equal(t0) {
		t.Fatalf("subscriber read %v", seen)
	}
}

func fixCRC(b []byte) {
	binary.BigEndian.PutUint32(b[30:], crc32.Checksum(b[:30], castagnoli))
}

// Sources racing each other and readers: the highest rank ends up holding the clock.
func TestConcurrentSetters(t *testing.T) {
	c, fc := newTest(t, Options{})
	var wg sync.WaitGroup
	for _, src := range []Source{SourceRTC, SourceSK, SourceManual, SourceSNTP} {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 200 {
				_ = c.Set(src, t0.Add(time.Duration(i)*time.Second))
			}
		}()
		go func() {
			defer wg.Done()
			for range 200 {
				if now, ok := c.WallClock(); ok && now.Before(Floor) {
					t.Errorf("read %v", now)
				}
				_ = c.Document()
			}
		}()
	}
	fc.Advance(time.Minute)
	wg.Wait()
	if _, src, _ := c.Now(); src != SourceSNTP {
		t.Fatalf("source %s after the race, want sntp", src)
	}
}
