package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"
)

// devicePrefix starts the line the device prints once it answers requests.
const devicePrefix = "devhost: listening on "

// parseListenLine returns the base URL announced by a line "<prefix>http://HOST:PORT".
func parseListenLine(line, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
	if !ok {
		return "", false
	}
	u, err := url.Parse(strings.TrimSpace(rest))
	if err != nil || u.Scheme != "http" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	if u.Path != "" && u.Path != "/" {
		return "", false
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" {
		return "", false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", false
	}
	return "http://" + net.JoinHostPort(host, port), true
}

// child is a process this command started and owns until stop returns. It runs in its own
// process group so that stopping it also reaches the processes it started itself.
type child struct {
	name    string
	cmd     *exec.Cmd
	clk     clockwork.Clock
	stdout  *os.File // read end of the child's stdout
	done    chan struct{}
	waitErr error
	drained chan struct{}
	url     string
	// lines are the lines printed after the announcement, for a caller that expects more
	// (expect); when nobody reads them, lines past the buffer are dropped, never blocking the
	// child. Closed when the child's stdout ends.
	lines chan string
}

// startChild starts cmd (Stdout must be unset), waits until it prints a line beginning with
// prefix, and returns with the announced URL. On any failure the process is stopped again.
func startChild(ctx context.Context, clk clockwork.Clock, name string, cmd *exec.Cmd, prefix string, timeout time.Duration) (*child, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("%s: stdout pipe: %w", name, err)
	}
	cmd.Stdout = pw
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		_ = pr.Close()
		_ = pw.Close()
		return nil, fmt.Errorf("%s: start: %w", name, err)
	}
	_ = pw.Close()
	c := &child{name: name, cmd: cmd, clk: clk, stdout: pr, done: make(chan struct{}), drained: make(chan struct{}),
		lines: make(chan string, 16)}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()

	announced := make(chan string, 1)
	go func() {
		defer close(c.drained)
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			if sent {
				select {
				case c.lines <- sc.Text():
				default:
				}
				continue
			}
			if u, ok := parseListenLine(sc.Text(), prefix); ok {
				announced <- u
				sent = true
			}
		}
		close(c.lines)
		// The rest of the output is not needed; keep the pipe empty so the child never blocks.
		_, _ = io.Copy(io.Discard, pr)
	}()

	timer := clk.NewTimer(timeout)
	defer timer.Stop()
	select {
	case c.url = <-announced:
		return c, nil
	case <-c.done:
		// A child that announces itself and exits at once makes both cases ready: the
		// output it wrote before exiting decides, once read (or the timeout runs out).
		select {
		case c.url = <-announced:
			return c, nil
		case <-c.drained:
		case <-timer.Chan():
		}
		select {
		case c.url = <-announced:
			return c, nil
		default:
		}
		err = fmt.Errorf("%s exited before answering: %v", name, c.waitErr)
	case <-timer.Chan():
		err = fmt.Errorf("%s did not announce itself within %v", name, timeout)
	case <-ctx.Done():
		err = fmt.Errorf("%s: waiting for it to answer: %w", name, ctx.Err())
	}
	return nil, errors.Join(err, c.stop(5*time.Second))
}

// expect waits for the next line the child prints that starts with prefix, skipping others,
// and returns the rest of it.
func (c *child) expect(ctx context.Context, prefix string, timeout time.Duration) (string, error) {
	timer := c.clk.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				<-c.done
				return "", fmt.Errorf("%s ended before printing %q: %v", c.name, prefix, c.waitErr)
			}
			if rest, found := strings.CutPrefix(line, prefix); found {
				return rest, nil
			}
		case <-timer.Chan():
			return "", fmt.Errorf("%s did not print %q within %v", c.name, prefix, timeout)
		case <-ctx.Done():
			return "", fmt.Errorf("%s: waiting for %q: %w", c.name, prefix, ctx.Err())
		}
	}
}

// pid is the process started (for a device, its boot supervisor).
func (c *child) pid() int { return c.cmd.Process.Pid }

// stop sends SIGTERM, waits up to grace, then kills the whole process group; the group is killed
// in any case once the process has exited, so nothing it started outlives the run.
func (c *child) stop(grace time.Duration) error {
	var err error
	select {
	case <-c.done:
	default:
		if serr := c.cmd.Process.Signal(syscall.SIGTERM); serr != nil && !errors.Is(serr, os.ErrProcessDone) {
			err = fmt.Errorf("%s: SIGTERM: %w", c.name, serr)
		}
		timer := c.clk.NewTimer(grace)
		select {
		case <-c.done:
		case <-timer.Chan():
			err = errors.Join(err, fmt.Errorf("%s did not stop within %v after SIGTERM; killed", c.name, grace))
			_ = syscall.Kill(-c.pid(), syscall.SIGKILL)
			<-c.done
		}
		timer.Stop()
	}
	// Whatever the group still holds (a child of the process) goes too.
	if kerr := syscall.Kill(-c.pid(), syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
		err = errors.Join(err, fmt.Errorf("%s: killing its process group: %w", c.name, kerr))
	}
	_ = c.stdout.Close()
	<-c.drained
	return err
}
