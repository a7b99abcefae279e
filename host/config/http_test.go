package config

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func (f *fixture) server(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	for _, rt := range f.c.Routes() {
		if rt.Public {
			t.Fatalf("%s %s is public", rt.Method, rt.Path)
		}
		mux.HandleFunc(rt.Method+" /api/v1"+rt.Path, rt.Handler)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, method, url, body string, hdr map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b}
}

func errBody(t *testing.T, r reply) (code string, path *string) {
	t.Helper()
	var e struct {
		Error string  `json:"error"`
		Path  *string `json:"path"`
	}
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body %q: %v", r.body, err)
	}
	return e.Error, e.Path
}

func TestGetConfig(t *testing.T) {
	f := newFixture(t)
	srv := f.server(t)
	base := srv.URL + "/api/v1/config"
	cases := []struct {
		name   string
		query  string
		status int
		code   string
		nsOnly string
	}{
		{"whole document", "", 200, "", ""},
		{"one namespace", "?ns=wifi", 200, "", "wifi"},
		{"unknown namespace", "?ns=nope", 404, "unknown_namespace", ""},
		{"namespace longer than 15", "?ns=abcdefghijklmnop", 404, "unknown_namespace", ""},
		{"empty ns", "?ns=", 404, "unknown_namespace", ""},
		{"other parameter", "?x=1", 400, "validation", ""},
		{"ns twice", "?ns=wifi&ns=net", 400, "validation", ""},
		{"malformed query", "?ns=%zz", 400, "validation", ""},
		{"query of 127 bytes", "?ns=wifi&" + strings.Repeat("a", 127-len("ns=wifi&")), 400, "validation", ""},
		{"query of 128 bytes", "?ns=wifi&" + strings.Repeat("a", 128-len("ns=wifi&")), 414, "uri_too_long", ""},
		{"query of 128 bytes, valid ns", "?ns=" + strings.Repeat("a", 125), 414, "uri_too_long", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, "GET", base+tc.query, "", nil)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			if tc.code != "" {
				if code, _ := errBody(t, r); code != tc.code {
					t.Fatalf("error %q, want %q", code, tc.code)
				}
				return
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
			if cc := r.header.Get("Cache-Control"); cc != "no-store" {
				t.Fatalf("Cache-Control %q", cc)
			}
			var doc map[string]map[string]any
			if err := json.Unmarshal(r.body, &doc); err != nil {
				t.Fatal(err)
			}
			if tc.nsOnly != "" {
				if len(doc) != 1 || doc[tc.nsOnly] == nil {
					t.Fatalf("ns filter returned %v", doc)
				}
				return
			}
			if doc["httpd"]["port"] != float64(80) || doc["sk"]["scheme"] != "auto" {
				t.Fatalf("document lacks defaults: %v", doc)
			}
		})
	}
}

func TestPutConfig(t *testing.T) {
	f := newFixture(t)
	srv := f.server(t)
	url := srv.URL + "/api/v1/config"
	json := map[string]string{"Content-Type": "application/json"}

	r := do(t, "PUT", url, `{"httpd":{"port":8080},"time":{"tz":"CET-1"}}`, json)
	if r.status != 200 || strings.TrimSpace(string(r.body)) != `{"changed":["httpd.port","time.tz"],"restart_required":true}` {
		t.Fatalf("PUT = %d %s", r.status, r.body)
	}
	r = do(t, "PUT", url, `{"time":{"tz":"CET-1"}}`, json)
	if r.status != 200 || strings.TrimSpace(string(r.body)) != `{"changed":[],"restart_required":false}` {
		t.Fatalf("unchanged PUT = %d %s", r.status, r.body)
	}
	r = do(t, "PUT", url, `{"httpd":{"port":70000}}`, json)
	if code, path := errBody(t, r); r.status != 400 || code != "validation" || path == nil || *path != "httpd.port" {
		t.Fatalf("bad PUT = %d %s", r.status, r.body)
	}
	r = do(t, "PUT", url, `{"httpd":{"port":1}} trailing`, json)
	if code, path := errBody(t, r); r.status != 400 || code != "validation" || path == nil || *path != "" {
		t.Fatalf("trailing data PUT = %d %s", r.status, r.body)
	}
	f.st.FailWritesForTest(errors.New("flash gone"))
	r = do(t, "PUT", url, `{"httpd":{"port":81}}`, json)
	if code, _ := errBody(t, r); r.status != 500 || code != "write_failed" {
		t.Fatalf("PUT with failing storage = %d %s", r.status, r.body)
	}
	f.st.FailWritesForTest(nil)
	if f.c.Int("httpd", "port") != 8080 {
		t.Fatal("port changed by a failed write")
	}
}

func TestGetSchema(t *testing.T) {
	f := newFixture(t)
	srv := f.server(t)
	url := srv.URL + "/api/v1/config/schema"
	r := do(t, "GET", url, "", nil)
	etag := r.header.Get("ETag")
	if r.status != 200 || r.header.Get("Content-Type") != "application/schema+json" || etag == "" ||
		r.header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("GET schema = %d %v", r.status, r.header)
	}
	body, want := f.c.Schema()
	if string(r.body) != string(body) || etag != want {
		t.Fatal("served schema differs from Schema()")
	}
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		r := do(t, "GET", url, "", map[string]string{"If-None-Match": inm})
		if r.status != 304 || len(r.body) != 0 || r.header.Get("ETag") != etag {
			t.Fatalf("If-None-Match %s = %d, body %d bytes", inm, r.status, len(r.body))
		}
	}
	r = do(t, "GET", url, "", map[string]string{"If-None-Match": `"stale"`})
	if r.status != 200 || len(r.body) == 0 {
		t.Fatalf("stale If-None-Match = %d", r.status)
	}
	// A run-time namespace invalidates the cached copy.
	if err := f.c.Register(plugNS("f_x")); err != nil {
		t.Fatal(err)
	}
	r = do(t, "GET", url, "", map[string]string{"If-None-Match": etag})
	if r.status != 200 || r.header.Get("ETag") == etag || !strings.Contains(string(r.body), `"f_x"`) {
		t.Fatalf("after Register: %d etag %s", r.status, r.header.Get("ETag"))
	}
}
