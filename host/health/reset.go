package health

import (
	"encoding/json"
	"fmt"
	"time"
)

// ReasonSoftware is the reset reason of a watchdog restart.
const ReasonSoftware = "software"

// isoUTC is the ISO 8601 UTC form of `at`.
const isoUTC = "2006-01-02T15:04:05Z"

// ResetRecord is what the health watchdog leaves for the next boot (`last_reset` of
// /system/info).
type ResetRecord struct {
	Reason             string
	HealthKey          string
	Message            string
	MinFreeHeapBefore  int64
	MinInternalBefore  int64
	LargestBlockBefore int64
	UptimeBeforeS      int64
	// At is the wall time of the restart, nil when the clock was never set.
	At *time.Time
}

type resetWire struct {
	Reason             string  `json:"reason"`
	HealthKey          string  `json:"health_key"`
	Message            string  `json:"message"`
	MinFreeHeapBefore  int64   `json:"min_free_heap_before"`
	MinInternalBefore  int64   `json:"min_internal_before"`
	LargestBlockBefore int64   `json:"largest_block_before"`
	UptimeBeforeS      int64   `json:"uptime_before_s"`
	At                 *string `json:"at"`
}

// MarshalJSON writes the spec's `last_reset` object; `at` is ISO 8601 UTC to the second, or
// null.
func (rec ResetRecord) MarshalJSON() ([]byte, error) {
	w := resetWire{
		Reason:             rec.Reason,
		HealthKey:          rec.HealthKey,
		Message:            rec.Message,
		MinFreeHeapBefore:  rec.MinFreeHeapBefore,
		MinInternalBefore:  rec.MinInternalBefore,
		LargestBlockBefore: rec.LargestBlockBefore,
		UptimeBeforeS:      rec.UptimeBeforeS,
	}
	if rec.At != nil {
		s := rec.At.UTC().Format(isoUTC)
		w.At = &s
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a stored record back. Unknown members are ignored so an older boot can
// read a newer record; a malformed `at` is an error.
func (rec *ResetRecord) UnmarshalJSON(b []byte) error {
	var w resetWire
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("reset record: %w", err)
	}
	out := ResetRecord{
		Reason:             w.Reason,
		HealthKey:          w.HealthKey,
		Message:            w.Message,
		MinFreeHeapBefore:  w.MinFreeHeapBefore,
		MinInternalBefore:  w.MinInternalBefore,
		LargestBlockBefore: w.LargestBlockBefore,
		UptimeBeforeS:      w.UptimeBeforeS,
	}
	if w.At != nil {
		t, err := time.Parse(time.RFC3339, *w.At)
		if err != nil {
			return fmt.Errorf("reset record: at: %w", err)
		}
		t = t.UTC()
		if t.Year() < 0 || t.Year() > 9999 {
			return fmt.Errorf("reset record: at %q is outside the years 0000 to 9999 in UTC", *w.At)
		}
		out.At = &t
	}
	*rec = out
	return nil
}

// BelievedReset returns rec when it may be shown as `last_reset`: only a record the watchdog
// wrote, on a boot whose reset reason is software. Otherwise nil (JSON null).
func BelievedReset(rec *ResetRecord, resetReason string) *ResetRecord {
	if rec == nil || resetReason != ReasonSoftware || rec.Reason != ReasonSoftware {
		return nil
	}
	return rec
}
