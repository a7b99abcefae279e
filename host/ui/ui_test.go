package ui

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func gzipped(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// partition builds a UI partition in a temp dir and returns its path.
func partition(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	dir := filepath.Join(base, "ui")
	files := map[string]string{
		"index.html":            "<html>INDEX</html>",
		"robots.txt":            "ROBOTS",
		"LICENSE":               "LICENSE-TEXT",
		"assets/app.js":         "PLAIN-JS",
		"assets/app.js.gz":      gzipped(t, "GZ-JS"),
		"assets/only.css.gz":    gzipped(t, "body{}"),
		"assets/logo.png":       "PNG",
		"assets/font.woff2":     "WOFF2",
		"docs/page.html":        "PAGE",
		"dir.d/inner.txt":       "INNER",
		"a%2e%2eb.txt":          "ODD",
		"../outside-secret.txt": "SECRET",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"escape.txt":     "../outside-secret.txt",
		"absolute.txt":   filepath.Join(base, "outside-secret.txt"),
		"escape-dir":     "..",
		"link.txt":       "robots.txt",
		"assets/lnk.png": "logo.png",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

type want struct {
	status   int
	body     string // exact body; for errors the JSON `error` code
	encoding string
	cache    string
	ctype    string
	vary     bool
	allow    string
}

func serve(u *UI, method, target, acceptEncoding string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	rec := httptest.NewRecorder()
	u.ServeHTTP(rec, req)
	return rec
}

func check(t *testing.T, rec *httptest.ResponseRecorder, w want) {
	t.Helper()
	if rec.Code != w.status {
		t.Fatalf("status %d, want %d (body %q)", rec.Code, w.status, rec.Body.String())
	}
	h := rec.Header()
	if w.status >= 400 {
		var e struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error != w.body {
			t.Fatalf("error body %q, want error %q", rec.Body.String(), w.body)
		}
		if ct := h.Get("Content-Type"); ct != "application/json" {
			t.Fatalf("error content type %q", ct)
		}
		if h.Get("Content-Encoding") != "" {
			t.Fatal("error carries a content encoding")
		}
	} else if got := rec.Body.String(); got != w.body {
		t.Fatalf("body %q, want %q", got, w.body)
	}
	if w.encoding != h.Get("Content-Encoding") {
		t.Fatalf("Content-Encoding %q, want %q", h.Get("Content-Encoding"), w.encoding)
	}
	if w.cache != "" && h.Get("Cache-Control") != w.cache {
		t.Fatalf("Cache-Control %q, want %q", h.Get("Cache-Control"), w.cache)
	}
	if w.ctype != "" && h.Get("Content-Type") != w.ctype {
		t.Fatalf("Content-Type %q, want %q", h.Get("Content-Type"), w.ctype)
	}
	if gotVary := h.Get("Vary") == "Accept-Encoding"; gotVary != w.vary {
		t.Fatalf("Vary %q, want Accept-Encoding: %v", h.Get("Vary"), w.vary)
	}
	if h.Get("Allow") != w.allow {
		t.Fatalf("Allow %q, want %q", h.Get("Allow"), w.allow)
	}
}

const (
	html      = "text/html; charset=utf-8"
	js        = "text/javascript; charset=utf-8"
	immutable = "public, max-age=31536000, immutable"
	index     = "<html>INDEX</html>"
)

func TestServeTable(t *testing.T) {
	u := New(partition(t), nil)
	gzJS := gzipped(t, "GZ-JS")
	cases := []struct {
		name, method, target, ae string
		want                     want
	}{
		// index and SPA fallback
		{"root", "GET", "/", "", want{200, index, "", "no-cache", html, true, ""}},
		{"index by name", "GET", "/index.html", "", want{200, index, "", "no-cache", html, true, ""}},
		{"spa route", "GET", "/settings/wifi", "", want{200, index, "", "no-cache", html, true, ""}},
		{"spa route query", "GET", "/logs?after=5", "", want{200, index, "", "no-cache", html, true, ""}},
		{"trailing slash", "GET", "/settings/", "", want{200, index, "", "no-cache", html, true, ""}},
		{"directory not listed", "GET", "/assets", "", want{200, index, "", "no-cache", html, true, ""}},
		{"directory slash not listed", "GET", "/docs/", "", want{200, index, "", "no-cache", html, true, ""}},
		{"assets fallback not immutable", "GET", "/assets/route", "", want{200, index, "", "no-cache", html, true, ""}},
		{"extension-less file exists", "GET", "/LICENSE", "", want{200, "LICENSE-TEXT", "", "no-cache", "application/octet-stream", true, ""}},

		// plain files and cache rules
		{"plain file", "GET", "/robots.txt", "", want{200, "ROBOTS", "", "no-cache", "text/plain; charset=utf-8", true, ""}},
		{"nested html", "GET", "/docs/page.html", "", want{200, "PAGE", "", "no-cache", html, true, ""}},
		{"asset immutable", "GET", "/assets/logo.png", "gzip", want{200, "PNG", "", immutable, "image/png", true, ""}},
		{"asset font type", "GET", "/assets/font.woff2", "", want{200, "WOFF2", "", immutable, "font/woff2", true, ""}},
		{"symlink inside", "GET", "/link.txt", "", want{200, "ROBOTS", "", "no-cache", "", true, ""}},
		{"symlink inside assets", "GET", "/assets/lnk.png", "", want{200, "PNG", "", immutable, "image/png", true, ""}},
		{"percent-encoded name", "GET", "/assets/app%2Ejs", "", want{200, "PLAIN-JS", "", immutable, js, true, ""}},

		// gzip preference
		{"gz preferred", "GET", "/assets/app.js", "gzip, deflate, br", want{200, gzJS, "gzip", immutable, js, true, ""}},
		{"gz x-gzip", "GET", "/assets/app.js", "x-gzip", want{200, gzJS, "gzip", immutable, js, true, ""}},
		{"gz via star", "GET", "/assets/app.js", "br;q=1, *;q=0.5", want{200, gzJS, "gzip", immutable, js, true, ""}},
		{"gz refused q0", "GET", "/assets/app.js", "gzip;q=0, br", want{200, "PLAIN-JS", "", immutable, js, true, ""}},
		{"gz refused star q0", "GET", "/assets/app.js", "*;q=0", want{200, "PLAIN-JS", "", immutable, js, true, ""}},
		{"no accept-encoding", "GET", "/assets/app.js", "", want{200, "PLAIN-JS", "", immutable, js, true, ""}},
		{"gz only accepted", "GET", "/assets/only.css", "gzip", want{200, gzipped(t, "body{}"), "gzip", immutable, "text/css; charset=utf-8", true, ""}},
		{"gz only decompressed", "GET", "/assets/only.css", "identity", want{200, "body{}", "", immutable, "text/css; charset=utf-8", true, ""}},
		{"gz file by name", "GET", "/assets/app.js.gz", "", want{200, gzJS, "", immutable, "application/gzip", true, ""}},

		// 404 rules
		{"missing with extension", "GET", "/missing.js", "", want{404, "not_found", "", "no-store", "", false, ""}},
		{"missing asset", "GET", "/assets/gone.css", "gzip", want{404, "not_found", "", "no-store", "", false, ""}},
		{"directory with extension", "GET", "/dir.d", "", want{404, "not_found", "", "", "", false, ""}},
		{"file below a file", "GET", "/robots.txt/x.js", "", want{404, "not_found", "", "", "", false, ""}},
		{"api prefix", "GET", "/api/v1/nothing", "", want{404, "not_found", "", "no-store", "", false, ""}},
		{"api bare", "GET", "/api", "", want{404, "not_found", "", "", "", false, ""}},
		{"api encoded", "GET", "/%61pi/v1/x", "", want{404, "not_found", "", "", "", false, ""}},
		{"api post", "POST", "/api/v1/x", "", want{404, "not_found", "", "", "", false, ""}},
		{"escaping symlink", "GET", "/escape.txt", "", want{404, "not_found", "", "", "", false, ""}},
		{"absolute symlink", "GET", "/absolute.txt", "", want{404, "not_found", "", "", "", false, ""}},
		{"symlinked dir escape", "GET", "/escape-dir/outside-secret.txt", "", want{404, "not_found", "", "", "", false, ""}},
		{"symlinked dir escape no ext", "GET", "/escape-dir/x", "", want{404, "not_found", "", "", "", false, ""}},

		// refused paths
		{"dotdot", "GET", "/assets/../robots.txt", "", want{400, "bad_request", "", "", "", false, ""}},
		{"dotdot leading", "GET", "/../outside-secret.txt", "", want{400, "bad_request", "", "", "", false, ""}},
		{"dotdot in name", "GET", "/a..b.txt", "", want{400, "bad_request", "", "", "", false, ""}},
		{"encoded dotdot", "GET", "/%2e%2e/outside-secret.txt", "", want{400, "bad_request", "", "", "", false, ""}},
		{"encoded dotdot upper", "GET", "/assets/%2E%2E/robots.txt", "", want{400, "bad_request", "", "", "", false, ""}},
		{"half encoded dotdot", "GET", "/.%2e/outside-secret.txt", "", want{400, "bad_request", "", "", "", false, ""}},
		{"double encoded dotdot", "GET", "/a%252e%252eb.txt", "", want{400, "bad_request", "", "", "", false, ""}},
		{"double slash", "GET", "//robots.txt", "", want{400, "bad_request", "", "", "", false, ""}},
		{"inner double slash", "GET", "/assets//logo.png", "", want{400, "bad_request", "", "", "", false, ""}},
		{"encoded slash pair", "GET", "/assets%2f%2flogo.png", "", want{400, "bad_request", "", "", "", false, ""}},
		{"encoded backslash", "GET", "/assets%5c..%5crobots.txt", "", want{400, "bad_request", "", "", "", false, ""}},
		{"encoded nul", "GET", "/robots.txt%00.png", "", want{400, "bad_request", "", "", "", false, ""}},
		{"dotdot on post", "POST", "/../x", "", want{400, "bad_request", "", "", "", false, ""}},

		// methods
		{"post", "POST", "/", "", want{405, "method_not_allowed", "", "", "", false, "GET, HEAD"}},
		{"put asset", "PUT", "/assets/app.js", "", want{405, "method_not_allowed", "", "", "", false, "GET, HEAD"}},
		{"delete", "DELETE", "/robots.txt", "", want{405, "method_not_allowed", "", "", "", false, "GET, HEAD"}},
		{"options", "OPTIONS", "/", "", want{405, "method_not_allowed", "", "", "", false, "GET, HEAD"}},
		{"head root", "HEAD", "/", "", want{200, "", "", "no-cache", html, true, ""}},
		{"head gz", "HEAD", "/assets/app.js", "gzip", want{200, "", "gzip", immutable, js, true, ""}},
		{"head decompressed", "HEAD", "/assets/only.css", "", want{200, "", "", immutable, "text/css; charset=utf-8", true, ""}},
		{"head missing", "HEAD", "/missing.js", "", want{404, "", "", "", "", false, ""}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(u, tc.method, tc.target, tc.ae)
			if tc.method == "HEAD" && tc.want.status >= 400 {
				// The recorder keeps the error body; a real server drops it for HEAD.
				if rec.Code != tc.want.status {
					t.Fatalf("status %d, want %d", rec.Code, tc.want.status)
				}
				return
			}
			check(t, rec, tc.want)
		})
	}
}

func TestHeadCarriesLength(t *testing.T) {
	u := New(partition(t), nil)
	rec := serve(u, "HEAD", "/robots.txt", "")
	if rec.Code != 200 || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") != "6" {
		t.Fatalf("%d len=%q body=%q", rec.Code, rec.Header().Get("Content-Length"), rec.Body.String())
	}
}

func TestConditionalRequests(t *testing.T) {
	u := New(partition(t), nil)
	plain := serve(u, "GET", "/assets/app.js", "")
	gz := serve(u, "GET", "/assets/app.js", "gzip")
	pt, gt := plain.Header().Get("ETag"), gz.Header().Get("ETag")
	if pt == "" || gt == "" || pt == gt {
		t.Fatalf("ETags plain %q gzip %q: want two distinct tags", pt, gt)
	}
	if plain.Header().Get("Last-Modified") == "" {
		t.Fatal("no Last-Modified")
	}
	req := httptest.NewRequest("GET", "/assets/app.js", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("If-None-Match", gt)
	rec := httptest.NewRecorder()
	u.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Fatalf("If-None-Match: %d %q", rec.Code, rec.Body.String())
	}
	// The plain tag does not validate the gzip representation.
	req.Header.Set("If-None-Match", pt)
	rec = httptest.NewRecorder()
	u.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("cross-representation match: %d", rec.Code)
	}
	req = httptest.NewRequest("GET", "/robots.txt", nil)
	req.Header.Set("Range", "bytes=1-3")
	rec = httptest.NewRecorder()
	u.ServeHTTP(rec, req)
	if rec.Code != http.StatusPartialContent || rec.Body.String() != "OBO" {
		t.Fatalf("range: %d %q", rec.Code, rec.Body.String())
	}
}

