package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// canned is one answer of the device, replayed byte for byte by the anchor.
type canned struct {
	Method string      `json:"method"`
	Path   string      `json:"path"`
	Status int         `json:"status"`
	Header http.Header `json:"header"`
	Body   []byte      `json:"body"`
}

// autoLengthLimit is net/http's buffer before chunking: a body up to this size, written before
// the handler returns, goes out with a Content-Length the server adds by itself.
const autoLengthLimit = 2048

// notCopied are the response headers the anchor's own server writes (Date) or that describe the
// connection rather than the answer. Content-Length is set again from the body when net/http
// would not add it by itself.
var notCopied = []string{"Date", "Connection", "Keep-Alive", "Transfer-Encoding", "Content-Length"}

// captureAnswer reads resp to its end and keeps what the anchor needs to answer the same way.
func captureAnswer(method, path string, resp *http.Response) (canned, error) {
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return canned{}, fmt.Errorf("reading the answer to %s %s: %w", method, path, err)
	}
	h := resp.Header.Clone()
	for _, k := range notCopied {
		h.Del(k)
	}
	// A larger body framed with a length had it set by the handler; a small one gets it from the
	// server, after the other headers. Mirror what the device did.
	if resp.ContentLength >= 0 && len(resp.TransferEncoding) == 0 && len(body) > autoLengthLimit {
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	return canned{Method: method, Path: path, Status: resp.StatusCode, Header: h, Body: body}, nil
}

// anchorHandler is the bare handler: a map lookup and one write, nothing else. A request body is
// read to its end, as any handler taking one would.
func anchorHandler(answers []canned) http.Handler {
	byKey := make(map[string]canned, len(answers))
	for _, a := range answers {
		byKey[a.Method+" "+a.Path] = a
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := byKey[r.Method+" "+r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if r.Body != nil {
			_, _ = io.Copy(io.Discard, r.Body)
		}
		h := w.Header()
		for k, v := range a.Header {
			h[k] = v
		}
		w.WriteHeader(a.Status)
		_, _ = w.Write(a.Body)
	})
}

// anchorPrefix starts the line the anchor prints once it accepts connections.
const anchorPrefix = "anchor: listening on "

// serveAnchor is the anchor process: it serves the answers in file on a loopback port, prints
// its address, and stops when ctx ends or stdin closes (its parent went away).
func serveAnchor(ctx context.Context, file string, stdin io.Reader, stdout io.Writer) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("reading answers: %w", err)
	}
	var answers []canned
	if err := json.Unmarshal(raw, &answers); err != nil {
		return fmt.Errorf("decoding answers %s: %w", file, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("anchor listen: %w", err)
	}
	srv := &http.Server{Handler: anchorHandler(answers), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, bufio.NewReader(stdin))
		cancel()
	}()
	if _, err := fmt.Fprintf(stdout, "%shttp://%s\n", anchorPrefix, ln.Addr()); err != nil {
		_ = srv.Close()
		return fmt.Errorf("announcing the anchor: %w", err)
	}
	select {
	case <-ctx.Done():
		_ = srv.Close()
		<-served
		return nil
	case err := <-served:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("anchor serve: %w", err)
	}
}
