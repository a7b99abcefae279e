package sktls

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"devhost/host/signalk/sktest/testcert"
	"github.com/gorilla/websocket"
)

// TestProofNeedsStatusLine: after a good handshake, only a well-formed HTTP status line from
// the server commits the capture, however the line is split into records.
func TestProofNeedsStatusLine(t *testing.T) {
	cases := []struct {
		name   string
		pieces []string
		commit bool
	}{
		{"hang-up", nil, false},
		{"not HTTP", []string{"SSH-2.0-OpenSSH_9.6\r\n"}, false},
		{"HTTP/2 preface-like", []string{"HTTP/2.0 200 OK\r\n\r\n"}, false},
		{"status cut short", []string{"HTTP/1.1 2"}, false},
		{"code not digits", []string{"HTTP/1.1 2x0 OK\r\n\r\n"}, false},
		{"200", []string{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"}, true},
		{"401 split across records", []string{"HT", "TP/1.1 4", "01", " Unauthorized\r\nContent-Length: 0\r\n\r\n"}, true},
		{"HTTP/1.0 with bare CR", []string{"HTTP/1.0 404\r\n\r\n"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			cert := testcert.NewCA(t, "CA").Issue(t, testcert.Loopback)
			ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				buf := make([]byte, 512)
				_, _ = c.Read(buf)
				for _, p := range tc.pieces {
					_, _ = c.Write([]byte(p))
					time.Sleep(5 * time.Millisecond)
				}
			}()
			c, err := r.m.DialTLSContext(context.Background(), "tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write([]byte("GET /signalk HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			_, _ = io.ReadAll(c)
			_, pinned := r.storedPin(t, ln.Addr().String())
			if pinned != tc.commit {
				t.Fatalf("committed = %v, want %v", pinned, tc.commit)
			}
			if d := r.m.Document(); pinned != (d.State == StateTrusted) {
				t.Fatalf("state %q", d.State)
			}
		})
	}
}

// TestStatusPrefixMatchesGrammar checks the incremental recogniser against the grammar it
// implements on every prefix of a few lines.
func TestStatusPrefixMatchesGrammar(t *testing.T) {
	full := regexp.MustCompile(`^HTTP/1\.[01] [1-5][0-9]{2}[ \r]`)
	for _, line := range []string{"HTTP/1.1 101 Switching", "HTTP/1.0 599\r", "HTTP/1.2 200 ", "HTTP/1.1 600 ", "HTTP/1.1 20  X", "http/1.1 200 ", "HTTP/1.1 200X"} {
		ok := isStatusPrefix([]byte(line[:statusLineLen]))
		if ok != full.MatchString(line) {
			t.Errorf("%q: recogniser %v, grammar %v", line, ok, !ok)
		}
	}
}

// TestWebSocketProof: a WebSocket 101 through gorilla's NetDialTLSContext commits the capture;
// a refused upgrade (an HTTP status all the same) commits too; a changed leaf fails the dial
// with a CertError.
func TestWebSocketProof(t *testing.T) {
	up := websocket.Upgrader{}
	ca := testcert.NewCA(t, "CA")
	for _, refuse := range []bool{false, true} {
		r := newRig(t)
		srv := newTLSServer(t, ca.Issue(t, testcert.Loopback), http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if refuse {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			c, err := up.Upgrade(w, req, nil)
			if err != nil {
				return
			}
			_ = c.Close()
		}))
		d := websocket.Dialer{NetDialTLSContext: r.m.DialTLSContext, HandshakeTimeout: 5 * time.Second}
		c, resp, err := d.Dial("wss://"+srv.Addr()+"/signalk/v1/stream?subscribe=none", nil)
		if refuse {
			if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("refused upgrade: %v %v", err, resp)
			}
		} else {
			if err != nil {
				t.Fatal(err)
			}
			c.Close()
		}
		if _, ok := r.storedPin(t, srv.Addr()); !ok {
			t.Fatalf("refuse=%v: the upgrade answer did not commit", refuse)
		}
		srv.set(testcert.NewCA(t, "Other CA").Issue(t, testcert.Loopback))
		_, _, err = d.Dial("wss://"+srv.Addr()+"/signalk/v1/stream", nil)
		if !IsCertError(err) {
			t.Fatalf("changed leaf over wss: %v", err)
		}
	}
}
