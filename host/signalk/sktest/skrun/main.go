// Command skrun runs the Signal K server the tests use (signalk-server, installed by
// skinstall) on loopback for a developer, points a running device at it and approves the
// device's access request, then serves until interrupted (`make signalk`).
//
//	skrun [--port 3000] [--device http://127.0.0.1:8080] [--config DIR]
//
// The server keeps its configuration (users, approved devices, values) in --config, by
// default .cache/signalk-run beside the install folder, so a second run finds the device
// already approved. The admin is sktest.AdminUser with sktest.AdminPassword. The device is
// told sk.server_host 127.0.0.1, sk.server_port and sk.scheme http with PUT /api/v1/config
// (the API key from $DEVCTL_KEY when the device has one); when it cannot be reached the
// command says how to do it by hand and keeps serving.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"devhost/host/signalk/sktest"
)

func main() {
	sktest.Command("skrun", func(ctx context.Context) error { return run(ctx, os.Args[1:]) })
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("skrun", flag.ContinueOnError)
	port := fs.Int("port", 3000, "the server's http port on 127.0.0.1")
	device := fs.String("device", envOr("DEVCTL_URL", "http://127.0.0.1:8080"), "the running device (default $DEVCTL_URL)")
	cfgDir := fs.String("config", "", "the server's configuration folder (default .cache/signalk-run)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir, err := sktest.Prepare(ctx, os.Stderr)
	if err != nil {
		return err
	}
	if *cfgDir == "" {
		*cfgDir = filepath.Join(filepath.Dir(dir), "signalk-run")
	}
	if err := os.MkdirAll(*cfgDir, 0o700); err != nil {
		return fmt.Errorf("configuration folder: %w", err)
	}
	srv, err := sktest.Start(ctx, sktest.Options{Dir: dir, ConfigDir: *cfgDir, Port: *port})
	if err != nil {
		return err
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "skrun: stop the server:", err)
		}
	}()
	fmt.Printf("skrun: signalk-server %s on %s (admin %s / %s)\n", sktest.ServerVersion, srv.URL(), sktest.AdminUser, sktest.AdminPassword)
	fmt.Printf("skrun: admin token: %s\n", srv.AdminToken)
	if err := pointDevice(ctx, *device, *port); err != nil {
		fmt.Printf("skrun: the device at %s was not told about the server (%v); tell it with:\n", *device, err)
		fmt.Printf("  curl -X PUT -H 'Content-Type: application/json' %s/api/v1/config -d '%s'\n", strings.TrimRight(*device, "/"), configBody(*port))
	} else {
		fmt.Printf("skrun: the device at %s now uses this server\n", *device)
	}
	fmt.Println("skrun: approving the device's access requests (readwrite); Ctrl-C stops the server")
	return approve(ctx, srv)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func configBody(port int) string {
	return fmt.Sprintf(`{"sk":{"server_host":"127.0.0.1","server_port":%d,"scheme":"http"}}`, port)
}

// pointDevice sets the device's Signal K server.
func pointDevice(ctx context.Context, device string, port int) error {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	url := strings.TrimRight(device, "/") + "/api/v1/config"
	req, err := http.NewRequestWithContext(rctx, http.MethodPut, url, bytes.NewReader([]byte(configBody(port))))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if key := os.Getenv("DEVCTL_KEY"); key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("PUT /config answered %d: %s", resp.StatusCode, bytes.TrimSpace(b))
	}
	return nil
}

// approve grants every pending access request readwrite until ctx ends.
func approve(ctx context.Context, srv *sktest.Server) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		reqs, err := srv.Requests(ctx)
		if err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "skrun: list access requests:", err)
		}
		for _, r := range reqs {
			if r.State != "PENDING" {
				continue
			}
			if err := srv.Approve(ctx, r.ClientID, "readwrite"); err != nil {
				fmt.Fprintln(os.Stderr, "skrun: approve", r.ClientID+":", err)
				continue
			}
			fmt.Printf("skrun: approved %s (%s)\n", r.ClientID, r.Description)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
