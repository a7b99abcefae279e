package plugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"strconv"
	"syscall"

	"github.com/julienschmidt/httprouter"

	"devhost/abi"
	"devhost/host/api"
	"devhost/host/plugin/trust"
)

// Path segments under /plugins that are not plugin ids (abi.ReservedIDs keeps plugins off
// them). httprouter v1.3 cannot hold /plugins/keys beside /plugins/:id, so one :id route
// answers both and dispatches on the segment.
const (
	segKeys    = "keys"
	segUploads = "uploads"
)

// Routes are the plugin host's endpoints, relative to /api/v1; all protected.
func (m *Manager) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/plugins", Handler: m.serveList},
		{Method: http.MethodPost, Path: "/plugins", Handler: m.serveInstall},
		{Method: http.MethodGet, Path: "/plugins/:id", Handler: m.serveGet},
		{Method: http.MethodPost, Path: "/plugins/:id", Handler: m.servePostID},
		{Method: http.MethodDelete, Path: "/plugins/:id", Handler: m.serveDelete},
		{Method: http.MethodGet, Path: "/plugins/:id/:sub", Handler: m.serveGetSub},
		{Method: http.MethodPost, Path: "/plugins/:id/:sub", Handler: m.servePostSub, NoBody: true},
		{Method: http.MethodPut, Path: "/plugins/:id/:sub", Handler: m.servePutSub},
		{Method: http.MethodDelete, Path: "/plugins/:id/:sub", Handler: m.serveDeleteSub},
	}
}

func params(r *http.Request) (id, sub string) {
	ps := httprouter.ParamsFromContext(r.Context())
	return ps.ByName("id"), ps.ByName("sub")
}

func notAllowed(w http.ResponseWriter) {
	api.WriteError(w, http.StatusMethodNotAllowed, api.CodeMethodNotAllowed)
}

// decodeStrict decodes one JSON object into v with the device's one strict decoder: unknown
// or repeated members, wrong types, invalid UTF-8 and trailing data are 400 validation.
func decodeStrict(r *http.Request, v any) error { return api.DecodeJSON(r, v) }

func unmarshalStrict(b []byte, v any) error { return api.Unmarshal(b, v) }

func (m *Manager) serveList(w http.ResponseWriter, _ *http.Request) {
	api.WriteJSON(w, http.StatusOK, m.List())
}

// installBody is POST /plugins: exactly one of url and upload; grant optional.
type installBody struct {
	URL    *string   `json:"url"`
	Upload *string   `json:"upload"`
	Grant  *[]string `json:"grant"`
}

func parseGrant(g *[]string) ([]abi.Capability, error) {
	if g == nil {
		return nil, nil
	}
	out := []abi.Capability{}
	for _, s := range *g {
		c := abi.Capability(s)
		if !c.Known() {
			return nil, api.Validation("grant", "unknown capability %q", s)
		}
		out = append(out, c)
	}
	return out, nil
}

func (m *Manager) serveInstall(w http.ResponseWriter, r *http.Request) {
	var body installBody
	if err := decodeStrict(r, &body); err != nil {
		api.WriteErr(w, err)
		return
	}
	grant, err := parseGrant(body.Grant)
	if err != nil {
		api.WriteErr(w, err)
		return
	}
	var b []byte
	switch {
	case (body.URL == nil) == (body.Upload == nil):
		api.WriteErr(w, api.Validation("", "give exactly one of url and upload"))
		return
	case body.URL != nil:
		b, err = m.download(r.Context(), *body.URL)
		if err != nil {
			api.WriteErr(w, err)
			return
		}
	default:
		b, err = m.uploads.bytes(*body.Upload)
		if err != nil {
			api.WriteErr(w, uploadError(err, "upload"))
			return
		}
	}
	res, err := m.Install(b, grant)
	if body.Upload != nil && (err == nil || errors.Is(err, errRefused)) {
		_ = m.uploads.discard(*body.Upload)
	}
	if err != nil {
		api.WriteErr(w, apiError(err))
		return
	}
	status := http.StatusCreated
	if res.Replaced {
		status = http.StatusOK
	}
	api.WriteJSON(w, status, res)
}

// download fetches a bundle for an install by URL.
func (m *Manager) download(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, m.opts.DownloadTimeout)
	defer cancel()
	b, err := fetch(ctx, m.opts.HTTPClient, url, m.opts.MaxBundle)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			return nil, api.Errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "%v", err)
		}
		return nil, api.Validation("url", "%v", err)
	}
	return b, nil
}

