package main_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.einride.tech/can"
	"go.einride.tech/can/pkg/socketcan"

	"devhost/host/mdns/mdnstest"
)

// candumpFrames answers the frames of a plain candump log ("  can0  09F8027F   [8]  00 FC ...").
func candumpFrames(t *testing.T, name string) []can.Frame {
	t.Helper()
	var frames []can.Frame
	for _, l := range logLines(t, name) {
		fs := strings.Fields(l)
		if len(fs) < 3 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		var id uint32
		_, err := fmt.Sscanf(fs[1], "%x", &id)
		data, herr := hex.DecodeString(strings.Join(fs[3:], ""))
		if err != nil || herr != nil || len(data) > 8 {
			t.Fatalf("%s: bad candump line %q", name, l)
		}
		f := can.Frame{ID: id, IsExtended: len(fs[1]) > 3, Length: uint8(len(data))}
		copy(f.Data[:], data)
		frames = append(frames, f)
	}
	return frames
}

// The device on a real SocketCAN interface: a board file naming vcan0 (can_iface), the n2k
// plugin enabled on source can, the candump sample written to vcan0 by the test arriving as
// decoded values, and the plugin's address claim arriving on vcan0. It runs in a network
// namespace of its own (mdnstest.Netns) and is skipped where the kernel has no vcan.
func TestDeviceOnVcan(t *testing.T) {
	if os.Getenv("DEVHOST_TEST_NETNS") != "1" {
		// Learn whether vcan exists before rebuilding the device inside a namespace.
		if out, err := exec.Command("unshare", "-rn", "ip", "link", "add", "vcan0", "type", "vcan").CombinedOutput(); err != nil {
			t.Skipf("no virtual CAN interface here: `ip link add vcan0 type vcan` in a new network namespace answered %v: %s (the kernel needs the vcan module: `modprobe vcan` as root on the host)",
				err, bytes.TrimSpace(out))
		}
	}
	if !mdnstest.Netns(t) {
		return
	}
	for _, args := range [][]string{{"link", "add", "vcan0", "type", "vcan"}, {"link", "set", "vcan0", "up"}} {
		if err := nsIP(args...); err != nil {
			t.Fatal(err)
		}
	}
	peer, err := socketcan.DialContext(t.Context(), "can", "vcan0")
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	// What the device sends, read by the test's own socket on the bus.
	var mu sync.Mutex
	var seen []can.Frame
	read := make(chan struct{})
	go func() {
		defer close(read)
		for rx := socketcan.NewReceiver(peer); rx.Receive(); {
			mu.Lock()
			seen = append(seen, rx.Frame())
			mu.Unlock()
		}
	}()
	defer func() { peer.Close(); <-read }()

	b := buildBundled(t)
	board := filepath.Join(t.TempDir(), "board.json")
	if err := os.WriteFile(board, []byte(`{"eth":{"up":true,"ip":"127.0.0.1"},"portal_ip":"127.6.0.1","can_iface":"vcan0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d := newDev(t, withBinary(b.bin), withEnv("DEVHOST_KEYS="+b.keys), withArgs("--board", board))
	eventually(t, "n2k dormant", func() bool {
		r := d.call("GET", "/api/v1/plugins/n2k", "")
		return r.status == 200 && r.json(t)["state"] == "dormant"
	})
	d.putConfig(`{"f_n2k":{"enabled":true,"source":"can"}}`)
	// The address claim (60928 from the preferred address 100 to all) on the real bus shows
	// the plugin is up on it.
	eventually(t, "the device's address claim on vcan0", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(seen, func(f can.Frame) bool { return f.IsExtended && f.ID == 0x18eeff64 })
	})

	// In batches, each one counted before the next, so that the device's socket receive
	// buffer (a few hundred frames) never overflows: the kernel would drop frames silently.
	frames := candumpFrames(t, "candumpSample2.txt")
	tx := socketcan.NewTransmitter(peer)
	var st map[string]any
	for i := 0; i < len(frames); i += 50 {
		batch := frames[i:min(i+50, len(frames))]
		for _, f := range batch {
			if err := tx.TransmitFrame(t.Context(), f); err != nil {
				t.Fatal(err)
			}
		}
		st = d.waitDoc("the log through vcan0", "/api/v1/n2k/status", hangGuard, func(st map[string]any) bool {
			return num(st["frames_in"]) >= float64(i+len(batch))
		})
	}
	if num(st["frames_in"]) != float64(len(frames)) || st["source"] != "can" || num(st["deltas"]) == 0 {
		t.Fatalf("status after %d frames on vcan0: %v", len(frames), st)
	}
	if pgns, _ := st["pgns"].(map[string]any); num(pgns["129026"]) == 0 {
		t.Errorf("no COG/SOG (129026) decoded from the log: %v", st)
	}
}
