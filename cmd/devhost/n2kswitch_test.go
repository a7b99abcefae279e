package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"devhost/host/board"
)

// A switch panel works from Signal K both ways, through the real signalk-server: a switch
// bank on the bus reports its state (127501), the value appears on the server under
// electrical.switches.bank.<instance>.<switch>.state; a PUT on that path through the server
// reaches the device, whose n2k plugin sends Switch Bank Control (127502) for that one
// switch on the bus; the bank's next status report carries the new state back to the server.
func TestN2KSwitchBankThroughSignalKServer(t *testing.T) {
	b := buildBundled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*hangGuard)
	defer cancel()
	const (
		path    = "electrical.switches.bank.2.3.state"
		rest    = "/signalk/v1/api/vessels/self/electrical/switches/bank/2/3/state"
		bankSrc = 0x30 // the switch bank's address on the bus
	)
	// 127501 (priority 3) from the bank: instance 2, then two bits a switch from switch 1 on
	// (0 off, 1 on). Switch 3 is bits 4-5 of the second byte.
	status := func(switch3On bool) string {
		second := byte(0x00)
		if switch3On {
			second = 0x10
		}
		log := filepath.Join(t.TempDir(), "bank.log")
		line := fmt.Sprintf("(1795830240.000000) can0 %08X#02%02X000000000000\n", 3<<26|0x1F20D<<8|bankSrc, second)
		if err := os.WriteFile(log, []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		return log
	}
	s, d := n2kDevice(ctx, t, b, status(false))
	if _, err := s.WaitValue(ctx, path, isNumber(0)); err != nil {
		t.Fatalf("bank status off on the server: %v", err)
	}

	// The state is the bank's, under its source alone: a second, device-sourced copy would
	// make the server refuse a PUT that names no source (400, multiple sources).
	var cur struct {
		Source string                     `json:"$source"`
		Values map[string]json.RawMessage `json:"values"`
	}
	if _, b, err := s.Do(ctx, "GET", rest, s.AdminToken, nil); err != nil || json.Unmarshal(b, &cur) != nil {
		t.Fatalf("GET %s: %s (%v)", rest, b, err)
	}
	if want := fmt.Sprintf(".%d", bankSrc); !strings.HasSuffix(cur.Source, want) || len(cur.Values) > 1 {
		t.Fatalf("%s: $source %q, values from %d sources; want the bank's (…%s) alone", path, cur.Source, len(cur.Values), want)
	}
	// The bank's status is replayed as soon as the plugin listens, so this PUT may come
	// within the plugin's address claim (250 ms); the plugin then holds it until the claim
	// stands (ISO 11783-5: nothing is sent before), and the request still completes 200.
	code, body, err := s.Do(ctx, "PUT", rest, s.AdminToken, json.RawMessage(`{"value":true}`))
	if err != nil || (code != 200 && code != 202) {
		t.Fatalf("PUT %s through the server: %d %s (%v)", rest, code, body, err)
	}
	// The server answers 202 and forwards the request to the device; the device's answer is
	// read back from the request, so a refusal fails here with the device's own message.
	var req struct {
		Href       string `json:"href"`
		State      string `json:"state"`
		StatusCode int    `json:"statusCode"`
		Message    string `json:"message"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Href == "" {
		t.Fatalf("PUT answer %s: %v", body, err)
	}
	href := req.Href
	for req.State == "PENDING" {
		select {
		case <-ctx.Done():
			t.Fatalf("PUT request still pending: %s", body)
		case <-time.After(20 * time.Millisecond):
		}
		if code, body, err = s.Do(ctx, "GET", href, s.AdminToken, nil); err != nil || code != 200 {
			t.Fatalf("GET %s: %d %s (%v)", href, code, body, err)
		}
		if err := json.Unmarshal(body, &req); err != nil {
			t.Fatalf("request %s: %v", body, err)
		}
	}
	if req.State != "COMPLETED" || req.StatusCode != 200 {
		t.Fatalf("PUT %s answered by the device: %s %d %q (%s)", path, req.State, req.StatusCode, req.Message, body)
	}

	// 127502 from the device: instance 2, switch 3 set on (01), every other switch 11
	// (no change).
	want := []byte{0x02, 0xDF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}
	eventually(t, "127502 for bank 2 switch 3 on the bus", func() bool {
		var st struct {
			Radios board.Radios `json:"radios"`
		}
		if err := json.Unmarshal(d.boardGet("/state"), &st); err != nil {
			t.Fatalf("board state: %v", err)
		}
		for _, f := range st.Radios.CANSent {
			if f.Extended && (f.ID>>8)&0x3FFFF == 0x1F20E && bytes.Equal(f.Data, want) {
				return true
			}
		}
		return false
	})

	// The bank switches and reports: the server shows the new state.
	replay := exec.CommandContext(ctx, devctl, "board", "--data", filepath.Join(d.data, "flash"), "can", "replay", "--file", status(true), "--max")
	if out, err := replay.CombinedOutput(); err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	if _, err := s.WaitValue(ctx, path, isNumber(1)); err != nil {
		t.Fatalf("bank status on on the server: %v", err)
	}
}

// isNumber matches a JSON number equal to n.
func isNumber(n float64) func(json.RawMessage) bool {
	return func(v json.RawMessage) bool {
		var x float64
		return json.Unmarshal(v, &x) == nil && x == n
	}
}
