// Command gen turns canboat's PGN database into the Go tables of package pgn. It fetches the
// pinned npm package @canboat/pgns with `npm pack` into <repo>/.cache/n2k (git-ignored;
// reused when present), reads canboat.json from the tarball and writes the tables with the
// database's license notice on top. -json reads a canboat.json already on disk instead.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Package is the pinned database release.
const Package = "@canboat/pgns@6.0.2"

type dbField struct {
	Order                               int
	Id, Name, Description, FieldType    string
	BitLength, BitOffset                *int
	BitLengthVariable                   bool
	Signed                              bool
	Resolution, Offset, RangeMax        *float64
	Unit                                string
	LookupEnumeration                   string
	LookupBitEnumeration                string
	LookupIndirectEnumeration           string
	LookupIndirectEnumerationFieldOrder int
	Match                               *int64
	Condition                           string
	PartOfPrimaryKey                    bool
}

type dbPGN struct {
	PGN                          uint32
	Id, Description, Type        string
	Length                       int
	Fallback                     bool
	Fields                       []dbField
	RepeatingFieldSet1StartField int
	RepeatingFieldSet1Size       int
	RepeatingFieldSet1CountField int
	RepeatingFieldSet2StartField int
	RepeatingFieldSet2Size       int
	RepeatingFieldSet2CountField int
}

type db struct {
	Version, License, Copyright string
	PGNs                        []dbPGN
	LookupEnumerations          []lookupEnum
	LookupBitEnumerations       []bitEnum
	LookupIndirectEnumerations  []indirectEnum
}

// The lookup enumerations: a name and its values, by number, by bit or by two numbers.
type (
	lookupEnum struct {
		Name       string
		EnumValues []enumValue
	}
	enumValue struct {
		Name  string
		Value int64
	}
	bitEnum struct {
		Name          string
		EnumBitValues []bitValue
	}
	bitValue struct {
		Name string
		Bit  int
	}
	indirectEnum struct {
		Name       string
		EnumValues []indirectValue
	}
	indirectValue struct {
		Name           string
		Value1, Value2 int64
	}
)

func main() {
	out := flag.String("out", "tables_gen.go", "Go file to write")
	jsonPath := flag.String("json", "", "read this canboat.json instead of fetching "+Package)
	flag.Parse()
	if err := run(*out, *jsonPath); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(out, jsonPath string) error {
	var raw []byte
	var err error
	if jsonPath != "" {
		raw, err = os.ReadFile(jsonPath)
	} else {
		raw, err = fetch()
	}
	if err != nil {
		return err
	}
	var d db
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("canboat.json: %w", err)
	}
	src, err := render(&d)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}

// writeLookups closes the literal before it and writes "var decl{...}": one line per table,
// its name and its entries as entry formats them.
func writeLookups[T, V any](b *bytes.Buffer, decl string, tables []T, table func(T) (string, []V), entry func(V) string) {
	fmt.Fprintf(b, "}\n\nvar %s{\n", decl)
	for _, t := range tables {
		name, vs := table(t)
		fmt.Fprintf(b, "%q: {", name)
		for _, v := range vs {
			b.WriteString(entry(v) + ", ")
		}
		b.WriteString("},\n")
	}
}

// repoRoot walks up from the working directory to the directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// fetch answers canboat.json of the pinned package, packing it with npm once.
func fetch() ([]byte, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	cache := filepath.Join(root, ".cache", "n2k")
	tgz := filepath.Join(cache, "canboat-pgns-"+strings.TrimPrefix(Package, "@canboat/pgns@")+".tgz")
	if _, err := os.Stat(tgz); err != nil {
		if err := os.MkdirAll(cache, 0o755); err != nil {
			return nil, err
		}
		cmd := exec.Command("npm", "pack", "--silent", "--pack-destination", cache, Package)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("npm pack %s: %w", Package, err)
		}
	}
	f, err := os.Open(tgz)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tgz, err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, fmt.Errorf("%s: no package/canboat.json", tgz)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", tgz, err)
		}
		if h.Name == "package/canboat.json" {
			return io.ReadAll(tr)
		}
	}
}

