package main

import (
	"bytes"
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"devhost/abi"
	"devhost/host/plugin/trust"
)

const pluginUsage = `usage:
  devctl plugin keygen [--sign-key FILE]
  devctl plugin pack --manifest FILE --wasm FILE [--sign-key FILE] [--out FILE]
  devctl plugin sign [--sign-key FILE] [--out FILE] BUNDLE
  devctl plugin install --url http://HOST:PORT [--key KEY] [--grant CAP,CAP | --grant-all] BUNDLE|URL
  devctl plugin list --url http://HOST:PORT [--key KEY] [--json]
  devctl plugin start|stop --url http://HOST:PORT [--key KEY] ID
  devctl plugin remove --url http://HOST:PORT [--key KEY] [--purge-config] ID
  devctl plugin keys list --url http://HOST:PORT [--key KEY]
  devctl plugin keys add --url http://HOST:PORT [--key KEY] PUBLIC.pem
  devctl plugin keys remove --url http://HOST:PORT [--key KEY] KID

The signing key is --sign-key, else $DEVCTL_SIGN_KEY, else the development key
<config dir>/devhost/keys/dev.key ($DEVHOST_KEYS sets the directory), which a device built
without a compiled-in key trusts; a missing key is generated (RSA-3072). The public key is
written beside it as <name>.pub.pem. install uploads a file in chunks that fit the device's
16 KiB request limit, or lets the device download a URL; it grants every capability the
plugin asks for unless --grant names a subset.
`

// chunkSize is the bytes per upload request: as base64 in JSON well under 16 KiB.
const chunkSize = 8 << 10

// pluginTimeout bounds one request to the device (an install by URL downloads first).
const pluginTimeout = 60 * time.Second

func (a *app) plugin(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return &usageError{msg: "plugin: no subcommand", usage: pluginUsage}
	}
	switch args[0] {
	case "keygen":
		return a.pluginKeygen(args[1:])
	case "pack":
		return a.pluginPack(args[1:])
	case "sign":
		return a.pluginSign(args[1:])
	case "install":
		return a.pluginInstall(ctx, args[1:])
	case "list":
		return a.pluginList(ctx, args[1:])
	case "start", "stop":
		return a.pluginAction(ctx, args[0], args[1:])
	case "remove":
		return a.pluginRemove(ctx, args[1:])
	case "keys":
		return a.pluginKeys(ctx, args[1:])
	case "help", "-h", "--help", "-help":
		fmt.Fprint(a.stdout, pluginUsage)
		return nil
	}
	return usagef("plugin: unknown subcommand %q", args[0])
}

// signKeyPath resolves the signing key's file; dev says it is the development key.
func (a *app) signKeyPath(flagPath string) (path string, dev bool, err error) {
	if flagPath != "" {
		return flagPath, false, nil
	}
	if p := a.getenv("DEVCTL_SIGN_KEY"); p != "" {
		return p, false, nil
	}
	dir := a.getenv("DEVHOST_KEYS")
	if dir == "" {
		if dir, err = trust.DevKeyDir(); err != nil {
			return "", false, err
		}
	}
	return filepath.Join(dir, trust.DevPrivateFile), true, nil
}

// publicPath is where a key's public half is written: <file minus extension>.pub.pem.
func publicPath(priv string) string {
	return strings.TrimSuffix(priv, filepath.Ext(priv)) + ".pub.pem"
}

// loadOrCreateKey reads the signing key, generating it when the file does not exist.
func (a *app) loadOrCreateKey(path string, dev bool) (*rsa.PrivateKey, bool, error) {
	if dev {
		return trust.LoadOrCreateDevKey(filepath.Dir(path))
	}
	b, err := os.ReadFile(path)
	if err == nil {
		k, err := abi.ParsePrivateKey(b)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
		return k, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("signing key: %w", err)
	}
	k, err := abi.GenerateKey()
	if err != nil {
		return nil, false, err
	}
	priv, err := abi.MarshalPrivateKey(k)
	if err != nil {
		return nil, false, err
	}
	pub, err := abi.MarshalPublicKey(&k.PublicKey)
	if err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("signing key: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("signing key: %w", err)
	}
	if _, err := f.Write(priv); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("signing key: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, false, fmt.Errorf("signing key: %w", err)
	}
	if err := os.WriteFile(publicPath(path), pub, 0o644); err != nil {
		return nil, false, fmt.Errorf("public key: %w", err)
	}
	return k, true, nil
}

