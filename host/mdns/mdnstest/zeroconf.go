package mdnstest

import (
	"bufio"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Peer is a python3-zeroconf process running host/mdns/testdata/zeroconf_peer.py: the
// independent mDNS implementation the tests check the responder against. It answers one JSON
// object a line; a line written to it ends its command.
type Peer struct {
	t     testing.TB
	stdin io.WriteCloser
	lines chan map[string]any
}

// peerScript is zeroconf_peer.py, found beside this package whatever the test's directory.
func peerScript() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "zeroconf_peer.py")
}

// StartPeer runs the zeroconf peer with args (browse TYPE, register ..., latency ...) under
// python (Python's answer); it is ended with the test, killed if it does not end in 10 s.
func StartPeer(t testing.TB, python string, args ...string) *Peer {
	t.Helper()
	cmd := exec.Command(python, append([]string{peerScript()}, args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = Writer(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Peer{t: t, stdin: stdin, lines: make(chan map[string]any, 64)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				m = map[string]any{"event": "unparsed", "line": sc.Text()}
			}
			p.lines <- m
		}
	}()
	t.Cleanup(func() {
		p.Stop()
		_ = stdin.Close()
		done := make(chan struct{})
		go func() {
			_ = cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return p
}

// Wait answers the next line of event (and, unless name is "", that name), logging the lines
// it passes over; it fails the test when the peer ends or nothing comes for 30 s.
func (p *Peer) Wait(event, name string) map[string]any {
	p.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case m, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("zeroconf peer ended while waiting for %s %s", event, name)
			}
			if m["event"] == event && (name == "" || m["name"] == name) {
				return m
			}
			p.t.Logf("zeroconf peer: %v", m)
		case <-deadline:
			p.t.Fatalf("zeroconf peer: no %s %s", event, name)
		}
	}
}

// Stop ends the peer's command (a browse, a registration); the process then reports what it
// does on the way out (unregistered) and exits.
func (p *Peer) Stop() {
	_, _ = io.WriteString(p.stdin, "stop\n")
}