func (m *Manager) serveGet(w http.ResponseWriter, r *http.Request) {
	id, _ := params(r)
	switch id {
	case segKeys:
		api.WriteJSON(w, http.StatusOK, map[string]any{"keys": m.keys.List()})
	case segUploads:
		api.WriteJSON(w, http.StatusOK, map[string]any{"uploads": m.uploadDocs()})
	default:
		st, ok := m.Status(id)
		if !ok {
			api.WriteError(w, http.StatusNotFound, api.CodeNotFound)
			return
		}
		api.WriteJSON(w, http.StatusOK, st)
	}
}

func (m *Manager) servePostID(w http.ResponseWriter, r *http.Request) {
	id, _ := params(r)
	switch id {
	case segKeys:
		m.serveAddKey(w, r)
	case segUploads:
		m.serveCreateUpload(w, r)
	default:
		if m.get(id) == nil {
			api.WriteError(w, http.StatusNotFound, api.CodeNotFound)
			return
		}
		notAllowed(w)
	}
}

// deleteBody is the optional body of DELETE /plugins/<id>.
type deleteBody struct {
	Purge *bool `json:"purge"`
}

func (m *Manager) serveDelete(w http.ResponseWriter, r *http.Request) {
	id, _ := params(r)
	if id == segKeys || id == segUploads {
		notAllowed(w)
		return
	}
	purge := false
	if q := r.URL.Query().Get("purge"); q != "" {
		v, err := strconv.ParseBool(q)
		if err != nil {
			api.WriteErr(w, api.Validation("purge", "purge must be true or false"))
			return
		}
		purge = v
	}
	b, err := api.ReadBody(r)
	if err != nil {
		api.WriteErr(w, err)
		return
	}
	if len(bytes.TrimSpace(b)) > 0 {
		var body deleteBody
		if err := unmarshalStrict(b, &body); err != nil {
			api.WriteErr(w, err)
			return
		}
		if body.Purge != nil {
			purge = *body.Purge
		}
	}
	if err := m.Remove(id, purge); err != nil {
		api.WriteErr(w, apiError(err))
		return
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "removed": true, "purged": purge})
}

func (m *Manager) serveGetSub(w http.ResponseWriter, r *http.Request) {
	id, sub := params(r)
	switch id {
	case segKeys:
		k, ok := m.keys.Get(sub)
		if !ok {
			api.WriteError(w, http.StatusNotFound, api.CodeNotFound)
			return
		}
		api.WriteJSON(w, http.StatusOK, k)
	case segUploads:
		up, ok := m.uploads.get(sub)
		if !ok {
			api.WriteError(w, http.StatusNotFound, api.CodeNotFound)
			return
		}
		api.WriteJSON(w, http.StatusOK, uploadDoc{upload: up, MaxChunk: MaxChunk})
	default:
		api.WriteError(w, http.StatusNotFound, api.CodeNotFound)
	}
}

func (m *Manager) servePostSub(w http.ResponseWriter, r *http.Request) {
	id, sub := params(r)
	// These actions take no body; an empty object is accepted too.
	if b, err := api.ReadBody(r); err != nil {
		api.WriteErr(w, err)
		return
	} else if len(bytes.TrimSpace(b)) > 0 {
		var empty struct{}
		if err := unmarshalStrict(b, &empty); err != nil {
			api.WriteErr(w, err)
			return
		}
	}
	switch id {
	case segKeys:
		notAllowed(w)
		return
	case segUploads:
		m.serveCommit(w, sub)
		return
	}
	var (
		st  Status
		err error
	)
	switch sub {
	case "start":
		st, err = m.Start(id)
	case "stop":
		st, err = m.Stop(id)
	default:
		api.WriteError(w, http.StatusNotFound, api.CodeNotFound)
		return
	}
	if err != nil {
		api.WriteErr(w, apiError(err))
		return
	}
	api.WriteJSON(w, http.StatusOK, st)
}

func (m *Manager) servePutSub(w http.ResponseWriter, r *http.Request) {
	id, sub := params(r)
	if id != segUploads {
		notAllowed(w)
		return
	}
	m.serveChunk(w, r, sub)
}