func (a *app) signingKey(flagPath string) (*rsa.PrivateKey, error) {
	path, dev, err := a.signKeyPath(flagPath)
	if err != nil {
		return nil, err
	}
	k, created, err := a.loadOrCreateKey(path, dev)
	if err != nil {
		return nil, err
	}
	if created {
		id, _ := abi.KeyID(&k.PublicKey)
		fmt.Fprintf(a.stderr, "devctl: created signing key %s at %s\n", id, path)
	}
	return k, nil
}

func (a *app) pluginKeygen(args []string) error {
	fs := newFlags("plugin keygen")
	file := fs.String("sign-key", "", "the key file (default $DEVCTL_SIGN_KEY or the development key)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	path, dev, err := a.signKeyPath(*file)
	if err != nil {
		return err
	}
	k, _, err := a.loadOrCreateKey(path, dev)
	if err != nil {
		return err
	}
	id, _ := abi.KeyID(&k.PublicKey)
	fmt.Fprintf(a.stdout, "key %s %s\n", id, path)
	return nil
}

func (a *app) pluginPack(args []string) error {
	fs := newFlags("plugin pack")
	manPath := fs.String("manifest", "", "the manifest JSON")
	wasmPath := fs.String("wasm", "", "the Wasm module")
	keyPath := fs.String("sign-key", "", "the signing key")
	out := fs.String("out", "", "the bundle to write (default <id>-<version>.devplug)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *manPath == "" || *wasmPath == "" {
		return usagef("plugin pack: --manifest and --wasm are required")
	}
	man, err := os.ReadFile(*manPath)
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	m, err := abi.ParseManifest(man)
	if err != nil {
		return err
	}
	mod, err := os.ReadFile(*wasmPath)
	if err != nil {
		return fmt.Errorf("module: %w", err)
	}
	k, err := a.signingKey(*keyPath)
	if err != nil {
		return err
	}
	b, err := abi.PackRaw(man, mod, k)
	if err != nil {
		return err
	}
	dest := *out
	if dest == "" {
		dest = m.ID + "-" + m.Version + ".devplug"
	}
	if err := os.WriteFile(dest, b, 0o644); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	fmt.Fprintln(a.stdout, dest)
	return nil
}

func (a *app) pluginSign(args []string) error {
	fs := newFlags("plugin sign")
	keyPath := fs.String("sign-key", "", "the signing key")
	out := fs.String("out", "", "the bundle to write (default: replace BUNDLE)")
	pos, err := parseAll(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("plugin sign: give one BUNDLE")
	}
	in, err := os.ReadFile(pos[0])
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	bd, err := abi.Parse(in)
	if err != nil {
		return err
	}
	k, err := a.signingKey(*keyPath)
	if err != nil {
		return err
	}
	b, err := abi.PackRaw(bd.ManifestJSON, bd.Module, k)
	if err != nil {
		return err
	}
	dest := *out
	if dest == "" {
		dest = pos[0]
	}
	if err := os.WriteFile(dest, b, 0o644); err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	id, _ := abi.KeyID(&k.PublicKey)
	fmt.Fprintf(a.stdout, "%s signed by %s\n", dest, id)
	return nil
}

// call sends one request to the device and decodes its JSON answer into out (when not nil).
func (a *app) call(ctx context.Context, method, url, key string, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, pluginTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		js, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return readHTTPError(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: answer: %w", method, url, err)
	}
	return nil
}

// pluginStatus is the part of the device's plugin document the command line shows.
type pluginStatus struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Version   string   `json:"version"`
	State     string   `json:"state"`
	Asked     []string `json:"asked"`
	Granted   []string `json:"granted"`
	Memory    uint64   `json:"memory"`
	Calls     uint64   `json:"calls"`
	Errors    uint64   `json:"errors"`
	Denied    uint64   `json:"denied"`
	LastError *string  `json:"last_error"`
	Replaced  bool     `json:"replaced"`
}

