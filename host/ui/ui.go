// Package ui owns the static web UI (spec "Static UI (public)"): it serves the files of the UI
// partition (DATA/ui) for every path outside /api/, and a built-in placeholder page while no UI
// is installed.
//
// Choices where the spec is silent:
//
//   - Paths whose raw or decoded form contains `..` or `//` (so `%2e%2e` and `%2f%2f` too, and
//     their double-encoded forms), a backslash or a NUL byte are refused with 400 `bad_request`:
//     the request is malformed, not a lookup that failed. `..` is refused anywhere in the path,
//     as the spec says, even inside a file name.
//   - A request whose client does not accept gzip gets the plain file when the partition has
//     one, otherwise the `.gz` file decompressed on the fly (then without ETag, Last-Modified or
//     ranges). Every file answer carries `Vary: Accept-Encoding`.
//   - Files are answered through http.ServeContent, so ETag (from modification time, size and
//     encoding), Last-Modified, conditional requests and ranges work.
//   - `/assets/*` is immutable only when that very file is answered; an extension-less path
//     under /assets/ that falls back to index.html gets `no-cache` like any other fallback.
//   - Directories are never listed: a path naming a directory is treated as missing, so an
//     extension-less one falls back to index.html and one with an extension is 404. Special
//     files (devices, pipes) are treated as missing as well.
//   - Files are opened through os.Root: a symlink inside the partition is followed, one that
//     leaves it (or is absolute) is refused with 404 `not_found` and a warning in the log, and
//     never falls back to index.html.
//   - The UI counts as installed (Available, `ui_storage`) when the partition holds a regular
//     `index.html` or `index.html.gz`. This is checked with a stat on every call and request,
//     so installing or removing the UI files needs no restart. `/index.html` asked for by name
//     follows the file rules (404 when missing); `/` and extension-less fallbacks get the
//     placeholder page, with status 200 and `no-cache`.
//   - `/api` itself and everything under `/api/` is 404 `not_found` here, whatever the method.
//     Other methods than GET and HEAD are 405 `method_not_allowed` with `Allow: GET, HEAD`.
package ui

import (
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"devhost/host/api"
)

const (
	cacheImmutable = "public, max-age=31536000, immutable"
	cacheNoCache   = "no-cache"
	indexName      = "index.html"
)

// UI serves the UI partition.
type UI struct {
	dir string
	log *slog.Logger
}

// New serves the partition at dir (DATA/ui); dir need not exist yet.
func New(dir string, logger *slog.Logger) *UI {
	logger = cmp.Or(logger, slog.New(slog.DiscardHandler))
	return &UI{dir: dir, log: logger}
}

// Available reports whether the partition holds a UI (an index.html or index.html.gz). It
// feeds `ui_storage` in /system/info.
func (u *UI) Available() bool {
	root, err := os.OpenRoot(u.dir)
	if err != nil {
		return false
	}
	defer func() { _ = root.Close() }()
	return isRegular(root, indexName) || isRegular(root, indexName+".gz")
}

func isRegular(root *os.Root, name string) bool {
	fi, err := root.Stat(name)
	return err == nil && fi.Mode().IsRegular()
}