func (m *Manager) serveDeleteSub(w http.ResponseWriter, r *http.Request) {
	id, sub := params(r)
	switch id {
	case segKeys:
		if err := m.keys.Remove(sub); err != nil {
			switch {
			case errors.Is(err, trust.ErrUnknownKey):
				api.WriteError(w, http.StatusNotFound, api.CodeNotFound)
			case errors.Is(err, trust.ErrBuiltin):
				api.WriteErr(w, api.Errorf(http.StatusConflict, api.CodeConflict, "%v", err))
			default:
				api.WriteErr(w, api.Errorf(http.StatusInternalServerError, api.CodeWriteFailed, "%v", err))
			}
			return
		}
		m.log.Info("publisher key removed", "kid", sub)
		api.WriteJSON(w, http.StatusOK, map[string]any{"kid": sub, "removed": true})
	case segUploads:
		if err := m.uploads.discard(sub); err != nil {
			api.WriteErr(w, uploadError(err, ""))
			return
		}
		api.WriteJSON(w, http.StatusOK, map[string]any{"id": sub, "removed": true})
	default:
		notAllowed(w)
	}
}

// keyBody is POST /plugins/keys.
type keyBody struct {
	PEM string `json:"pem"`
}

func (m *Manager) serveAddKey(w http.ResponseWriter, r *http.Request) {
	var body keyBody
	if err := decodeStrict(r, &body); err != nil {
		api.WriteErr(w, err)
		return
	}
	k, created, err := m.keys.Add([]byte(body.PEM))
	if err != nil {
		if errors.Is(err, trust.ErrFull) {
			api.WriteErr(w, api.Errorf(http.StatusConflict, api.CodeConflict, "%v", err))
			return
		}
		var ae *api.Error
		if errors.As(err, &ae) {
			api.WriteErr(w, err)
			return
		}
		if errors.Is(err, errWrite) {
			api.WriteErr(w, api.Errorf(http.StatusInternalServerError, api.CodeWriteFailed, "%v", err))
			return
		}
		api.WriteErr(w, api.Validation("pem", "%v", err))
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		m.log.Info("publisher key added", "kid", k.ID)
	}
	api.WriteJSON(w, status, k)
}

// errWrite marks a storage failure of the trust store.
var errWrite = trust.ErrWrite

// uploadBody is POST /plugins/uploads: size for a chunked upload, or url for the device to
// download (and verify) the bundle itself.
type uploadBody struct {
	Size *int64  `json:"size"`
	URL  *string `json:"url"`
}

// uploadDoc is an upload as the API shows it; Bundle is set once the bundle was verified.
type uploadDoc struct {
	upload
	MaxChunk int         `json:"max_chunk"`
	Bundle   *bundleInfo `json:"bundle,omitempty"`
}

// bundleInfo is what a verified bundle asks for, for the operator to decide the grants.
type bundleInfo struct {
	Manifest abi.Manifest `json:"manifest"`
	KeyID    string       `json:"kid"`
	SHA256   string       `json:"sha256"`
}

func (m *Manager) uploadDocs() []uploadDoc {
	ups := m.uploads.list()
	out := make([]uploadDoc, len(ups))
	for i, up := range ups {
		out[i] = uploadDoc{upload: up, MaxChunk: MaxChunk}
	}
	return out
}

func uploadError(err error, path string) error {
	switch {
	case errors.Is(err, errUnknownUpload):
		if path != "" {
			return api.Validation(path, "%v", err)
		}
		return api.Errorf(http.StatusNotFound, api.CodeNotFound, "%v", err)
	case errors.Is(err, errUploadsFull):
		return api.Errorf(http.StatusConflict, api.CodeBusy, "%v: at most %d", err, MaxUploads)
	case errors.Is(err, errOffset), errors.Is(err, errIncomplete):
		return api.Errorf(http.StatusConflict, api.CodeConflict, "%v", err)
	}
	return storageError(err)
}

// storageError is the answer to a failure of the device's own storage: a 500 write_failed
// that names what failed and the system's reason (no space left on device), never a path
// inside the device.
func storageError(err error) error {
	what := "storage failed"
	var pe *os.PathError
	var le *os.LinkError
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		what += ": " + errno.Error()
	case errors.As(err, &pe):
		what += ": " + pe.Op + ": " + pe.Err.Error()
	case errors.As(err, &le):
		what += ": " + le.Op + ": " + le.Err.Error()
	}
	return api.Errorf(http.StatusInternalServerError, api.CodeWriteFailed, "%s", what)
}