func TestPlaceholderAndAvailability(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ui")
	u := New(dir, nil)
	if u.Available() {
		t.Fatal("missing partition is available")
	}
	placeholderWant := want{200, placeholder, "", "no-cache", html, false, ""}
	check(t, serve(u, "GET", "/", ""), placeholderWant)
	check(t, serve(u, "GET", "/settings", ""), placeholderWant)
	check(t, serve(u, "GET", "/app.js", ""), want{404, "not_found", "", "", "", false, ""})
	check(t, serve(u, "GET", "/index.html", ""), want{404, "not_found", "", "", "", false, ""})
	for _, link := range []string{`href="/api/v1/system/ping"`, `href="/api/v1/config/schema"`, "not installed"} {
		if !strings.Contains(placeholder, link) {
			t.Fatalf("placeholder lacks %s", link)
		}
	}
	head := serve(u, "HEAD", "/", "")
	if head.Code != 200 || head.Body.Len() != 0 || head.Header().Get("Content-Length") == "" {
		t.Fatalf("HEAD placeholder: %d %q", head.Code, head.Body.String())
	}

	// A partition with files but no index.
	if err := os.MkdirAll(filepath.Join(dir, "assets"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "assets", "a.js"), []byte("A"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "index.html"), 0o755); err != nil { // a directory is no index
		t.Fatal(err)
	}
	if u.Available() {
		t.Fatal("available without an index file")
	}
	check(t, serve(u, "GET", "/", ""), placeholderWant)
	check(t, serve(u, "GET", "/assets/a.js", ""), want{200, "A", "", immutable, js, true, ""})

	// Installing the index needs no restart.
	if err := os.Remove(filepath.Join(dir, "index.html")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.html.gz"), []byte(gzipped(t, "ZIPPED")), 0o644); err != nil {
		t.Fatal(err)
	}
	if !u.Available() {
		t.Fatal("index.html.gz not counted as installed")
	}
	check(t, serve(u, "GET", "/", "gzip"), want{200, gzipped(t, "ZIPPED"), "gzip", "no-cache", html, true, ""})
	check(t, serve(u, "GET", "/x", ""), want{200, "ZIPPED", "", "no-cache", html, true, ""})
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte("PLAIN"), 0o644); err != nil {
		t.Fatal(err)
	}
	check(t, serve(u, "GET", "/", ""), want{200, "PLAIN", "", "no-cache", html, true, ""})

	// Removing it brings the placeholder back.
	for _, n := range []string{"index.html", "index.html.gz"} {
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	if u.Available() {
		t.Fatal("still available after removal")
	}
	check(t, serve(u, "GET", "/", ""), placeholderWant)
}