// ServeHTTP answers every request outside /api/.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	p = cmp.Or(p, "/")
	if p == "/api" || strings.HasPrefix(p, "/api/") {
		api.WriteError(w, http.StatusNotFound, api.CodeNotFound)
		return
	}
	if !safePath(r.URL.EscapedPath()) || !safePath(p) || p[0] != '/' {
		api.WriteErr(w, api.Errorf(http.StatusBadRequest, api.CodeBadRequest, "path refused"))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		api.WriteError(w, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed)
		return
	}

	root, err := os.OpenRoot(u.dir)
	if err != nil {
		root = nil // no partition: every file is missing
	} else {
		defer func() { _ = root.Close() }()
	}

	rel := strings.TrimPrefix(p, "/")
	// A trailing slash names a directory, never a file: treat it like an extension-less miss.
	fallback := rel == "" || strings.HasSuffix(rel, "/") || path.Ext(rel) == ""
	if rel != "" && !strings.HasSuffix(rel, "/") {
		cache := cacheNoCache
		if strings.HasPrefix(rel, "assets/") {
			cache = cacheImmutable
		}
		switch err := u.serveFile(w, r, root, rel, cache); {
		case err == nil:
			return
		case errors.Is(err, errMissing):
			// fall through to the fallback or the 404 below
		default:
			u.log.Warn("ui file refused", "path", p, "err", err)
			api.WriteError(w, http.StatusNotFound, api.CodeNotFound)
			return
		}
	}
	if !fallback {
		api.WriteError(w, http.StatusNotFound, api.CodeNotFound)
		return
	}
	switch err := u.serveFile(w, r, root, indexName, cacheNoCache); {
	case err == nil:
	case errors.Is(err, errMissing):
		servePlaceholder(w, r)
	default:
		u.log.Warn("ui index refused", "err", err)
		servePlaceholder(w, r)
	}
}

// safePath refuses traversal and doubled slashes in p, also when p is still percent-encoded
// once more.
func safePath(p string) bool {
	for range 2 {
		if strings.Contains(p, "..") || strings.Contains(p, "//") ||
			strings.ContainsAny(p, "\\\x00") {
			return false
		}
		d, err := url.PathUnescape(p)
		if err != nil {
			// Not a valid escape sequence: nothing more to decode.
			return true
		}
		p = d
	}
	return !strings.Contains(p, "..") && !strings.Contains(p, "//") && !strings.ContainsAny(p, "\\\x00")
}

var errMissing = errors.New("no such file")

// serveFile answers rel (or rel.gz) from root. errMissing means neither exists as a regular
// file; any other error means the file exists but must not be served, and nothing was written.
func (u *UI) serveFile(w http.ResponseWriter, r *http.Request, root *os.Root, rel, cache string) error {
	if root == nil {
		return errMissing
	}
	gz, gzInfo, gzErr := openRegular(root, rel+".gz")
	if gzErr != nil && !errors.Is(gzErr, errMissing) {
		return gzErr
	}
	if gz != nil {
		defer func() { _ = gz.Close() }()
	}
	h := w.Header()
	setType := func() { h.Set("Content-Type", contentType(rel)) }

	if gz != nil && acceptsGzip(r.Header.Values("Accept-Encoding")) {
		setType()
		h.Set("Cache-Control", cache)
		h.Add("Vary", "Accept-Encoding")
		h.Set("Content-Encoding", "gzip")
		h.Set("ETag", etag(gzInfo, "gz"))
		http.ServeContent(w, r, rel, gzInfo.ModTime(), gz)
		return nil
	}

	f, info, err := openRegular(root, rel)
	if err != nil && !errors.Is(err, errMissing) {
		return err
	}
	if f != nil {
		defer func() { _ = f.Close() }()
		setType()
		h.Set("Cache-Control", cache)
		h.Add("Vary", "Accept-Encoding")
		h.Set("ETag", etag(info, ""))
		http.ServeContent(w, r, rel, info.ModTime(), f)
		return nil
	}
	if gz == nil {
		return errMissing
	}

	// Only the compressed copy exists and the client refuses gzip: decompress on the fly.
	zr, err := gzip.NewReader(gz)
	if err != nil {
		return fmt.Errorf("open %s.gz: %w", rel, err)
	}
	defer func() { _ = zr.Close() }()
	setType()
	h.Set("Cache-Control", cache)
	h.Add("Vary", "Accept-Encoding")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	if _, err := io.Copy(w, zr); err != nil {
		u.log.Warn("ui file decompression stopped", "path", rel, "err", err)
	}
	return nil
}

