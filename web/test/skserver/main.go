// Command skserver runs the real signalk-server (installed by `make signalk-server`) with
// security on for the web UI's browser tests. It prints one JSON line, {host, port, self},
// once the server is up, then takes commands on stdin, one a line, answering each with one
// line ("ok", a JSON value, or "error: ..."):
//
//	approve <clientId>   wait for the client's pending access request and approve it read/write
//	value <path>         the value of vessels.self at the dotted path
//
// The server stops when stdin ends or on SIGINT/SIGTERM.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"devhost/host/signalk/sktest"
)

func main() {
	sktest.Command("skserver", func(ctx context.Context) error { return run(ctx, os.Stdin, os.Stdout) })
}

func run(ctx context.Context, in io.Reader, out io.Writer) error {
	dir, err := sktest.Dir()
	if err != nil {
		return fmt.Errorf("install folder: %w", err)
	}
	if !sktest.Installed(dir) {
		return errors.New("signalk-server is not installed: run make signalk-server")
	}
	startCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	s, err := sktest.Start(startCtx, sktest.Options{Dir: dir})
	cancel()
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer func() { _ = s.Stop() }()
	if err := json.NewEncoder(out).Encode(map[string]any{"host": s.Host, "port": s.Port, "self": s.Self}); err != nil {
		return fmt.Errorf("announce: %w", err)
	}

	// Commands are read on their own goroutine so a signal stops the server at once; the
	// goroutine ends with stdin (closed by the parent, or at process exit).
	cmds := make(chan string)
	go func() {
		defer close(cmds)
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			select {
			case cmds <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-cmds:
			if !ok {
				return nil
			}
			fmt.Fprintln(out, answer(ctx, s, strings.Fields(line)))
		}
	}
}

func answer(ctx context.Context, s *sktest.Server, f []string) string {
	if len(f) != 2 {
		return "error: want a command and one argument"
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	switch f[0] {
	case "approve":
		if _, err := s.WaitRequest(ctx, f[1]); err != nil {
			return "error: " + err.Error()
		}
		if err := s.Approve(ctx, f[1], "readwrite"); err != nil {
			return "error: " + err.Error()
		}
		return "ok"
	case "value":
		v, ok, err := s.Value(ctx, f[1])
		switch {
		case err != nil:
			return "error: " + err.Error()
		case !ok:
			return "null"
		}
		return string(v)
	}
	return "error: unknown command " + f[0]
}