func (m *Manager) serveCreateUpload(w http.ResponseWriter, r *http.Request) {
	var body uploadBody
	if err := decodeStrict(r, &body); err != nil {
		api.WriteErr(w, err)
		return
	}
	switch {
	case (body.Size == nil) == (body.URL == nil):
		api.WriteErr(w, api.Validation("", "give exactly one of size and url"))
	case body.Size != nil:
		if *body.Size <= 0 || *body.Size > m.opts.MaxBundle {
			api.WriteErr(w, api.Validation("size", "size must be 1 to %d bytes", m.opts.MaxBundle))
			return
		}
		up, err := m.uploads.create(*body.Size, "chunks")
		if err != nil {
			api.WriteErr(w, uploadError(err, ""))
			return
		}
		api.WriteJSON(w, http.StatusCreated, uploadDoc{upload: up, MaxChunk: MaxChunk})
	default:
		b, err := m.download(r.Context(), *body.URL)
		if err != nil {
			api.WriteErr(w, err)
			return
		}
		up, err := m.uploads.create(int64(len(b)), *body.URL)
		if err != nil {
			api.WriteErr(w, uploadError(err, ""))
			return
		}
		if up, err = m.uploads.write(up.ID, 0, b); err != nil {
			_ = m.uploads.discard(up.ID)
			api.WriteErr(w, uploadError(err, ""))
			return
		}
		m.writeVerified(w, http.StatusCreated, up, b)
	}
}

// chunkBody is PUT /plugins/uploads/<id>.
type chunkBody struct {
	Offset *int64  `json:"offset"`
	Data   *string `json:"data"`
}

func (m *Manager) serveChunk(w http.ResponseWriter, r *http.Request, id string) {
	var body chunkBody
	if err := decodeStrict(r, &body); err != nil {
		api.WriteErr(w, err)
		return
	}
	if body.Offset == nil || *body.Offset < 0 {
		api.WriteErr(w, api.Validation("offset", "offset is required and not negative"))
		return
	}
	if body.Data == nil {
		api.WriteErr(w, api.Validation("data", "data is required"))
		return
	}
	data, err := base64.StdEncoding.DecodeString(*body.Data)
	if err != nil {
		api.WriteErr(w, api.Validation("data", "data must be padded base64"))
		return
	}
	if len(data) == 0 || len(data) > MaxChunk {
		api.WriteErr(w, api.Validation("data", "a chunk carries 1 to %d bytes", MaxChunk))
		return
	}
	up, err := m.uploads.write(id, *body.Offset, data)
	if err != nil {
		if errors.Is(err, errBeyondSize) {
			api.WriteErr(w, api.Validation("data", "%v", err))
			return
		}
		api.WriteErr(w, uploadError(err, ""))
		return
	}
	api.WriteJSON(w, http.StatusOK, uploadDoc{upload: up, MaxChunk: MaxChunk})
}

var errIncomplete = errors.New("upload incomplete")

// serveCommit verifies a complete upload and shows what the bundle asks for. A refused
// bundle's upload is discarded.
func (m *Manager) serveCommit(w http.ResponseWriter, id string) {
	up, ok := m.uploads.get(id)
	if !ok {
		api.WriteError(w, http.StatusNotFound, api.CodeNotFound)
		return
	}
	if up.Received != up.Size {
		api.WriteErr(w, api.Errorf(http.StatusConflict, api.CodeConflict, "%v: %d of %d bytes", errIncomplete, up.Received, up.Size))
		return
	}
	b, err := m.uploads.bytes(id)
	if err != nil {
		api.WriteErr(w, uploadError(err, ""))
		return
	}
	m.writeVerified(w, http.StatusOK, up, b)
}

// writeVerified answers with the complete upload b and what its bundle asks for, or with the
// bundle's refusal, having discarded the upload.
func (m *Manager) writeVerified(w http.ResponseWriter, status int, up upload, b []byte) {
	bd, err := m.verify(b)
	if err != nil {
		_ = m.uploads.discard(up.ID)
		api.WriteErr(w, apiError(err))
		return
	}
	sum := sha256.Sum256(b)
	api.WriteJSON(w, status, uploadDoc{upload: up, MaxChunk: MaxChunk,
		Bundle: &bundleInfo{Manifest: bd.Manifest, KeyID: bd.KeyID, SHA256: hex.EncodeToString(sum[:])}})
}