// openRegular opens name inside root. A missing name, a directory or a special file is
// errMissing; an escaping symlink or a permission problem is returned as is.
func openRegular(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	f, err := root.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ENAMETOOLONG) {
			return nil, nil, errMissing
		}
		return nil, nil, fmt.Errorf("open %s: %w", name, err)
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("stat %s: %w", name, err)
	}
	if !info.Mode().IsRegular() {
		_ = f.Close()
		return nil, nil, errMissing
	}
	return f, info, nil
}

func etag(info fs.FileInfo, variant string) string {
	tag := strconv.FormatInt(info.ModTime().UnixNano(), 36) + "-" + strconv.FormatInt(info.Size(), 36)
	if variant != "" {
		tag += "-" + variant
	}
	return `"` + tag + `"`
}

// webTypes pins the types of the files a UI build produces, independent of the host's
// mime.types.
var webTypes = map[string]string{
	".html":        "text/html; charset=utf-8",
	".htm":         "text/html; charset=utf-8",
	".js":          "text/javascript; charset=utf-8",
	".mjs":         "text/javascript; charset=utf-8",
	".css":         "text/css; charset=utf-8",
	".json":        "application/json",
	".map":         "application/json",
	".webmanifest": "application/manifest+json",
	".svg":         "image/svg+xml",
	".png":         "image/png",
	".jpg":         "image/jpeg",
	".jpeg":        "image/jpeg",
	".gif":         "image/gif",
	".webp":        "image/webp",
	".avif":        "image/avif",
	".ico":         "image/x-icon",
	".woff":        "font/woff",
	".woff2":       "font/woff2",
	".ttf":         "font/ttf",
	".otf":         "font/otf",
	".wasm":        "application/wasm",
	".txt":         "text/plain; charset=utf-8",
	".xml":         "text/xml; charset=utf-8",
	".gz":          "application/gzip",
}

// contentType is the type of the uncompressed name.
func contentType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := webTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

// acceptsGzip reads the Accept-Encoding field values (RFC 9110 12.5.3): gzip (or x-gzip) is
// acceptable when listed with a non-zero weight, or when `*` has a non-zero weight and gzip is
// not listed.
func acceptsGzip(values []string) bool {
	gzipQ, starQ := -1.0, -1.0
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(item, ";")
			coding = strings.ToLower(strings.TrimSpace(coding))
			q := 1.0
			for _, p := range strings.Split(params, ";") {
				k, val, ok := strings.Cut(p, "=")
				if !ok || !strings.EqualFold(strings.TrimSpace(k), "q") {
					continue
				}
				f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
				if err != nil || f < 0 || f > 1 {
					f = 0 // an unreadable weight is not an invitation
				}
				q = f
			}
			switch coding {
			case "gzip", "x-gzip":
				gzipQ = max(gzipQ, q)
			case "*":
				starQ = max(starQ, q)
			}
		}
	}
	if gzipQ >= 0 {
		return gzipQ > 0
	}
	return starQ > 0
}

const placeholder = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Web UI not installed</title>
<style>body{font-family:system-ui,sans-serif;max-width:40em;margin:2em auto;padding:0 1em;line-height:1.5}code{background:#eee;padding:0 .2em}</style>
</head>
<body>
<h1>Web UI not installed</h1>
<p>The device is running, but its UI partition holds no web interface, so there is nothing to show here yet.</p>
<p>The REST API works without it:</p>
<ul>
<li><a href="/api/v1/system/ping"><code>/api/v1/system/ping</code></a> answers whether the device is alive and whether it wants an API key.</li>
<li><a href="/api/v1/config/schema"><code>/api/v1/config/schema</code></a> describes every configuration key.</li>
</ul>
<p>Install the UI files into the UI partition; this page is replaced as soon as an <code>index.html</code> is there, without a restart.</p>
</body>
</html>
`

func servePlaceholder(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", cacheNoCache)
	h.Set("Content-Length", strconv.Itoa(len(placeholder)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, placeholder)
	}
}
