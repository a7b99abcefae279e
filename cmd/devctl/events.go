package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// defaultRetry is the reconnect delay until the stream names one (the device sends 3000).
const defaultRetry = 3 * time.Second

// maxEventLine bounds one line of the stream.
const maxEventLine = 1 << 20

func (a *app) events(ctx context.Context, args []string) error {
	fs := newFlags("events")
	dev := addDeviceFlags(fs)
	raw := fs.Bool("raw", false, "print the stream as it arrives")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	c, err := a.device(dev, 0) // a stream: no timeout
	if err != nil {
		return err
	}
	s := &sseReader{a: a, c: c, raw: *raw, retry: defaultRetry}
	for {
		err := s.stream(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if final(err) {
			return fmt.Errorf("events: %w", err)
		}
		if err != nil {
			fmt.Fprintf(a.stderr, "devctl: events: %v; reconnecting in %v\n", err, s.retry)
		} else {
			fmt.Fprintf(a.stderr, "devctl: events: stream ended; reconnecting in %v\n", s.retry)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.clock.After(s.retry):
		}
	}
}

// sseReader reads one server-sent event stream at a time, keeping the retry delay across
// connections.
type sseReader struct {
	a     *app
	c     *apiClient
	raw   bool
	retry time.Duration
}

// stream connects and prints events until the stream ends (nil) or fails.
func (s *sseReader) stream(ctx context.Context) error {
	resp, err := s.c.do(ctx, http.MethodGet, "/events", "text/event-stream", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if s.raw {
		_, err := io.Copy(s.a.stdout, resp.Body)
		return err
	}
	return s.parse(resp.Body)
}

// parse prints each event of an SSE stream as one line `NAME DATA` (multi-line data joined
// with `\n` escapes so one event stays one line); comments (pings) are skipped.
func (s *sseReader) parse(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxEventLine)
	var name string
	var data []string
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if line == "" {
			if data != nil {
				if name == "" {
					name = "message"
				}
				if _, err := fmt.Fprintf(s.a.stdout, "%s %s\n", name, strings.Join(data, `\n`)); err != nil {
					return err
				}
			}
			name, data = "", nil
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			data = append(data, value)
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms >= 0 {
				s.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}
