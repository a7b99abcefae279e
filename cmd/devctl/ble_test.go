package main

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"devhost/host/board"
)

func TestBoardBLE(t *testing.T) {
	sim, data := serveBoard(t)
	var mu sync.Mutex
	var heard []board.BLEAdvert
	cancel, err := sim.BLEScan(func(a board.BLEAdvert) { mu.Lock(); heard = append(heard, a); mu.Unlock() })
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	// A BTHome v2 advert: flags, then service data 0xFCD2 with a temperature.
	h := newHarness()
	if code := h.run("board", "--data", data, "ble", "advert", "--addr", "a4:c1:38:01:02:03", "--data", "020106"+"0716d2fc4002c409", "--rssi", "-70"); code != exitOK {
		t.Fatalf("advert: exit %d, stderr %s", code, h.stderr.String())
	}
	mu.Lock()
	got := heard
	mu.Unlock()
	if len(got) != 1 || got[0].Address != "A4:C1:38:01:02:03" || got[0].RSSI != -70 || len(got[0].Data) != 11 {
		t.Fatalf("heard %+v", got)
	}

	if err := sim.BLEAdvertise([]byte("\x02\x01\x06\x0c\x09PROV_0A0B0C")); err != nil {
		t.Fatal(err)
	}
	h = newHarness()
	if code := h.run("board", "--data", data, "ble", "adverts"); code != exitOK {
		t.Fatalf("adverts: exit %d, stderr %s", code, h.stderr.String())
	}
	var doc struct {
		Advertising bool   `json:"advertising"`
		Data        string `json:"data"`
		Name        string `json:"name"`
	}
	if err := json.Unmarshal([]byte(h.stdout.String()), &doc); err != nil {
		t.Fatalf("%v: %s", err, h.stdout.String())
	}
	if !doc.Advertising || doc.Name != "PROV_0A0B0C" || !strings.HasPrefix(doc.Data, "020106") {
		t.Fatalf("adverts %+v", doc)
	}

	for _, args := range [][]string{
		{"board", "--data", data, "ble"},
		{"board", "--data", data, "ble", "advert", "--addr", "nope", "--data", "0201"},
		{"board", "--data", data, "ble", "advert", "--addr", "a4:c1:38:01:02:03", "--data", "zz"},
		{"board", "--data", data, "ble", "advert", "--addr", "a4:c1:38:01:02:03", "--data", "0201", "--rssi", "50"},
		{"board", "--data", data, "ble", "scan"},
	} {
		if code := newHarness().run(args...); code != exitUsage {
			t.Errorf("%v: exit %d, want usage", args, code)
		}
	}
	// An advert the radio cannot carry is the board's refusal.
	if code := newHarness().run("board", "--data", data, "ble", "advert", "--addr", "a4:c1:38:01:02:03", "--data", strings.Repeat("00", 40)); code != exitFail {
		t.Errorf("oversized advert: exit %d", code)
	}
}

func TestProvUsage(t *testing.T) {
	for _, args := range [][]string{
		{"prov", "--transport", "softap", "--pop", "p", "--ssid", "s"},
		{"prov", "--data", "d", "--pop", "p"},
		{"prov", "--data", "d", "--ssid", "s", "--security", "3"},
		{"prov", "--data", "d", "--ssid", "s", "--transport", "wire", "--pop", "p"},
		{"prov", "--data", "d", "--ssid", "s", "--security", "1"},
	} {
		if code := newHarness().run(args...); code != exitUsage {
			t.Errorf("%v: exit %d, want usage", args, code)
		}
	}
}