func fl(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func render(d *db) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by plugins/n2k/pgn/gen from canboat.json (" + Package + "); DO NOT EDIT.\n//\n")
	b.WriteString("// The PGN definitions below are derived from CANboat's PGN database:\n//\n")
	for _, l := range strings.Split(strings.TrimSpace(d.Copyright), "\n") {
		b.WriteString(strings.TrimRight("// \t"+l, " \t") + "\n")
	}
	b.WriteString("//\n// Database license: " + d.License + "\n\npackage pgn\n\n")
	fmt.Fprintf(&b, "const dbVersion = %q\n\n", d.Version)

	pgns := append([]dbPGN(nil), d.PGNs...)
	// Stable by number, fallback definitions after the others (database order kept).
	sort.SliceStable(pgns, func(i, j int) bool {
		if pgns[i].PGN != pgns[j].PGN {
			return pgns[i].PGN < pgns[j].PGN
		}
		return !pgns[i].Fallback && pgns[j].Fallback
	})
	b.WriteString("var definitions = []PGN{\n")
	for _, p := range pgns {
		fmt.Fprintf(&b, "{PGN: %d, ID: %q, Description: %q, Type: %q", p.PGN, p.Id, p.Description, p.Type)
		if p.Length > 0 {
			fmt.Fprintf(&b, ", Length: %d", p.Length)
		}
		if p.Fallback {
			b.WriteString(", Fallback: true")
		}
		if p.RepeatingFieldSet1Size > 0 {
			fmt.Fprintf(&b, ", Rep1Start: %d, Rep1Size: %d, Rep1Count: %d", p.RepeatingFieldSet1StartField, p.RepeatingFieldSet1Size, p.RepeatingFieldSet1CountField)
		}
		if p.RepeatingFieldSet2Size > 0 {
			fmt.Fprintf(&b, ", Rep2Start: %d, Rep2Size: %d, Rep2Count: %d", p.RepeatingFieldSet2StartField, p.RepeatingFieldSet2Size, p.RepeatingFieldSet2CountField)
		}
		b.WriteString(", Fields: []Field{\n")
		for _, f := range p.Fields {
			fmt.Fprintf(&b, "{ID: %q, Name: %q, Type: %q", f.Id, f.Name, f.FieldType)
			if f.Match != nil && f.Description != "" {
				fmt.Fprintf(&b, ", Description: %q", f.Description)
			}
			if f.BitOffset != nil {
				fmt.Fprintf(&b, ", BitOffset: %d", *f.BitOffset)
			} else {
				b.WriteString(", BitOffset: -1")
			}
			if f.BitLength != nil {
				fmt.Fprintf(&b, ", BitLength: %d", *f.BitLength)
			}
			if f.BitLengthVariable {
				b.WriteString(", VarLength: true")
			}
			if f.Signed {
				b.WriteString(", Signed: true")
			}
			if f.Resolution != nil && *f.Resolution != 0 {
				fmt.Fprintf(&b, ", Resolution: %s", fl(*f.Resolution))
			}
			if f.Offset != nil && *f.Offset != 0 {
				fmt.Fprintf(&b, ", Offset: %s", fl(*f.Offset))
			}
			if f.RangeMax != nil {
				fmt.Fprintf(&b, ", RangeMax: %s, HasRange: true", fl(*f.RangeMax))
			}
			if f.Unit != "" {
				fmt.Fprintf(&b, ", Unit: %q", f.Unit)
			}
			if f.LookupEnumeration != "" {
				fmt.Fprintf(&b, ", Lookup: %q", f.LookupEnumeration)
			}
			if f.LookupBitEnumeration != "" {
				fmt.Fprintf(&b, ", BitLookup: %q", f.LookupBitEnumeration)
			}
			if f.LookupIndirectEnumeration != "" {
				fmt.Fprintf(&b, ", Indirect: %q, IndirectIx: %d", f.LookupIndirectEnumeration, f.LookupIndirectEnumerationFieldOrder)
			}
			if f.Match != nil {
				fmt.Fprintf(&b, ", Match: %d, HasMatch: true", *f.Match)
			}
			if f.Condition != "" {
				fmt.Fprintf(&b, ", Condition: %q", f.Condition)
			}
			if f.PartOfPrimaryKey {
				b.WriteString(", PrimaryKey: true")
			}
			b.WriteString("},\n")
		}
		b.WriteString("}},\n")
	}
	b.WriteString("}\n\nvar pgnIndex = []indexEntry{\n")
	for i := 0; i < len(pgns); {
		j := i
		for j < len(pgns) && pgns[j].PGN == pgns[i].PGN {
			j++
		}
		fmt.Fprintf(&b, "{%d, %d, %d},\n", pgns[i].PGN, i, j)
		i = j
	}
	writeLookups(&b, "lookups = map[string]map[int64]string", d.LookupEnumerations,
		func(e lookupEnum) (string, []enumValue) { return e.Name, e.EnumValues },
		func(v enumValue) string { return fmt.Sprintf("%d: %q", v.Value, v.Name) })
	writeLookups(&b, "bitLookups = map[string]map[int]string", d.LookupBitEnumerations,
		func(e bitEnum) (string, []bitValue) { return e.Name, e.EnumBitValues },
		func(v bitValue) string { return fmt.Sprintf("%d: %q", v.Bit, v.Name) })
	writeLookups(&b, "indirectLookups = map[string]map[[2]int64]string", d.LookupIndirectEnumerations,
		func(e indirectEnum) (string, []indirectValue) { return e.Name, e.EnumValues },
		func(v indirectValue) string { return fmt.Sprintf("{%d, %d}: %q", v.Value1, v.Value2, v.Name) })
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		return nil, fmt.Errorf("format: %w", err)
	}
	return src, nil
}