func (a *app) pluginInstall(ctx context.Context, args []string) error {
	fs := newFlags("plugin install")
	url := fs.String("url", "", "the device, http://HOST:PORT")
	key := fs.String("key", "", "API key (default $DEVCTL_KEY)")
	grant := fs.String("grant", "", "capabilities to grant, comma-separated (default: all asked)")
	grantAll := fs.Bool("grant-all", false, "grant every capability the plugin asks for")
	pos, err := parseAll(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("plugin install: give one BUNDLE file or URL")
	}
	if *grant != "" && *grantAll {
		return usagef("plugin install: --grant and --grant-all exclude each other")
	}
	base, err := a.apiBase(*url)
	if err != nil {
		return err
	}
	k := a.key(*key)
	body := map[string]any{}
	if *grant != "" {
		var caps []string
		for _, c := range strings.Split(*grant, ",") {
			if c = strings.TrimSpace(c); c != "" {
				caps = append(caps, c)
			}
		}
		body["grant"] = caps
	}
	src := pos[0]
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		body["url"] = src
	} else {
		id, err := a.upload(ctx, base, k, src)
		if err != nil {
			return err
		}
		body["upload"] = id
	}
	var st pluginStatus
	if err := a.call(ctx, http.MethodPost, base+"/plugins", k, body, &st); err != nil {
		return err
	}
	verb := "installed"
	if st.Replaced {
		verb = "replaced"
	}
	fmt.Fprintf(a.stdout, "%s %s %s (%s)\n  asked:   %s\n  granted: %s\n", verb, st.ID, st.Version, st.State,
		strings.Join(st.Asked, " "), strings.Join(st.Granted, " "))
	return nil
}

// upload sends a bundle file in chunks and has the device verify it; it returns the upload id.
func (a *app) upload(ctx context.Context, base, key, file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("bundle: %w", err)
	}
	var up struct {
		ID       string `json:"id"`
		Received int64  `json:"received"`
		Bundle   *struct {
			Manifest abi.Manifest `json:"manifest"`
			KeyID    string       `json:"kid"`
		} `json:"bundle"`
	}
	if err := a.call(ctx, http.MethodPost, base+"/plugins/uploads", key, map[string]int{"size": len(b)}, &up); err != nil {
		return "", err
	}
	for off := 0; off < len(b); off += chunkSize {
		end := min(off+chunkSize, len(b))
		chunk := map[string]any{"offset": off, "data": base64.StdEncoding.EncodeToString(b[off:end])}
		if err := a.call(ctx, http.MethodPut, base+"/plugins/uploads/"+up.ID, key, chunk, nil); err != nil {
			_ = a.call(ctx, http.MethodDelete, base+"/plugins/uploads/"+up.ID, key, nil, nil)
			return "", err
		}
	}
	if err := a.call(ctx, http.MethodPost, base+"/plugins/uploads/"+up.ID, key, nil, &up); err != nil {
		return "", err
	}
	if up.Bundle != nil {
		fmt.Fprintf(a.stderr, "devctl: %s %s verified (key %s)\n", up.Bundle.Manifest.ID, up.Bundle.Manifest.Version, up.Bundle.KeyID)
	}
	return up.ID, nil
}

