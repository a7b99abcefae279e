package ota

import (
	"net/url"
	"strings"
	"testing"
)

func TestCompareVersions(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"1.2.10", "1.2.9", 1},
		{"1.2.9", "1.2.10", -1},
		{"1.0.0", "1.0.0", 0},
		{"1.0", "1.0.0", 0},
		{"1.0.1", "1.0", 1},
		{"1.0.0-beta.1", "1.0.0", -1},
		{"1.0.0", "1.0.0-beta.1", 1},
		{"1.0.0-beta.2", "1.0.0-beta.1", 1},
		{"1.0.0-alpha", "1.0.0-beta", -1},
		{"2.0.0-rc.1", "1.9.9", 1},
		{"10.0.0", "9.99.99", 1},
		{"0.1.0-dev", "0.1.0", -1},
		// Unparsable on either side: plain strings.
		{"abc", "abd", -1},
		{"1.x", "1.2", 1},
		{"v1.2.0", "1.3.0", 1},
		{"1.2.0", "", 1},
		{"1..2", "1.0.2", -1},
	}
	for _, c := range cases {
		if got := CompareVersions(c.a, c.b); got != c.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestParseManifest(t *testing.T) {
	base, _ := url.Parse("http://127.0.0.1:8000/fw/manifest.json")
	m, err := ParseManifest([]byte(`{"schema":1,"app":"devhost","builds":[
		{"version":"1.1.0","target":"esp32s3","url":"devhost-1.1.0.img","size":10,"notes":"n"},
		{"version":"1.2.0","target":"esp32s3","url":"/abs/devhost-1.2.0.img","channel":"beta"},
		{"version":"1.3.0","target":"esp32s3","url":"https://example.invalid/x.img"}]}`), base)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ url, channel string }{
		{"http://127.0.0.1:8000/fw/devhost-1.1.0.img", "stable"},
		{"http://127.0.0.1:8000/abs/devhost-1.2.0.img", "beta"},
		{"https://example.invalid/x.img", "stable"},
	}
	for i, w := range want {
		if m.Builds[i].URL != w.url || m.Builds[i].Channel != w.channel {
			t.Errorf("build %d: %+v", i, m.Builds[i])
		}
	}
	bad := map[string]string{
		"schema 2":     `{"schema":2,"builds":[]}`,
		"no version":   `{"schema":1,"builds":[{"target":"esp32s3","url":"a"}]}`,
		"no target":    `{"schema":1,"builds":[{"version":"1","url":"a"}]}`,
		"no url":       `{"schema":1,"builds":[{"version":"1","target":"esp32s3"}]}`,
		"ftp url":      `{"schema":1,"builds":[{"version":"1","target":"esp32s3","url":"ftp://h/a"}]}`,
		"not json":     `<html>`,
		"over 16 KiB":  `{"schema":1,"builds":[],"pad":"` + strings.Repeat("x", MaxManifest) + `"}`,
		"builds typed": `{"schema":1,"builds":{}}`,
	}
	for name, b := range bad {
		if _, err := ParseManifest([]byte(b), base); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestPick(t *testing.T) {
	m := Manifest{Schema: 1, Builds: []Build{
		{Version: "1.1.0", Target: "esp32s3", URL: "u1", Channel: "stable"},
		{Version: "1.3.0", Target: "esp32c3", URL: "u2", Channel: "stable"},
		{Version: "1.2.0-rc.1", Target: "esp32s3", URL: "u3", Channel: "stable"},
		{Version: "1.4.0", Target: "esp32s3", URL: "u4", Channel: "beta"},
		{Version: "1.5.0", Target: "esp32s3", URL: "u5", Channel: "stable", App: "other"},
		{Version: "1.2.0-rc.2", Target: "esp32s3", URL: "u6", Channel: "stable", App: "devhost"},
	}}
	cases := []struct {
		name string
		w    Want
		app  string
		url  string
	}{
		{"newest stable for the target", Want{"devhost", "esp32s3", "stable", "1.0.0"}, "", "u6"},
		{"beta channel", Want{"devhost", "esp32s3", "beta", "1.0.0"}, "", "u4"},
		{"other target", Want{"devhost", "esp32c3", "stable", "1.0.0"}, "", "u2"},
		{"running is newest", Want{"devhost", "esp32s3", "stable", "1.2.0"}, "", ""},
		{"equal is not newer", Want{"devhost", "esp32s3", "stable", "1.2.0-rc.2"}, "", ""},
		{"manifest for another app", Want{"devhost", "esp32s3", "stable", "1.0.0"}, "other", ""},
		{"unknown target", Want{"devhost", "esp32p4", "stable", "0.0.1"}, "", ""},
	}
	for _, c := range cases {
		m.App = c.app
		got := Pick(m, c.w)
		switch {
		case c.url == "" && got != nil:
			t.Errorf("%s: picked %+v", c.name, got)
		case c.url != "" && (got == nil || got.URL != c.url):
			t.Errorf("%s: picked %+v, want %s", c.name, got, c.url)
		}
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"schema":1,"builds":[{"version":"1.0.0","target":"esp32s3","url":"a.img"}]}`))
	base, _ := url.Parse("http://127.0.0.1/m.json")
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest(b, base)
		if err != nil {
			return
		}
		for _, bd := range m.Builds {
			if !strings.HasPrefix(bd.URL, "http://") && !strings.HasPrefix(bd.URL, "https://") {
				t.Fatalf("url %q", bd.URL)
			}
		}
		Pick(m, Want{App: "devhost", Target: "esp32s3", Channel: "stable", Running: "1.0.0"})
	})
}
