package config

import "testing"

// parseInt's plain-integer shortcut and its general path must agree on every form.
func TestParseInt(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		msg  string
	}{
		{"0", 0, ""},
		{"-0", 0, ""},
		{"7", 7, ""},
		{"-42", -42, ""},
		{"2147483647", 2147483647, ""},
		{"-2147483648", -2147483648, ""},
		{"2147483648", 0, "integer out of range"},
		{"-2147483649", 0, "integer out of range"},
		{"9999999999", 0, "integer out of range"},
		{"12345678901", 0, "integer out of range"},
		{"01", 0, "expected an integer"},
		{"-", 0, "expected an integer"},
		{"", 0, "expected an integer"},
		{"+1", 0, "expected an integer"},
		{"1a", 0, "expected an integer"},
		{"80.0", 80, ""},
		{"8e1", 80, ""},
		{"1.5", 0, "expected an integer"},
		{"1.0000000001", 0, "expected an integer"},
		{"-0.0", 0, ""},
	}
	for _, tc := range cases {
		got, msg := parseInt(tc.in)
		if got != tc.want || msg != tc.msg {
			t.Errorf("parseInt(%q) = %d, %q; want %d, %q", tc.in, got, msg, tc.want, tc.msg)
		}
	}
}
