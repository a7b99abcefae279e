package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// pollEvery is how often `logs --follow` asks for new lines.
const pollEvery = time.Second

// requestTimeout bounds one log page request.
const requestTimeout = 15 * time.Second

// logPage is the spec's log page (GET /logs).
type logPage struct {
	First   int64    `json:"first"`
	Next    int64    `json:"next"`
	Dropped int64    `json:"dropped"`
	Size    int      `json:"size"`
	Used    int      `json:"used"`
	Gap     bool     `json:"gap"`
	From    int64    `json:"from"`
	Lines   []string `json:"lines"`
}

// httpError is an error status from the device.
type httpError struct {
	status int
	code   string
	msg    string
}

func (e *httpError) Error() string {
	s := fmt.Sprintf("device answered %d", e.status)
	if e.code != "" {
		s += " " + e.code
	}
	if e.msg != "" {
		s += ": " + e.msg
	}
	switch e.status {
	case http.StatusUnauthorized:
		s += " (give the API key with --key or $DEVCTL_KEY)"
	case http.StatusTooManyRequests:
		s += " (too many wrong keys; wait and retry)"
	}
	return s
}

// final reports errors that retrying cannot fix: the request itself is refused.
func final(err error) bool {
	var he *httpError
	if !errors.As(err, &he) {
		return false
	}
	return he.status >= 400 && he.status < 500 && he.status != http.StatusRequestTimeout && he.status != http.StatusTooManyRequests
}

func readHTTPError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var body struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	_ = json.Unmarshal(b, &body)
	return &httpError{status: resp.StatusCode, code: body.Error, msg: body.Message}
}

func (a *app) logs(ctx context.Context, args []string) error {
	fs := newFlags("logs")
	url := fs.String("url", "", "the device, http://HOST:PORT")
	key := fs.String("key", "", "API key (default $DEVCTL_KEY)")
	follow := fs.Bool("follow", false, "keep printing new lines until interrupted")
	limit := fs.Int("limit", 200, "lines per request (1..1000)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	base, err := apiBase(*url)
	if err != nil {
		return err
	}
	if *limit < 1 || *limit > 1000 {
		return usagef("logs: --limit must be 1..1000")
	}
	t := logTail{a: a, base: base, key: a.key(*key), limit: *limit, after: -1}
	for {
		n, err := t.poll(ctx)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case !*follow || final(err):
			return err
		default:
			fmt.Fprintf(a.stderr, "devctl: %v; retrying\n", err)
		}
		if err == nil && n == *limit {
			continue // more lines are waiting
		}
		if !*follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.clock.After(pollEvery):
		}
	}
}

// logTail pages through the device's log ring.
type logTail struct {
	a     *app
	base  string
	key   string
	limit int
	after int64 // -1: from the oldest line kept
	next  int64 // the device's `next` of the previous page
}

// poll fetches and prints one page; it returns how many lines it printed.
func (t *logTail) poll(ctx context.Context) (int, error) {
	u := t.base + "/logs?limit=" + strconv.Itoa(t.limit)
	if t.after >= 0 {
		u += "&after=" + strconv.FormatInt(t.after, 10)
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, fmt.Errorf("logs: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if t.key != "" {
		req.Header.Set("Authorization", "Bearer "+t.key)
	}
	resp, err := t.a.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("logs: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("logs: %w", readHTTPError(resp))
	}
	var p logPage
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&p); err != nil {
		return 0, fmt.Errorf("logs: decode the page: %w", err)
	}
	if t.after >= 0 && p.Next < t.next {
		// Sequences only grow within a boot: the device restarted and its ring is new.
		fmt.Fprintln(t.a.stderr, "devctl: the device restarted; reading its new log from the start")
		t.after, t.next = -1, 0
		return t.poll(ctx)
	}
	if p.Gap {
		fmt.Fprintf(t.a.stderr, "devctl: %d log lines were overwritten before they could be read\n", max(p.From-(t.after+1), 0))
	}
	for _, l := range p.Lines {
		if _, err := fmt.Fprintln(t.a.stdout, l); err != nil {
			return 0, err
		}
	}
	t.next = p.Next
	if p.Next > 0 {
		t.after = p.Next - 1
	}
	return len(p.Lines), nil
}
