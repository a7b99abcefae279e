package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"devhost/abi"
)

// The plugin author's side of devctl: `plugin new` writes a plugin project that lives
// anywhere on disk and builds against this checkout's abi and sdk modules (replace
// directives: the modules are not published), and `plugin build` compiles a project for the
// device and packs and signs the bundle as `plugin pack` does.
//
//	devctl plugin new DIR [--id ID] [--src CHECKOUT]
//	devctl plugin build [DIR] [--out FILE] [--sign-key FILE]

// sourceDir is the devhost checkout devctl was built from; `make build` sets it
// (-ldflags -X main.sourceDir=...), so an installed devctl still finds the SDK.
var sourceDir string

// pluginAuthoring handles `plugin new` and `plugin build` and passes every other plugin
// subcommand on.
func (a *app) pluginAuthoring(ctx context.Context, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "new":
			return a.pluginNew(args[1:])
		case "build":
			return a.pluginBuild(ctx, args[1:])
		case "help", "-h", "--help", "-help":
			fmt.Fprint(a.stdout, authoringUsage)
		}
	}
	return a.plugin(ctx, args)
}

const authoringUsage = `usage:
  devctl plugin new DIR [--id ID] [--src CHECKOUT]
  devctl plugin build [DIR] [--out FILE] [--sign-key FILE]

new writes a plugin project in DIR (go.mod, main.go, main_test.go, manifest.json, README.md):
the id defaults to DIR's name; the project requires devhost/sdk and devhost/abi from the
devhost checkout (--src, else $DEVHOST_SRC, else the checkout devctl was built from). build
compiles DIR (default .) with GOOS=wasip1 GOARCH=wasm and writes the signed bundle, by default
DIR/<id>-<version>.devplug.

`

// checkout finds the devhost source tree whose abi and sdk modules a plugin project uses.
func (a *app) checkout(flagDir string) (string, error) {
	// A checkout named on the command line or in the environment is the only one tried.
	var tried, cands []string
	switch env := a.getenv("DEVHOST_SRC"); {
	case flagDir != "":
		cands = []string{flagDir}
	case env != "":
		cands = []string{env}
	default:
		cands = []string{sourceDir}
		if exe, err := os.Executable(); err == nil {
			cands = append(cands, filepath.Dir(filepath.Dir(exe))) // bin/devctl in a checkout
		}
	}
	for _, c := range cands {
		if c == "" {
			continue
		}
		abs, err := filepath.Abs(c)
		if err != nil {
			continue
		}
		if moduleName(filepath.Join(abs, "sdk", "go.mod")) == "devhost/sdk" &&
			moduleName(filepath.Join(abs, "abi", "go.mod")) == "devhost/abi" {
			return abs, nil
		}
		tried = append(tried, abs)
	}
	return "", fmt.Errorf("no devhost checkout with abi/ and sdk/ found (tried %s): give --src or $DEVHOST_SRC",
		strings.Join(tried, ", "))
}

// moduleName reads the module path of a go.mod file ("" when unreadable).
func moduleName(gomod string) string {
	return goModLine(gomod, "module")
}

// goModLine answers the argument of the first directive named verb in a go.mod file.
func goModLine(gomod, verb string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), verb+" "); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

func (a *app) pluginNew(args []string) error {
	flags := newFlags("plugin new")
	id := flags.String("id", "", "the plugin id (default: DIR's name)")
	src := flags.String("src", "", "the devhost checkout whose abi and sdk the project uses")
	dir, err := parseOne(flags, args, "DIR", "")
	if err != nil {
		return err
	}
	if *id == "" {
		*id = strings.ToLower(strings.ReplaceAll(filepath.Base(filepath.Clean(dir)), "-", "_"))
	}
	if !abi.ValidID(*id) {
		return usagef("plugin new: %q is not a plugin id (^[a-z][a-z0-9_]{0,11}$): give --id", *id)
	}
	root, err := a.checkout(*src)
	if err != nil {
		return err
	}
	files, err := projectFiles(*id, root)
	if err != nil {
		return err
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("plugin new: %s exists and is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("plugin new: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("plugin new: %w", err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.text), 0o644); err != nil {
			return fmt.Errorf("plugin new: %w", err)
		}
	}
	fmt.Fprintf(a.stdout, "plugin %s in %s (sdk from %s)\n", *id, dir, root)
	return nil
}

type projectFile struct{ name, text string }

// projectFiles renders the new project; the manifest is checked by the device's own rules.
func projectFiles(id, root string) ([]projectFile, error) {
	goVersion := goModLine(filepath.Join(root, "sdk", "go.mod"), "go")
	if goVersion == "" {
		return nil, fmt.Errorf("plugin new: no go directive in %s", filepath.Join(root, "sdk", "go.mod"))
	}
	r := strings.NewReplacer("{{ID}}", id, "{{NAME}}", strings.ToUpper(id[:1])+id[1:], "{{GO}}", goVersion,
		"{{ABI_DIR}}", filepath.Join(root, "abi"), "{{SDK_DIR}}", filepath.Join(root, "sdk"),
		"{{ABI}}", fmt.Sprint(abi.Version))
	files := []projectFile{
		{"go.mod", r.Replace(tmplGoMod)},
		{"main.go", r.Replace(tmplMain)},
		{"main_test.go", r.Replace(tmplTest)},
		{"manifest.json", r.Replace(tmplManifest)},
		{"README.md", r.Replace(tmplReadme)},
		{".gitignore", "*.wasm\n*.devplug\n"},
	}
	if _, err := abi.ParseManifest([]byte(files[3].text)); err != nil {
		return nil, fmt.Errorf("plugin new: %w", err)
	}
	return files, nil
}

