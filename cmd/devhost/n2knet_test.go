package main_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"devhost/plugins"
)

// logLines answers the lines of one of the plugin's test logs.
func logLines(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(plugins.Dir(), "n2k", "testdata", "logs", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

// ydRawLog turns the candump sample into the lines a Yacht Devices gateway sends
// ("hh:mm:ss.sss R IIIIIIII B0 B1 ..."), and answers how many frames they carry.
func ydRawLog(t *testing.T) ([]string, int) {
	var lines []string
	for _, l := range logLines(t, "candumpSample2.txt") {
		fs := strings.Fields(l)
		if len(fs) < 3 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		lines = append(lines, fmt.Sprintf("00:00:%06.3f R %s %s", float64(len(lines))/100, fs[1], strings.Join(fs[3:], " ")))
	}
	return lines, len(lines)
}

// actisenseLog turns the first n bus messages of the Dirona log (canboat's text, one whole
// message a line) into Actisense N2K ASCII lines ("A000000.000 SSDDP PPPPP DATA").
func actisenseLog(t *testing.T, n int) []string {
	var lines []string
	for _, l := range logLines(t, "dirona-actisense-serial.head.raw") {
		if len(lines) == n {
			break
		}
		fs := strings.Split(l, ",")
		var h [4]int // prio, pgn, src, dst
		for i := range h {
			var err error
			if len(fs) < 7 {
				t.Fatalf("log line %q", l)
			}
			if h[i], err = strconv.Atoi(fs[1+i]); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
		}
		prio, pgn, src, dst := h[0], h[1], h[2], h[3]
		if pgn >= 1<<18 {
			continue // the NGT-1's own messages (262386): no NMEA 2000 PGN, not on a bus
		}
		lines = append(lines, fmt.Sprintf("A000000.000 %02X%02X%d %05X %s", src, dst, prio, pgn, strings.ToUpper(strings.Join(fs[6:], ""))))
	}
	return lines
}

// replayServer is a Yacht Devices RAW gateway on loopback: each connection gets the log (and
// two garbage lines); the first connection is dropped after it, the next ones stay open. It
// keeps what the device sent.
type replayServer struct {
	ln    net.Listener
	mu    sync.Mutex
	conns int
	got   bytes.Buffer
	open  []net.Conn
}

func startReplay(t *testing.T, lines []string) *replayServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &replayServer{ln: ln}
	stream := []byte("garbage that is no frame\r\n" + strings.Join(lines, "\r\n") + "\r\n00:00:09.000 R 09F8027F XX\r\n")
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.open {
			c.Close()
		}
		s.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns++
			first := s.conns == 1
			s.open = append(s.open, c)
			s.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Written in pieces that cut lines anywhere, as TCP may deliver them.
				for i := 0; i < len(stream); i += 1000 {
					if _, err := c.Write(stream[i:min(i+1000, len(stream))]); err != nil {
						return
					}
				}
				buf := make([]byte, 4096)
				if first {
					// The gateway drops the device: a FIN, then whatever the device still
					// sends is read until it closes too. Closing outright with the device's
					// address claim unread would send a reset instead, and the device would
					// rightly report "connection reset by the peer".
					c.(*net.TCPConn).CloseWrite()
					for {
						if _, err := c.Read(buf); err != nil {
							c.Close()
							return
						}
					}
				}
				for {
					n, err := c.Read(buf)
					s.mu.Lock()
					s.got.Write(buf[:n])
					s.mu.Unlock()
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return s
}

func (s *replayServer) received() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got.String()
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

// The device (n2k bundled, as make build makes it) reads a network gateway: Yacht Devices
// RAW over TCP from a replaying server the test starts (garbage lines counted, a drop, the
// reconnection, the address claim sent back through the gateway), then over UDP from
// datagrams the test sends, then Actisense N2K ASCII over TCP from another replaying server;
// bad gateway settings are a 400 naming the key.
func TestN2KNetworkGateway(t *testing.T) {
	b := buildBundled(t)
	lines, frames := ydRawLog(t)
	d := newDev(t, withBinary(b.bin), withEnv("DEVHOST_KEYS="+b.keys))
	eventually(t, "n2k dormant", func() bool {
		r := d.call("GET", "/api/v1/plugins/n2k", "")
		return r.status == 200 && r.json(t)["state"] == "dormant"
	})
	for _, bad := range []string{`{"gateway_port":65536}`, `{"gateway_port":-1}`, `{"source":"nmea0183"}`, `{"gateway_host":"` + strings.Repeat("a", 254) + `"}`} {
		r := d.call("PUT", "/api/v1/config", `{"f_n2k":`+bad+`}`)
		if r.status != 400 || !strings.Contains(string(r.body), "gateway_") && !strings.Contains(string(r.body), "source") {
			t.Errorf("f_n2k %s: %d %s, want a 400 naming the key", bad, r.status, r.body)
		}
	}

	srv := startReplay(t, lines)
	port := srv.ln.Addr().(*net.TCPAddr).Port
	cfg := fmt.Sprintf(`{"f_n2k":{"enabled":true,"source":"ydraw_tcp","gateway_host":"127.0.0.1","gateway_port":%d}}`, port)
	d.putConfig(cfg)
	// The log twice (before and after the drop), each time with its two garbage lines.
	st := d.waitDoc("the log through a dropped and a new connection", "/api/v1/n2k/status", hangGuard, func(st map[string]any) bool {
		errs, _ := st["errors"].(map[string]any)
		return num(st["frames_in"]) >= float64(2*frames) && num(errs["bad_line"]) >= 4
	})
	errs := st["errors"].(map[string]any)
	gw, _ := st["gateway"].(map[string]any)
	if num(st["frames_in"]) != float64(2*frames) || num(errs["bad_line"]) != 4 || num(errs["gateway_closed"]) < 1 ||
		num(gw["connects"]) != 2 || st["last_error"] != "closed by the peer" || st["state"] != "receiving" || num(st["deltas"]) == 0 {
		t.Fatalf("status after the replay: %v", st)
	}
	// The device claimed its address through the gateway after connecting again.
	eventually(t, "the address claim at the gateway", func() bool { return strings.Contains(srv.received(), "18EEFF64 ") })

	// UDP: the gateway's datagrams to a port the device binds.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	udpPort := pc.LocalAddr().(*net.UDPAddr).Port
	pc.Close()
	before := num(st["frames_in"])
	cfg = fmt.Sprintf(`{"f_n2k":{"source":"ydraw_udp","gateway_host":"","gateway_port":%d}}`, udpPort)
	d.putConfig(cfg)
	d.waitDoc("the udp socket bound", "/api/v1/n2k/status", hangGuard, func(st map[string]any) bool {
		return st["source"] == "ydraw_udp" && st["state"] != "connecting" && st["state"] != "reconnecting"
	})
	c, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", udpPort))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < len(lines); i += 10 {
		if _, err := c.Write([]byte(strings.Join(lines[i:min(i+10, len(lines))], "\r\n"))); err != nil {
			t.Fatal(err)
		}
	}
	st = d.waitDoc("the datagrams", "/api/v1/n2k/status", hangGuard, func(st map[string]any) bool {
		return num(st["frames_in"]) >= before+float64(frames)
	})
	if num(st["frames_in"]) != before+float64(frames) || st["state"] != "receiving" {
		t.Fatalf("status after the datagrams: %v", st)
	}

	// Actisense N2K ASCII over TCP: whole messages, twice again (the first connection dropped).
	msgs := actisenseLog(t, 300)
	act := startReplay(t, msgs)
	beforeMsgs, beforeBad := num(st["messages"]), num(st["errors"].(map[string]any)["bad_line"])
	cfg = fmt.Sprintf(`{"f_n2k":{"source":"actisense_tcp","gateway_host":"127.0.0.1","gateway_port":%d}}`, act.ln.Addr().(*net.TCPAddr).Port)
	d.putConfig(cfg)
	st = d.waitDoc("the Actisense messages", "/api/v1/n2k/status", hangGuard, func(st map[string]any) bool {
		return st["source"] == "actisense_tcp" && num(st["messages"]) >= beforeMsgs+float64(2*len(msgs)) &&
			num(st["errors"].(map[string]any)["bad_line"]) >= beforeBad+4
	})
	if num(st["messages"]) != beforeMsgs+float64(2*len(msgs)) || num(st["errors"].(map[string]any)["bad_line"]) != beforeBad+4 {
		t.Fatalf("status after the Actisense log: %v", st)
	}
	// The claim went to the gateway as an Actisense line: 60928 (0EE00) from 100 (64) to all.
	eventually(t, "the address claim at the Actisense gateway", func() bool { return strings.Contains(act.received(), "A000000.000 64FF6 0EE00 ") })
}
