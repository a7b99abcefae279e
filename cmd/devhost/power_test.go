package main_test

import (
	"strconv"
	"testing"
	"time"
)

type powerDoc struct {
	Mode        string `json:"mode"`
	Decision    string `json:"decision"`
	Why         string `json:"why"`
	TimerWake   bool   `json:"timer_wake"`
	WakeCount   int    `json:"wake_count"`
	LastAwakeMS *int64 `json:"last_awake_ms"`
	IntervalS   int    `json:"interval_s"`
	UptimeMS    int64  `json:"uptime_ms"`
	DeadlineMS  *int64 `json:"deadline_ms"`
}

func (d *dev) power() powerDoc {
	d.t.Helper()
	return getDoc[powerDoc](d, "/api/v1/power")
}

// TestPowerCycle: with power.mode = cycle the device stays awake for the window after
// power-on, then sleeps interval_s and wakes, again and again; the wake count counts, the
// clock comes back from RTC memory as source rtc, and the configuration stays.
func TestPowerCycle(t *testing.T) {
	d := newDev(t)
	if p := d.power(); p.Mode != "off" || p.Decision != "off" || p.Why != "off" {
		t.Fatalf("default %+v", p)
	}
	now := time.Now().UnixMilli()
	if r := d.call("PUT", "/api/v1/time", `{"now":`+strconv.FormatInt(now, 10)+`}`); r.status != 200 {
		t.Fatalf("PUT /time: %d %s", r.status, r.body)
	}
	cfg := `{"sk":{"ws_enabled":false},"power":{"mode":"cycle","interval_s":10,"window_s":30,"awake_max_s":5,"publish_ms":0}}`
	d.putConfig(cfg)
	p := d.power()
	if p.Decision != "awake" || p.Why != "window" || p.TimerWake || p.WakeCount != 0 || p.DeadlineMS == nil || *p.DeadlineMS != 35000 {
		t.Fatalf("after power-on %+v", p)
	}
	for wake := 1; wake <= 3; wake++ {
		// The first sleep comes after the 30 s window, each sleep lasts 10 s.
		d.boots++
		d.base = d.out.waitListening(t, d.boots, 90*time.Second)
		p := d.power()
		if !p.TimerWake || p.WakeCount != wake || p.LastAwakeMS == nil || p.IntervalS != 10 {
			t.Fatalf("wake %d: %+v", wake, p)
		}
		if info := d.info(); info["reset_reason"] != "deepsleep" {
			t.Fatalf("wake %d: reset reason %v", wake, info["reset_reason"])
		}
		tm := d.call("GET", "/api/v1/time", "").json(t)
		if tm["source"] != "rtc" || tm["synced"] != true {
			t.Fatalf("wake %d: time %v", wake, tm)
		}
	}
	if cfg := d.config("power"); cfg["mode"] != "cycle" {
		t.Fatalf("configuration lost: %v", cfg)
	}
}
