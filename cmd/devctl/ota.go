package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"devhost/abi"
	"devhost/host/ota"
	"devhost/host/ota/image"
	"devhost/host/plugin/trust"
)

const otaUsage = `usage:
  devctl ota pack --image BIN --out FILE [--key KEY]
  devctl ota manifest --base-url URL FILE... > manifest.json
  devctl ota push --url DEVICE [--key APIKEY] FILE

pack signs the devhost executable BIN as a firmware image (version and project read from BIN
with --version and --build-info), with KEY (a PEM private key) or else the development
firmware key in $DEVHOST_KEYS (created when none exists). manifest writes a schema-1 manifest
of image files whose URLs are BASE-URL/<file name>. push serves FILE once from a short-lived
server of its own, asks the device to install it (POST /ota {url}), shows its progress and
returns when the device runs the new image (exit 0) or the install failed (exit 1).
`

// otaPushTimeout bounds a push: download, reboot and the new image's first answer.
const otaPushTimeout = 15 * time.Minute

func (a *app) ota(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("ota: no subcommand")
	}
	switch args[0] {
	case "pack":
		return a.otaPack(args[1:])
	case "manifest":
		return a.otaManifest(args[1:])
	case "push":
		return a.otaPush(ctx, args[1:])
	case "pubkey":
		return a.otaPubkey(args[1:])
	case "help", "-h", "--help", "-help":
		fmt.Fprint(a.stdout, otaUsage)
		return nil
	}
	return usagef("ota: unknown subcommand %q", args[0])
}

// firmwareKey loads --key, or the development firmware key (created when none exists).
func (a *app) firmwareKey(path string) (*rsa.PrivateKey, error) {
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("signing key: %w", err)
		}
		k, err := abi.ParsePrivateKey(b)
		if err != nil {
			return nil, fmt.Errorf("signing key %s: %w", path, err)
		}
		return k, nil
	}
	dir, err := a.devKeyDir()
	if err != nil {
		return nil, err
	}
	return a.keyAt(filepath.Join(dir, image.DevPrivateFile), "the development firmware key")
}

// otaPubkey prints the firmware public key as base64 PKIX DER (what `make build` compiles in).
func (a *app) otaPubkey(args []string) error {
	fs := newFlags("ota pubkey")
	keyPath := fs.String("key", "", "private key (PEM); default the development firmware key")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	k, err := a.firmwareKey(*keyPath)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return fmt.Errorf("public key: %w", err)
	}
	fmt.Fprintln(a.stdout, base64.StdEncoding.EncodeToString(der))
	return nil
}