func (a *app) pluginList(ctx context.Context, args []string) error {
	fs := newFlags("plugin list")
	url := fs.String("url", "", "the device, http://HOST:PORT")
	key := fs.String("key", "", "API key (default $DEVCTL_KEY)")
	raw := fs.Bool("json", false, "print the device's JSON document")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	base, err := a.apiBase(*url)
	if err != nil {
		return err
	}
	var doc struct {
		Plugins []json.RawMessage `json:"plugins"`
	}
	if err := a.call(ctx, http.MethodGet, base+"/plugins", a.key(*key), nil, &doc); err != nil {
		return err
	}
	if *raw {
		return json.NewEncoder(a.stdout).Encode(doc)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tVERSION\tSTATE\tMEMORY\tCALLS\tERRORS\tDENIED\tLAST ERROR")
	for _, r := range doc.Plugins {
		var st pluginStatus
		if err := json.Unmarshal(r, &st); err != nil {
			return fmt.Errorf("plugin list: %w", err)
		}
		last := "-"
		if st.LastError != nil {
			last = *st.LastError
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d KiB\t%d\t%d\t%d\t%s\n", st.ID, st.Version, st.State, st.Memory>>10,
			st.Calls, st.Errors, st.Denied, last)
	}
	return tw.Flush()
}

func (a *app) pluginAction(ctx context.Context, action string, args []string) error {
	fs := newFlags("plugin " + action)
	url := fs.String("url", "", "the device, http://HOST:PORT")
	key := fs.String("key", "", "API key (default $DEVCTL_KEY)")
	pos, err := parseAll(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("plugin %s: give one plugin ID", action)
	}
	base, err := a.apiBase(*url)
	if err != nil {
		return err
	}
	var st pluginStatus
	if err := a.call(ctx, http.MethodPost, base+"/plugins/"+pos[0]+"/"+action, a.key(*key), nil, &st); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%s %s\n", st.ID, st.State)
	return nil
}

func (a *app) pluginRemove(ctx context.Context, args []string) error {
	fs := newFlags("plugin remove")
	url := fs.String("url", "", "the device, http://HOST:PORT")
	key := fs.String("key", "", "API key (default $DEVCTL_KEY)")
	purge := fs.Bool("purge-config", false, "also erase the plugin's stored configuration")
	pos, err := parseAll(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("plugin remove: give one plugin ID")
	}
	base, err := a.apiBase(*url)
	if err != nil {
		return err
	}
	u := base + "/plugins/" + pos[0]
	if *purge {
		u += "?purge=true"
	}
	if err := a.call(ctx, http.MethodDelete, u, a.key(*key), nil, nil); err != nil {
		return err
	}
	what := "removed"
	if *purge {
		what = "removed with its configuration"
	}
	fmt.Fprintf(a.stdout, "%s %s\n", pos[0], what)
	return nil
}

func (a *app) pluginKeys(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("plugin keys: list, add or remove")
	}
	sub := args[0]
	fs := newFlags("plugin keys " + sub)
	url := fs.String("url", "", "the device, http://HOST:PORT")
	key := fs.String("key", "", "API key (default $DEVCTL_KEY)")
	pos, err := parseAll(fs, args[1:])
	if err != nil {
		return err
	}
	base, err := a.apiBase(*url)
	if err != nil {
		return err
	}
	k := a.key(*key)
	type keyDoc struct {
		ID      string `json:"kid"`
		Builtin bool   `json:"builtin"`
	}
	switch sub {
	case "list":
		if len(pos) != 0 {
			return usagef("plugin keys list: unexpected argument %q", pos[0])
		}
		var doc struct {
			Keys []keyDoc `json:"keys"`
		}
		if err := a.call(ctx, http.MethodGet, base+"/plugins/keys", k, nil, &doc); err != nil {
			return err
		}
		for _, kd := range doc.Keys {
			kind := "publisher"
			if kd.Builtin {
				kind = "built-in"
			}
			fmt.Fprintf(a.stdout, "%s %s\n", kd.ID, kind)
		}
		return nil
	case "add":
		if len(pos) != 1 {
			return usagef("plugin keys add: give one PUBLIC.pem")
		}
		b, err := os.ReadFile(pos[0])
		if err != nil {
			return fmt.Errorf("public key: %w", err)
		}
		var kd keyDoc
		if err := a.call(ctx, http.MethodPost, base+"/plugins/keys", k, map[string]string{"pem": string(b)}, &kd); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "%s trusted\n", kd.ID)
		return nil
	case "remove":
		if len(pos) != 1 {
			return usagef("plugin keys remove: give one KID")
		}
		if err := a.call(ctx, http.MethodDelete, base+"/plugins/keys/"+pos[0], k, nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "%s removed\n", pos[0])
		return nil
	}
	return usagef("plugin keys: unknown subcommand %q", sub)
}
