package health

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestResetRecordJSON(t *testing.T) {
	at := time.Date(2025, 6, 1, 14, 3, 4, 500_000_000, time.FixedZone("CEST", 2*3600))
	rec := ResetRecord{Reason: "software", HealthKey: "lowMemory", Message: "m",
		MinFreeHeapBefore: 1, MinInternalBefore: 2, LargestBlockBefore: 3, UptimeBeforeS: 4, At: &at}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"reason":"software","health_key":"lowMemory","message":"m","min_free_heap_before":1,` +
		`"min_internal_before":2,"largest_block_before":3,"uptime_before_s":4,"at":"2025-06-01T12:03:04Z"}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var back ResetRecord
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.At == nil || !back.At.Equal(at.Truncate(time.Second)) {
		t.Fatalf("at %v", back.At)
	}

	rec.At = nil
	b, _ = json.Marshal(&rec)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if v, ok := m["at"]; !ok || v != nil {
		t.Fatalf("at must be null when the clock was never set: %s", b)
	}
	if err := json.Unmarshal([]byte(`{"reason":"software","at":"yesterday"}`), &back); err == nil {
		t.Fatal("malformed at accepted")
	}
}

func TestBelievedReset(t *testing.T) {
	rec := &ResetRecord{Reason: "software", HealthKey: "taskStalled"}
	cases := []struct {
		rec    *ResetRecord
		reason string
		want   *ResetRecord
	}{
		{rec, "software", rec},
		{rec, "poweron", nil},
		{rec, "panic", nil},
		{rec, "task_wdt", nil},
		{nil, "software", nil},
		{&ResetRecord{Reason: "other"}, "software", nil},
	}
	for _, c := range cases {
		if got := BelievedReset(c.rec, c.reason); got != c.want {
			t.Errorf("BelievedReset(%+v, %q) = %+v", c.rec, c.reason, got)
		}
	}
}

func FuzzResetRecord(f *testing.F) {
	f.Add([]byte(`{"reason":"software","health_key":"lowMemory","message":"m","min_free_heap_before":1,"min_internal_before":2,"largest_block_before":3,"uptime_before_s":4,"at":"2025-06-01T12:03:04Z"}`))
	f.Add([]byte(`{"reason":"software","at":null}`))
	f.Add([]byte(`{"at":"2025-06-01T12:03:04+02:00"}`))
	f.Add([]byte(`{"at":5}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var rec ResetRecord
		if json.Unmarshal(b, &rec) != nil {
			return
		}
		// A record read back survives another write and read unchanged (to the second).
		out, err := json.Marshal(rec)
		if err != nil {
			t.Fatalf("marshal %+v: %v", rec, err)
		}
		var again ResetRecord
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("re-read %s: %v", out, err)
		}
		if rec.At != nil {
			tr := rec.At.Truncate(time.Second)
			rec.At = &tr
		}
		if (rec.At == nil) != (again.At == nil) || (rec.At != nil && !rec.At.Equal(*again.At)) {
			t.Fatalf("at %v then %v", rec.At, again.At)
		}
		rec.At, again.At = nil, nil
		if !reflect.DeepEqual(rec, again) {
			t.Fatalf("%+v then %+v", rec, again)
		}
	})
}
