package plugin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Limits of uploads.
const (
	// MaxChunk is the most bytes one upload chunk carries: as base64 inside its JSON envelope it
	// stays under the 16 KiB request body limit.
	MaxChunk = 12000
	// MaxUploads is how many uploads may be open at once.
	MaxUploads = 2
	// UploadIdle is how long an upload lives without a chunk before it is discarded.
	UploadIdle = 10 * time.Minute
)

var (
	errUploadsFull   = errors.New("too many uploads open")
	errUnknownUpload = errors.New("no such upload")
)

// upload is a bundle arriving in chunks (or downloaded by the device) into the partition's
// upload area.
type upload struct {
	ID       string `json:"id"`
	Size     int64  `json:"size"`
	Received int64  `json:"received"`
	// Source is "chunks" or the URL the device downloaded.
	Source string `json:"source"`

	path  string
	timer clockwork.Timer
}

type uploads struct {
	dir string
	clk clockwork.Clock
	max int64
	// open opens an upload's file for writing; a test puts a failing disk here.
	open func(path string) (chunkFile, error)

	mu    sync.Mutex
	items map[string]*upload
}

// chunkFile is where a chunk is written.
type chunkFile interface {
	io.WriterAt
	io.Closer
}

func newUploads(dir string, clk clockwork.Clock, max int64) *uploads {
	return &uploads{dir: dir, clk: clk, max: max, items: map[string]*upload{},
		open: func(path string) (chunkFile, error) { return os.OpenFile(path, os.O_WRONLY, 0) }}
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// create opens an upload of size bytes.
func (u *uploads) create(size int64, source string) (upload, error) {
	if size <= 0 || size > u.max {
		return upload{}, fmt.Errorf("size %d: must be 1 to %d bytes", size, u.max)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.items) >= MaxUploads {
		return upload{}, errUploadsFull
	}
	up := &upload{ID: randomID(), Size: size, Source: source}
	up.path = filepath.Join(u.dir, up.ID)
	f, err := os.OpenFile(up.path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return upload{}, fmt.Errorf("%w: create the upload: %w", errStorage, err)
	}
	_ = f.Close()
	id := up.ID
	up.timer = u.clk.AfterFunc(UploadIdle, func() { _ = u.discard(id) })
	u.items[id] = up
	return *up, nil
}

// write appends a chunk at offset, which must be where the previous chunk ended.
func (u *uploads) write(id string, offset int64, data []byte) (upload, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	up := u.items[id]
	if up == nil {
		return upload{}, errUnknownUpload
	}
	if offset != up.Received {
		return *up, fmt.Errorf("%w: offset %d, next expected %d", errOffset, offset, up.Received)
	}
	if up.Received+int64(len(data)) > up.Size {
		return *up, fmt.Errorf("%w: chunk ends at %d, beyond the announced size %d", errBeyondSize, up.Received+int64(len(data)), up.Size)
	}
	f, err := u.open(up.path)
	if err != nil {
		return *up, fmt.Errorf("%w: open the upload: %w", errStorage, err)
	}
	_, werr := f.WriteAt(data, offset)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return *up, fmt.Errorf("%w: write the chunk: %w", errStorage, werr)
	}
	up.Received += int64(len(data))
	up.timer.Reset(UploadIdle)
	return *up, nil
}

var (
	errOffset     = errors.New("chunk out of order")
	errBeyondSize = errors.New("chunk too long")
)

// get answers an upload's progress.
func (u *uploads) get(id string) (upload, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	up := u.items[id]
	if up == nil {
		return upload{}, false
	}
	return *up, true
}

func (u *uploads) list() []upload {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]upload, 0, len(u.items))
	for _, up := range u.items {
		out = append(out, *up)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// bytes reads a complete upload.
func (u *uploads) bytes(id string) ([]byte, error) {
	u.mu.Lock()
	up := u.items[id]
	u.mu.Unlock()
	if up == nil {
		return nil, errUnknownUpload
	}
	if up.Received != up.Size {
		return nil, fmt.Errorf("%w: %d of %d bytes received", errIncomplete, up.Received, up.Size)
	}
	b, err := os.ReadFile(up.path)
	if err != nil {
		return nil, fmt.Errorf("%w: read the upload: %w", errStorage, err)
	}
	return b, nil
}

// discard drops an upload and its file.
func (u *uploads) discard(id string) error {
	u.mu.Lock()
	up := u.items[id]
	delete(u.items, id)
	u.mu.Unlock()
	if up == nil {
		return errUnknownUpload
	}
	up.timer.Stop()
	if err := os.Remove(up.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("upload: %w", err)
	}
	return nil
}

// closeAll drops every upload (shutdown).
func (u *uploads) closeAll() {
	for _, up := range u.list() {
		_ = u.discard(up.ID)
	}
}

// errTooLarge marks a bundle over the size cap.
var errTooLarge = errors.New("bundle too large")

// fetch downloads a bundle over http or https, refusing anything over max bytes.
func fetch(ctx context.Context, client *http.Client, rawURL string, max int64) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url %q: must be an absolute http or https URL", rawURL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download: server answered %s", resp.Status)
	}
	if resp.ContentLength > max {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", errTooLarge, resp.ContentLength, max)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: more than %d bytes", errTooLarge, max)
	}
	return b, nil
}

// newHTTPClient is the downloader: redirects stay on http or https, at most 5 of them.
func newHTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to %q refused", req.URL.Scheme)
			}
			return nil
		},
	}
}
