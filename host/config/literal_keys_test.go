package config_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"devhost/host/config"
)

// accessors are the Config methods that take (namespace, key, ...); a typo in either reads
// a zero value (or fails at run time), so every literal pair in the code must name a key of
// the built-in descriptors.
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
			if !ok1 || !ok2 || !config.ValidNamespaceName(ns) {
				return true
			}
			checked++
			if keys, ok := known[ns]; !ok {
				t.Errorf("%s: namespace %q is not a built-in namespace", fset.Position(call.Pos()), ns)
			} else if !keys[key] {
				t.Errorf("%s: %s.%s is not a key of the %s descriptor", fset.Position(call.Pos()), ns, key, ns)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The device reads some 25 keys by literal pairs; finding none means the scan is broken.
	t.Logf("%d literal pairs checked", checked)
	if checked < 20 {
		t.Fatalf("checked only %d literal (namespace, key) pairs", checked)
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