func TestEscapingIndexIsNotAvailable(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "ui")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "evil.html"), []byte("EVIL"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../evil.html", filepath.Join(dir, "index.html")); err != nil {
		t.Fatal(err)
	}
	u := New(dir, nil)
	if u.Available() {
		t.Fatal("an index outside the partition counts as installed")
	}
	check(t, serve(u, "GET", "/", ""), want{200, placeholder, "", "no-cache", html, false, ""})
}

func TestAcceptsGzip(t *testing.T) {
	cases := map[string]bool{
		"":                    false,
		"gzip":                true,
		"GZIP":                true,
		"deflate, gzip;q=1.0": true,
		"gzip;q=0":            false,
		"gzip; q=0.000":       false,
		"gzip;q=0.001":        true,
		"gzip;q=abc":          false,
		"gzip;q=2":            false,
		"*":                   true,
		"*;q=0":               false,
		"gzip;q=0, *":         false,
		"*;q=0, gzip":         true,
		"br, identity":        false,
		"x-gzip;q=0.5":        true,
		" gzip ; Q=0.7 ":      true,
	}
	for in, want := range cases {
		if got := acceptsGzip([]string{in}); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", in, got, want)
		}
	}
	if !acceptsGzip([]string{"br", "gzip"}) {
		t.Error("second header line ignored")
	}
}

