package main

import (
	"testing"
	"time"
)

// The stamp is what time.Format writes, across seconds, days and years, in any order and
// from any zone.
func TestStamper(t *testing.T) {
	base := time.Date(2026, 12, 31, 23, 59, 58, 997_654_321, time.UTC)
	zone := time.FixedZone("X", -5*3600)
	var s stamper
	for _, at := range []time.Time{
		base, base.Add(time.Millisecond), base.Add(2 * time.Millisecond), base.Add(3 * time.Millisecond),
		base.Add(time.Second + 2*time.Millisecond), base.Add(-time.Hour), base.In(zone),
		time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1999, 1, 1, 0, 0, 0, 999_999_999, zone),
		time.Unix(0, 0), time.Unix(0, 0).Add(-time.Millisecond),
	} {
		want := at.UTC().Format("2006-01-02T15:04:05.000Z")
		if got := s.stamp(at); got != want {
			t.Errorf("stamp(%v) = %q, want %q", at, got, want)
		}
	}
}
