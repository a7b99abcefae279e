package main

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"devhost/abi"
	"devhost/host/plugin"
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

// signKeyPath resolves the signing key's file: --sign-key, else $DEVCTL_SIGN_KEY, else the
// development key.
func (a *app) signKeyPath(flagPath string) (string, error) {
	if flagPath != "" {
		return flagPath, nil
	}
	if p := a.getenv("DEVCTL_SIGN_KEY"); p != "" {
		return p, nil
	}
	dir, err := a.devKeyDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, trust.DevPrivateFile), nil
}

// devKeyDir is the development keys' folder: $DEVHOST_KEYS, else trust's default.
func (a *app) devKeyDir() (string, error) {
	if d := a.getenv("DEVHOST_KEYS"); d != "" {
		return d, nil
	}
	return trust.DevKeyDir()
}

// loadOrCreateKey reads the signing key, generating it when the file does not exist, with
// its public half beside it as <file minus extension>.pub.pem (for the development key
// that is trust's own pair of names).
func loadOrCreateKey(path string) (k *rsa.PrivateKey, created bool, err error) {
	pub := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path)) + ".pub.pem"
	return trust.LoadOrCreateKey(filepath.Dir(path), filepath.Base(path), pub)
}

func (a *app) signingKey(flagPath string) (*rsa.PrivateKey, error) {
	path, err := a.signKeyPath(flagPath)
	if err != nil {
		return nil, err
	}
	return a.keyAt(path, "signing key")
}

// keyAt loads the key file path, creating the pair when it does not exist and saying so on
// stderr as what.
func (a *app) keyAt(path, what string) (*rsa.PrivateKey, error) {
	k, created, err := loadOrCreateKey(path)
	if err != nil {
		return nil, err
	}
	if created {
		id, _ := abi.KeyID(&k.PublicKey)
		fmt.Fprintf(a.stderr, "devctl: created %s %s at %s\n", what, id, path)
	}
	return k, nil
}

// writeBundle packs man and mod, signed with the key --sign-key names, into the file dest.
func (a *app) writeBundle(man, mod []byte, keyPath, dest string) (*rsa.PrivateKey, error) {
	k, err := a.signingKey(keyPath)
	if err != nil {
		return nil, err
	}
	b, err := abi.PackRaw(man, mod, k)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(dest, b, 0o644); err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	return k, nil
}

func (a *app) pluginKeygen(args []string) error {
	fs := newFlags("plugin keygen")
	file := fs.String("sign-key", "", "the key file (default $DEVCTL_SIGN_KEY or the development key)")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	path, err := a.signKeyPath(*file)
	if err != nil {
		return err
	}
	k, _, err := loadOrCreateKey(path)
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
	man, m, err := readManifest(*manPath)
	if err != nil {
		return err
	}
	mod, err := os.ReadFile(*wasmPath)
	if err != nil {
		return fmt.Errorf("module: %w", err)
	}
	return a.pack(m, man, mod, *keyPath, *out, "")
}

// readManifest reads and checks a manifest file.
func readManifest(path string) ([]byte, abi.Manifest, error) {
	man, err := os.ReadFile(path)
	if err != nil {
		return nil, abi.Manifest{}, fmt.Errorf("manifest: %w", err)
	}
	m, err := abi.ParseManifest(man)
	if err != nil {
		return nil, abi.Manifest{}, err
	}
	return man, m, nil
}

// pack writes the bundle of manifest m (its text man) and module mod to out, else to
// DIR/<id>-<version>.devplug, and prints where.
func (a *app) pack(m abi.Manifest, man, mod []byte, keyPath, out, dir string) error {
	if out == "" {
		out = filepath.Join(dir, m.ID+"-"+m.Version+".devplug")
	}
	if _, err := a.writeBundle(man, mod, keyPath, out); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, out)
	return nil
}

func (a *app) pluginSign(args []string) error {
	fs := newFlags("plugin sign")
	keyPath := fs.String("sign-key", "", "the signing key")
	out := fs.String("out", "", "the bundle to write (default: replace BUNDLE)")
	bundle, err := parseOne(fs, args, "BUNDLE", "")
	if err != nil {
		return err
	}
	in, err := os.ReadFile(bundle)
	if err != nil {
		return fmt.Errorf("bundle: %w", err)
	}
	bd, err := abi.Parse(in)
	if err != nil {
		return err
	}
	dest := *out
	if dest == "" {
		dest = bundle
	}
	k, err := a.writeBundle(bd.ManifestJSON, bd.Module, *keyPath, dest)
	if err != nil {
		return err
	}
	id, _ := abi.KeyID(&k.PublicKey)
	fmt.Fprintf(a.stdout, "%s signed by %s\n", dest, id)
	return nil
}