func (a *app) pluginBuild(ctx context.Context, args []string) error {
	flags := newFlags("plugin build")
	out := flags.String("out", "", "the bundle to write (default DIR/<id>-<version>.devplug)")
	keyPath := flags.String("sign-key", "", "the signing key")
	dir, err := parseOne(flags, args, "DIR", ".")
	if err != nil {
		return err
	}
	man, m, err := readManifest(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return fmt.Errorf("plugin build: %w", err)
	}
	mod, err := compileWasm(ctx, dir)
	if err != nil {
		return err
	}
	if err := a.pack(m, man, mod, *keyPath, *out, dir); err != nil {
		return fmt.Errorf("plugin build: %w", err)
	}
	return nil
}

// compileWasm builds the main package in dir as the device loads it: a wasip1 reactor
// (-buildmode=c-shared), whose initialisers run at instantiation and whose main never does.
func compileWasm(ctx context.Context, dir string) ([]byte, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("plugin build: the go command is not on PATH: %w", err)
	}
	tmp, err := os.MkdirTemp("", "devctl-build")
	if err != nil {
		return nil, fmt.Errorf("plugin build: %w", err)
	}
	defer os.RemoveAll(tmp)
	wasm := filepath.Join(tmp, "plugin.wasm")
	cmd := exec.CommandContext(ctx, goTool, "build", "-buildmode=c-shared", "-trimpath", "-o", wasm, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("plugin build: go build: %w\n%s", err, stderr.Bytes())
	}
	mod, err := os.ReadFile(wasm)
	if err != nil {
		return nil, fmt.Errorf("plugin build: %w", err)
	}
	return mod, nil
}

const tmplGoMod = `module {{ID}}

go {{GO}}

require (
	devhost/abi v0.0.0-00010101000000-000000000000
	devhost/sdk v0.0.0-00010101000000-000000000000
)

// The devhost plugin modules come from a devhost checkout.
replace (
	devhost/abi => {{ABI_DIR}}
	devhost/sdk => {{SDK_DIR}}
)
`

const tmplMain = `// Command {{ID}} is a devhost plugin: it publishes its uptime to Signal K every ten seconds.
package main

import (
	"time"

	"devhost/sdk"
)

// Handlers are registered from init: the device instantiates the module, which runs its
// initialisers, and then calls the handlers; main is never called.
func init() {
	sdk.Register(&sdk.Plugin{
		OnInit: func(info sdk.Info) error {
			_ = sdk.Logf(sdk.LevelInfo, "hello from %s %s", info.ID, info.Version)
			return sdk.SetTimer(1, time.Second, 10*time.Second)
		},
		OnTimer: func(id uint32) {
			c, err := sdk.Now()
			if err != nil {
				_ = sdk.Logf(sdk.LevelWarn, "clock: %v", err)
				return
			}
			_ = sdk.Publish("environment.{{ID}}.uptime", c.Uptime.Seconds())
		},
	})
}

func main() {}
`

const tmplTest = `//go:build !wasip1

package main

import (
	"testing"
	"time"

	"devhost/sdk"
)

// start runs the plugin against the SDK's fake host, granted what manifest.json asks for.
func start(t *testing.T) *sdk.FakeHost {
	t.Helper()
	m, err := sdk.ReadManifest("manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	h := &sdk.FakeHost{Manifest: m}
	if err := h.Start(nil); err != nil { // nil: the plugin registered by init
		t.Fatal(err)
	}
	return h
}

func TestPublishesUptime(t *testing.T) {
	h := start(t)
	if err := h.Advance(11 * time.Second); err != nil { // the timer fires at 1 s and 11 s
		t.Fatal(err)
	}
	if got := h.Values()["environment.{{ID}}.uptime"]; got.Num != 11 {
		t.Fatalf("uptime %+v, want 11", got)
	}
	if len(h.Logs) == 0 {
		t.Fatal("no greeting logged")
	}
}
`

const tmplManifest = `{
  "id": "{{ID}}",
  "name": "{{NAME}}",
  "version": "0.1.0",
  "abi": {{ABI}},
  "description": "Publishes its uptime every ten seconds",
  "capabilities": ["log", "timer", "clock", "signalk.publish"]
}
`

const tmplReadme = "# {{NAME}}\n\n" +
	"A devhost plugin. The SDK's guide is {{SDK_DIR}}/README.md; the ABI is {{ABI_DIR}}/ABI.md.\n\n" +
	"```sh\n" +
	"go test ./...              # natively, against the SDK's fake host\n" +
	"devctl plugin build        # {{ID}}-0.1.0.devplug, signed with the development key\n" +
	"devctl plugin install --url http://127.0.0.1:8080 --grant-all {{ID}}-0.1.0.devplug\n" +
	"```\n"