// identify asks the executable for the identity its image header carries.
func identify(ctx context.Context, bin string) (image.Header, error) {
	var h image.Header
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return h, fmt.Errorf("%s --version: %w", bin, err)
	}
	h.Version = strings.TrimSpace(string(out))
	out, err = exec.CommandContext(ctx, bin, "--build-info").Output()
	if err != nil {
		return h, fmt.Errorf("%s --build-info: %w", bin, err)
	}
	var info struct {
		Project   string `json:"project"`
		Target    string `json:"target"`
		BuildTime string `json:"build_time"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return h, fmt.Errorf("%s --build-info: %w", bin, err)
	}
	h.Project, h.Target, h.BuildTime = info.Project, info.Target, info.BuildTime
	if h.Version == "" || h.Project == "" {
		return h, fmt.Errorf("%s does not name its version and project", bin)
	}
	return h, nil
}

func (a *app) otaPack(args []string) error {
	fs := newFlags("ota pack")
	bin := fs.String("image", "", "the devhost executable to pack")
	out := fs.String("out", "", "the image file to write")
	keyPath := fs.String("key", "", "private key (PEM); default the development firmware key")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *bin == "" || *out == "" {
		return usagef("ota pack: --image and --out are required")
	}
	k, err := a.firmwareKey(*keyPath)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := identify(ctx, *bin)
	if err != nil {
		return err
	}
	f, err := os.Open(*bin)
	if err != nil {
		return fmt.Errorf("ota pack: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("ota pack: %w", err)
	}
	var buf bytes.Buffer
	if err := image.Pack(&buf, h, f, fi.Size(), k); err != nil {
		return err
	}
	if err := trust.WriteFileAtomic(*out, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("ota pack: %w", err)
	}
	fmt.Fprintf(a.stdout, "%s: %s %s for %s, %d bytes\n", *out, h.Project, h.Version, h.Target, buf.Len())
	return nil
}

func (a *app) otaManifest(args []string) error {
	fs := newFlags("ota manifest")
	baseURL := fs.String("base-url", "", "URL the image files are served under")
	if err := parse(fs, args); err != nil {
		return err
	}
	files := fs.Args()
	if *baseURL == "" || len(files) == 0 {
		return usagef("ota manifest: --base-url and at least one image file are required")
	}
	base, err := url.Parse(strings.TrimRight(*baseURL, "/") + "/")
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") {
		return usagef("ota manifest: --base-url %q is not an http or https URL", *baseURL)
	}
	m := ota.Manifest{Schema: 1, Builds: []ota.Build{}}
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("ota manifest: %w", err)
		}
		h, _, err := image.ReadHeader(bytes.NewReader(b))
		if err != nil {
			return fmt.Errorf("ota manifest: %s: %w", p, err)
		}
		if m.App == "" {
			m.App = h.Project
		} else if m.App != h.Project {
			return fmt.Errorf("ota manifest: %s is for %q, the others for %q", p, h.Project, m.App)
		}
		sum := sha256.Sum256(b)
		m.Builds = append(m.Builds, ota.Build{Version: h.Version, Target: h.Target, Channel: "stable",
			URL: base.ResolveReference(&url.URL{Path: filepath.Base(p)}).String(), Size: int64(len(b)),
			SHA256: hex.EncodeToString(sum[:]), Date: h.BuildTime})
	}
	return printJSON(a.stdout, m)
}

func (a *app) otaPush(ctx context.Context, args []string) error {
	fs := newFlags("ota push")
	dev := addDeviceFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("ota push: exactly one image file")
	}
	api, err := a.device(dev, 10*time.Second)
	if err != nil {
		return err
	}
	img, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("ota push: %w", err)
	}
	h, _, err := image.ReadHeader(bytes.NewReader(img))
	if err != nil {
		return fmt.Errorf("ota push: %s: %w", fs.Arg(0), err)
	}
	ctx, cancel := context.WithTimeout(ctx, otaPushTimeout)
	defer cancel()
	c := &otaClient{a: a, api: api}
	before, err := c.status(ctx)
	if err != nil {
		return fmt.Errorf("ota push: %w", err)
	}

	srvURL, stop, err := serveOnce(api.base, fs.Arg(0), img)
	if err != nil {
		return fmt.Errorf("ota push: %w", err)
	}
	defer stop()
	fmt.Fprintf(a.stderr, "devctl: serving %s (%s %s) at %s\n", fs.Arg(0), h.Project, h.Version, srvURL)
	if err := c.post(ctx, "/ota", map[string]string{"url": srvURL}); err != nil {
		return fmt.Errorf("ota push: %w", err)
	}
	return c.watch(ctx, before, h.Version)
}

// serveOnce serves img at a random path on the local address that reaches the device, for one
// complete download.
func serveOnce(base, name string, img []byte) (string, func(), error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, err
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(u.Hostname(), port), 10*time.Second)
	if err != nil {
		return "", nil, fmt.Errorf("reach the device: %w", err)
	}
	local := conn.LocalAddr().(*net.TCPAddr).IP
	conn.Close()
	ln, err := net.Listen("tcp", net.JoinHostPort(local.String(), "0"))
	if err != nil {
		return "", nil, fmt.Errorf("serve the image: %w", err)
	}
	tok := make([]byte, 8)
	_, _ = rand.Read(tok)
	path := "/" + hex.EncodeToString(tok) + "/" + filepath.Base(name)
	var taken atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
		if !taken.CompareAndSwap(false, true) {
			http.Error(w, "already served", http.StatusGone)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, filepath.Base(name), time.Time{}, bytes.NewReader(img))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}
	return "http://" + ln.Addr().String() + path, stop, nil
}

// otaClient follows one push on the device.
type otaClient struct {
	a   *app
	api *apiClient
}

func (c *otaClient) status(ctx context.Context) (ota.Status, error) {
	var st ota.Status
	err := c.api.call(ctx, http.MethodGet, "/ota/status", nil, &st)
	return st, err
}

func (c *otaClient) post(ctx context.Context, path string, body any) error {
	return c.api.call(ctx, http.MethodPost, path, body, nil)
}

// watch polls the status until the device runs version from the other slot (success), or the
// install failed, or the device came back on the old image.
func (c *otaClient) watch(ctx context.Context, before ota.Status, version string) error {
	last := ""
	rebooting := false
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("ota push: gave up waiting: %w", ctx.Err())
		case <-c.a.clock.After(300 * time.Millisecond):
		}
		st, err := c.status(ctx)
		if err != nil {
			if final(err) {
				return fmt.Errorf("ota push: %w", err)
			}
			if !rebooting {
				fmt.Fprintln(c.a.stdout, "rebooting")
				rebooting = true
			}
			continue
		}
		line := st.State
		if st.Progress != nil {
			line += fmt.Sprintf(" %d%%", *st.Progress)
		}
		if line != last {
			fmt.Fprintln(c.a.stdout, line)
			last = line
		}
		if st.State == ota.StateReady {
			// The device reboots about 1.5 s after ready, maybe between two polls.
			rebooting = true
			continue
		}
		switch {
		case st.Running.Slot != before.Running.Slot && st.Running.Version == version:
			conf := "pending verification"
			if st.Running.Confirmed {
				conf = "confirmed"
			}
			fmt.Fprintf(c.a.stdout, "running %s from slot %d (%s)\n", version, st.Running.Slot, conf)
			return nil
		case st.State == ota.StateFailed && st.Error != nil && !rebooting:
			return fmt.Errorf("ota push: the device refused the image: %s", *st.Error)
		case rebooting && st.Running.Slot == before.Running.Slot:
			return errors.New("ota push: the device came back on the previous image")
		}
	}
}