func FuzzAcceptsGzip(f *testing.F) {
	for _, s := range []string{"gzip", "gzip;q=0", "*;q=0.5, br", "x-gzip;q=", ";;,,", "gzip;q=1e-3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// Adding an explicit refusal always wins.
		if acceptsGzip([]string{s, "gzip;q=0", "x-gzip;q=0"}) && !strings.Contains(strings.ToLower(s), "gzip") {
			t.Fatalf("%q: explicit refusal ignored", s)
		}
	})
}

// FuzzServePath: whatever the path, the handler never answers a file from outside the
// partition and never answers a path with traversal or a doubled slash.
func FuzzServePath(f *testing.F) {
	for _, s := range []string{"/", "/assets/app.js", "/../outside-secret.txt", "/%2e%2e/x", "//x", "/escape.txt", "/a%252e%252e", "/api/x"} {
		f.Add(s)
	}
	dir := partitionForFuzz(f)
	u := New(dir, nil)
	f.Fuzz(func(t *testing.T, target string) {
		req, err := http.NewRequest("GET", "http://device"+target, nil)
		if err != nil || req.URL.Path == "" || req.URL.Host != "device" {
			return
		}
		rec := httptest.NewRecorder()
		u.ServeHTTP(rec, req)
		if strings.Contains(rec.Body.String(), "SECRET") {
			t.Fatalf("%q leaked a file outside the partition", target)
		}
		if rec.Code == 200 && (strings.Contains(req.URL.Path, "..") || strings.Contains(req.URL.Path, "//")) {
			t.Fatalf("%q served with status 200", target)
		}
	})
}

func partitionForFuzz(f *testing.F) string {
	base := f.TempDir()
	dir := filepath.Join(base, "ui")
	must := func(err error) {
		if err != nil {
			f.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "assets"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "index.html"), []byte("INDEX"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "assets", "app.js"), []byte("JS"), 0o644))
	must(os.WriteFile(filepath.Join(base, "outside-secret.txt"), []byte("SECRET"), 0o644))
	must(os.Symlink("../outside-secret.txt", filepath.Join(dir, "escape.txt")))
	return dir
}