func (a *app) pluginInstall(ctx context.Context, args []string) error {
	fs := newFlags("plugin install")
	dev := addDeviceFlags(fs)
	grant := fs.String("grant", "", "capabilities to grant, comma-separated (default: all asked)")
	grantAll := fs.Bool("grant-all", false, "grant every capability the plugin asks for")
	src, err := parseOne(fs, args, "BUNDLE file or URL", "")
	if err != nil {
		return err
	}
	if *grant != "" && *grantAll {
		return usagef("plugin install: --grant and --grant-all exclude each other")
	}
	c, err := a.device(dev, pluginTimeout)
	if err != nil {
		return err
	}
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
	if strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://") {
		body["url"] = src
	} else {
		id, err := a.upload(ctx, c, src)
		if err != nil {
			return err
		}
		body["upload"] = id
	}
	var st plugin.InstallResult
	if err := c.call(ctx, http.MethodPost, "/plugins", body, &st); err != nil {
		return err
	}
	verb := "installed"
	if st.Replaced {
		verb = "replaced"
	}
	asked := make([]string, len(st.Asked))
	for i, c := range st.Asked {
		asked[i] = string(c)
	}
	fmt.Fprintf(a.stdout, "%s %s %s (%s)\n  asked:   %s\n  granted: %s\n", verb, st.ID, st.Version, st.State,
		strings.Join(asked, " "), strings.Join(st.Granted, " "))
	return nil
}

// upload sends a bundle file in chunks and has the device verify it; it returns the upload id.
func (a *app) upload(ctx context.Context, c *apiClient, file string) (string, error) {
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
	if err := c.call(ctx, http.MethodPost, "/plugins/uploads", map[string]int{"size": len(b)}, &up); err != nil {
		return "", err
	}
	for off := 0; off < len(b); off += chunkSize {
		end := min(off+chunkSize, len(b))
		chunk := map[string]any{"offset": off, "data": base64.StdEncoding.EncodeToString(b[off:end])}
		if err := c.call(ctx, http.MethodPut, "/plugins/uploads/"+up.ID, chunk, nil); err != nil {
			_ = c.call(ctx, http.MethodDelete, "/plugins/uploads/"+up.ID, nil, nil)
			return "", err
		}
	}
	if err := c.call(ctx, http.MethodPost, "/plugins/uploads/"+up.ID, nil, &up); err != nil {
		return "", err
	}
	if up.Bundle != nil {
		fmt.Fprintf(a.stderr, "devctl: %s %s verified (key %s)\n", up.Bundle.Manifest.ID, up.Bundle.Manifest.Version, up.Bundle.KeyID)
	}
	return up.ID, nil
}

func (a *app) pluginList(ctx context.Context, args []string) error {
	fs := newFlags("plugin list")
	dev := addDeviceFlags(fs)
	raw := fs.Bool("json", false, "print the device's JSON document")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	c, err := a.device(dev, pluginTimeout)
	if err != nil {
		return err
	}
	var doc struct {
		Plugins []json.RawMessage `json:"plugins"`
	}
	if err := c.call(ctx, http.MethodGet, "/plugins", nil, &doc); err != nil {
		return err
	}
	if *raw {
		return json.NewEncoder(a.stdout).Encode(doc)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tVERSION\tSTATE\tMEMORY\tCALLS\tERRORS\tDENIED\tLAST ERROR")
	for _, r := range doc.Plugins {
		var st plugin.Status
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

// onePlugin adds the device flags to fs (which holds the command's own), parses args for them
// and the one plugin ID, and answers the ID and the device's client.
func (a *app) onePlugin(fs *flag.FlagSet, args []string) (string, *apiClient, error) {
	dev := addDeviceFlags(fs)
	id, err := parseOne(fs, args, "plugin ID", "")
	if err != nil {
		return "", nil, err
	}
	c, err := a.device(dev, pluginTimeout)
	if err != nil {
		return "", nil, err
	}
	return id, c, nil
}

func (a *app) pluginAction(ctx context.Context, action string, args []string) error {
	fs := newFlags("plugin " + action)
	id, c, err := a.onePlugin(fs, args)
	if err != nil {
		return err
	}
	var st plugin.Status
	if err := c.call(ctx, http.MethodPost, "/plugins/"+id+"/"+action, nil, &st); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%s %s\n", st.ID, st.State)
	return nil
}

func (a *app) pluginRemove(ctx context.Context, args []string) error {
	fs := newFlags("plugin remove")
	purge := fs.Bool("purge-config", false, "also erase the plugin's stored configuration")
	id, c, err := a.onePlugin(fs, args)
	if err != nil {
		return err
	}
	u := "/plugins/" + id
	if *purge {
		u += "?purge=true"
	}
	if err := c.call(ctx, http.MethodDelete, u, nil, nil); err != nil {
		return err
	}
	what := "removed"
	if *purge {
		what = "removed with its configuration"
	}
	fmt.Fprintf(a.stdout, "%s %s\n", id, what)
	return nil
}

func (a *app) pluginKeys(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usagef("plugin keys: list, add or remove")
	}
	sub := args[0]
	fs := newFlags("plugin keys " + sub)
	dev := addDeviceFlags(fs)
	pos, err := parseAll(fs, args[1:])
	if err != nil {
		return err
	}
	c, err := a.device(dev, pluginTimeout)
	if err != nil {
		return err
	}
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
		if err := c.call(ctx, http.MethodGet, "/plugins/keys", nil, &doc); err != nil {
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
		if err := c.call(ctx, http.MethodPost, "/plugins/keys", map[string]string{"pem": string(b)}, &kd); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "%s trusted\n", kd.ID)
		return nil
	case "remove":
		if len(pos) != 1 {
			return usagef("plugin keys remove: give one KID")
		}
		if err := c.call(ctx, http.MethodDelete, "/plugins/keys/"+pos[0], nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "%s removed\n", pos[0])
		return nil
	}
	return usagef("plugin keys: unknown subcommand %q", sub)
}
