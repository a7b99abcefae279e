package config_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"devhost/host/config"
)

// accessors are the Config methods that take (namespace, key, ...); a typo in either reads
// a zero value (or fails at run time). The generated constants of keys.go make a typo a
// compile error; where the code still writes a literal pair, it must name a key of the
// built-in descriptors.
var accessors = map[string]int{"Int": 2, "Float": 2, "Bool": 2, "String": 2, "Blob": 2, "Get": 2, "Set": 3}

// TestLiteralKeysExist reads every Go file of the repository (tests and testdata aside) and
// checks each call of a configuration accessor whose namespace and key are string literals.
func TestLiteralKeysExist(t *testing.T) {
	known := map[string]map[string]bool{}
	for _, ns := range config.Builtin() {
		known[ns.Name] = map[string]bool{config.VersionKey: true}
		for _, k := range ns.Keys {
			known[ns.Name][k.Name] = true
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "node_modules", ".git", ".cache":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, lp := range literalPairs(f) {
			if strings.HasPrefix(lp.ns, "f_") {
				continue // a run-time namespace: its own descriptor, registered at run time, owns its keys
			}
			checked++
			if keys, ok := known[lp.ns]; !ok {
				t.Errorf("%s: namespace %q is not a built-in namespace", fset.Position(lp.pos), lp.ns)
			} else if !keys[lp.key] {
				t.Errorf("%s: %s.%s is not a key of the %s descriptor", fset.Position(lp.pos), lp.ns, lp.key, lp.ns)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d literal pairs checked", checked)
}

// literalPair is one accessor call with a literal namespace and key.
type literalPair struct {
	pos     token.Pos
	ns, key string
}

// literalPairs finds the accessor calls of f whose namespace and key are string literals.
func literalPairs(f *ast.File) []literalPair {
	var out []literalPair
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if n, ok := accessors[sel.Sel.Name]; !ok || n != len(call.Args) {
			return true
		}
		ns, ok1 := stringLit(call.Args[0])
		key, ok2 := stringLit(call.Args[1])
		if ok1 && ok2 && config.ValidNamespaceName(ns) {
			out = append(out, literalPair{call.Pos(), ns, key})
		}
		return true
	})
	return out
}

// The scanner itself: it must see the pairs a reader would, and only those.
func TestLiteralPairsScanner(t *testing.T) {
	const src = `package p
func f() {
	_ = d.cfg.Int("sk", "batch_ms")
	_ = cfg.String("httpd", "api_key")
	_ = c.Set("time", "tz", "UTC")
	_ = fs.String("sign-key", "", "usage")
	_ = cfg.Int(config.NsSK, config.SKBatchMS)
	_ = cfg.String("time", k)
}`
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, lp := range literalPairs(f) {
		got = append(got, lp.ns+"."+lp.key)
	}
	if want := []string{"sk.batch_ms", "httpd.api_key", "time.tz"}; !slices.Equal(got, want) {
		t.Fatalf("found %v, want %v", got, want)
	}
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
