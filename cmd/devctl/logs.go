package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"devhost/host/logs"
)

// pollEvery is how often `logs --follow` asks for new lines.
const pollEvery = time.Second

// requestTimeout bounds one log page request.
const requestTimeout = 15 * time.Second

const logsUsage = `usage:
  devctl logs [--url http://HOST:PORT] [--key KEY] [--limit N] [--follow]

Prints the device's log lines, oldest first: every line its ring keeps, or with --limit N
only the N newest (1..1000). --follow then prints new lines as they come until interrupted.
The device is --url, else $DEVCTL_URL, else ` + defaultURL + `; the API key is --key, else
$DEVCTL_KEY.
`

// logPageSize is the lines asked per request while paging through the whole ring.
const logPageSize = 200

func (a *app) logs(ctx context.Context, args []string) error {
	fs := newFlags("logs")
	dev := addDeviceFlags(fs)
	follow := fs.Bool("follow", false, "keep printing new lines until interrupted")
	limit := fs.Int("limit", 0, "print only the N newest lines (1..1000)")
	if err := parseNoArgs(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &helpError{logsUsage}
		}
		return err
	}
	c, err := a.device(dev, requestTimeout)
	if err != nil {
		return err
	}
	if setFlags(fs)["limit"] && (*limit < 1 || *limit > 1000) {
		return usagef("logs: --limit must be 1..1000")
	}
	t := logTail{a: a, c: c, limit: logPageSize, after: -1}
	if *limit > 0 {
		// The N newest: learn where the ring ends, then read the N lines before it.
		if err := t.seekNewest(ctx, *limit); err != nil {
			return err
		}
		t.limit = *limit
		if _, err := t.poll(ctx); err != nil {
			return err
		}
		if !*follow {
			return nil
		}
		t.limit = logPageSize
	}
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
		if err == nil && n == t.limit {
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
	c     *apiClient
	limit int
	after int64 // -1: from the oldest line kept
	next  int64 // the device's `next` of the previous page
}

// seekNewest positions the tail n lines before the end of the ring (or at its oldest line).
// A page's next is the sequence after its own last line; an after beyond the ring's end
// reads nothing and answers the ring's next, which is what is asked here.
func (t *logTail) seekNewest(ctx context.Context, n int) error {
	p, err := t.page(ctx, 1<<62, 1)
	if err != nil {
		return err
	}
	t.after = p.Next - 1 - int64(n)
	if t.after < p.First {
		t.after = -1 // the ring holds fewer: from its oldest line
	}
	t.next = p.Next
	return nil
}

// poll fetches and prints one page; it returns how many lines it printed.
func (t *logTail) poll(ctx context.Context) (int, error) {
	p, err := t.page(ctx, t.after, t.limit)
	if err != nil {
		return 0, err
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

// page fetches the lines after sequence after (-1: from the oldest), at most limit.
func (t *logTail) page(ctx context.Context, after int64, limit int) (logs.Page, error) {
	u := "/logs?limit=" + strconv.Itoa(limit)
	if after >= 0 {
		u += "&after=" + strconv.FormatInt(after, 10)
	}
	var p logs.Page
	if err := t.c.call(ctx, http.MethodGet, u, nil, &p); err != nil {
		return logs.Page{}, fmt.Errorf("logs: %w", err)
	}
	return p, nil
}
