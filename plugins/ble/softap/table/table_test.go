package table

import "testing"

func TestCookie(t *testing.T) {
	for header, want := range map[string]string{
		"":                              "",
		"session=ab12":                  "ab12",
		`lang=en; session="ab12"; x=1`:  "ab12",
		"sessionx=1; other=session=2":   "",
		"  session=cd ;session=ignored": "cd",
	} {
		if got := Cookie(header); got != want {
			t.Errorf("Cookie(%q) = %q, want %q", header, got, want)
		}
	}
}

func TestIsEndpoint(t *testing.T) {
	for path, want := range map[string]bool{"/prov-session": true, "/proto-ver": true, "prov-session": false, "/prov": false, "/api/v1/prov-session": false} {
		if IsEndpoint(path) != want {
			t.Errorf("IsEndpoint(%q) != %v", path, want)
		}
	}
}
