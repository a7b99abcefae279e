package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// infoPath serves a large body framed with a Content-Length the handler set itself.
const infoPath = "/api/v1/system/info"

// fakeDevice answers like the device does: a small ping (framed with Content-Length by net/http),
// a config document larger than net/http's buffer (so it goes out chunked), a PUT answer, and
// extra headers the anchor must copy.
func fakeDevice(t *testing.T) *httptest.Server {
	t.Helper()
	big := `{"pad":"` + strings.Repeat("x", 5000) + `"}` + "\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		switch r.Method + " " + r.URL.Path {
		case "GET " + pingPath:
			_, _ = w.Write([]byte(`{"app":"devhost","version":"1.2.3","auth":true}` + "\n"))
		case "GET " + configPath:
			_, _ = w.Write([]byte(big))
		case "GET " + infoPath:
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
			_, _ = w.Write([]byte(big))
		case "PUT " + configPath:
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = w.Write([]byte(`{"changed":["sk.batch_ms"],"restart_required":false}` + "\n"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func captureAll(t *testing.T, base string) []canned {
	t.Helper()
	b := &bench{opts: options{key: "k"}}
	answers, version, err := b.captureDevice(context.Background(), newClient(), base)
	if err != nil {
		t.Fatal(err)
	}
	if version != "devhost 1.2.3" {
		t.Errorf("version %q, want %q", version, "devhost 1.2.3")
	}
	if len(answers) != 3 {
		t.Fatalf("%d answers, want 3", len(answers))
	}
	return answers
}

// rawExchange sends one request over a fresh connection and returns the whole answer as it came
// off the wire, less the Date line (the only part the anchor writes on its own).
func rawExchange(t *testing.T, base, method, path, body string) string {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(hangGuard))
	req := method + " " + path + " HTTP/1.1\r\nHost: device\r\nAuthorization: Bearer k\r\nConnection: close\r\n"
	if body != "" {
		req += "Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n"
	}
	req += "\r\n" + body
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(conn)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.SplitSeq(string(raw), "\r\n") {
		if !strings.HasPrefix(line, "Date: ") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\r\n")
}

func TestAnchorAnswersTheDevicesBytes(t *testing.T) {
	dev := fakeDevice(t)
	answers := captureAll(t, dev.URL)
	resp, err := http.Get(dev.URL + infoPath)
	if err != nil {
		t.Fatal(err)
	}
	info, err := captureAnswer("GET", infoPath, resp)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	answers = append(answers, info)
	anc := httptest.NewServer(anchorHandler(answers))
	defer anc.Close()

	tests := []struct {
		method, path, body string
		chunked            bool
	}{
		{"GET", pingPath, "", false},
		{"GET", configPath, "", true},
		{"PUT", configPath, string(putBody(150)), false},
		{"GET", infoPath, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			want := rawExchange(t, dev.URL, tc.method, tc.path, tc.body)
			got := rawExchange(t, anc.URL, tc.method, tc.path, tc.body)
			if got != want {
				t.Errorf("anchor wire bytes differ\n got: %q\nwant: %q", got, want)
			}
			if strings.Contains(want, "Transfer-Encoding: chunked") != tc.chunked {
				t.Errorf("device framing is not what the case tests (chunked=%v): %q", tc.chunked, want)
			}
		})
	}
}

func TestAnchorUnknownPath(t *testing.T) {
	anc := httptest.NewServer(anchorHandler(nil))
	defer anc.Close()
	resp, err := http.Get(anc.URL + pingPath)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status %d, want 404", resp.StatusCode)
	}
}

// The anchor process mode: reads its answers file, announces a loopback URL, serves the bytes and
// ends when its stdin closes.
func TestServeAnchor(t *testing.T) {
	answers := captureAll(t, fakeDevice(t).URL)
	raw, err := json.Marshal(answers)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "anchor.json")
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serveAnchor(context.Background(), file, inR, outW)
		_ = outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	base, ok := parseListenLine(line, anchorPrefix)
	if !ok {
		t.Fatalf("announcement %q", line)
	}
	resp, err := http.Get(base + pingPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !bytes.Equal(body, answers[0].Body) || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("anchor answered %q %v, want %q", body, resp.Header, answers[0].Body)
	}
	_ = inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serveAnchor: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("serveAnchor did not stop when its stdin closed")
	}
}

func TestServeAnchorBadFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "anchor.json")
	if err := os.WriteFile(file, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := serveAnchor(context.Background(), file, strings.NewReader(""), io.Discard); err == nil {
		t.Error("a broken answers file was accepted")
	}
}

func TestCheckPutAnswer(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		ok     bool
	}{
		{"written", 200, `{"changed":["sk.batch_ms"],"restart_required":false}`, true},
		{"nothing changed", 200, `{"changed":[],"restart_required":false}`, false},
		{"refused", 400, `{"error":"validation"}`, false},
		{"not json", 200, `ok`, false},
	}
	for _, tc := range tests {
		if err := checkPutAnswer(tc.status, []byte(tc.body)); (err == nil) != tc.ok {
			t.Errorf("%s: err=%v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

// A device that refuses the credential stops the run before anything is measured.
func TestCaptureDeviceRefusal(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == pingPath {
			_, _ = w.Write([]byte(`{"app":"devhost","version":"1"}`))
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer srv.Close()
	b := &bench{opts: options{key: "k"}}
	if _, _, err := b.captureDevice(context.Background(), newClient(), srv.URL); err == nil {
		t.Error("a 401 on GET /config was accepted")
	}
}

// hangGuard bounds the waits of these tests. Each waits on a condition; the bound only turns a
// hang into a failure, so it is far beyond what a loaded machine needs.
const hangGuard = 5 * time.Minute
