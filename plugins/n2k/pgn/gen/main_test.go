package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	const in = `{"Version":"9.9","License":"Apache License Version 2.0","Copyright":"(C) someone",
	"PGNs":[{"PGN":2,"Id":"b","Description":"B","Type":"Fast","Fields":[{"Order":1,"Id":"x","Name":"X","FieldType":"NUMBER","BitOffset":0,"BitLength":8,"Resolution":0.5,"RangeMax":127}]},
	{"PGN":1,"Id":"a","Description":"A","Type":"Single","Length":8,"Fields":[{"Order":1,"Id":"m","Name":"M","FieldType":"LOOKUP","BitOffset":0,"BitLength":11,"Match":1855,"Description":"Furuno","LookupEnumeration":"E"}]}],
	"LookupEnumerations":[{"Name":"E","EnumValues":[{"Name":"one","Value":1}]}],
	"LookupBitEnumerations":[],"LookupIndirectEnumerations":[]}`
	var d db
	if err := json.Unmarshal([]byte(in), &d); err != nil {
		t.Fatal(err)
	}
	src, err := render(&d)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for _, want := range []string{`(C) someone`, `Apache License Version 2.0`, `dbVersion = "9.9"`,
		`Match: 1855, HasMatch: true`, `Description: "Furuno"`, `Resolution: 0.5`, `"E": {1: "one"`, "{1, 0, 1},\n\t{2, 1, 2}"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Index(s, `ID: "a"`) > strings.Index(s, `ID: "b"`) {
		t.Error("definitions not sorted by PGN")
	}
}
