package config

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"devhost/host/api"
)

// maxQuery is the spec's limit on GET /config's query string: under 128 bytes.
const maxQuery = 128

// Routes returns the configuration endpoints.
func (c *Config) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/config", Handler: c.handleGet},
		{Method: http.MethodPut, Path: "/config", Handler: c.handlePut},
		{Method: http.MethodGet, Path: "/config/schema", Handler: c.handleSchema},
	}
}

func (c *Config) handleGet(w http.ResponseWriter, r *http.Request) {
	if len(r.URL.RawQuery) >= maxQuery {
		api.WriteError(w, http.StatusRequestURITooLong, api.CodeURITooLong)
		return
	}
	if r.URL.RawQuery == "" {
		c.writeDocument(w, "")
		return
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		api.WriteErr(w, api.Validation("", "malformed query string"))
		return
	}
	ns := ""
	for name, vals := range q {
		if name != "ns" {
			api.WriteErr(w, api.Validation("", "unknown query parameter %q", name))
			return
		}
		if len(vals) != 1 {
			api.WriteErr(w, api.Validation("", "ns given more than once"))
			return
		}
		ns = vals[0]
		if ns == "" {
			api.WriteError(w, http.StatusNotFound, api.CodeUnknownNamespace)
			return
		}
	}
	c.writeDocument(w, ns)
}

// writeDocument answers the document of ns ("" for all).
func (c *Config) writeDocument(w http.ResponseWriter, ns string) {
	body, err := c.Document(ns)
	if errors.Is(err, ErrUnknownNamespace) {
		e := &api.Error{Status: http.StatusNotFound, Code: api.CodeUnknownNamespace}
		if msg, ok := c.awaited(ns); ok {
			e.Message, e.RetryAfter = msg, AwaitRetryAfter
		}
		api.WriteErr(w, e)
		return
	}
	if err != nil {
		api.WriteErr(w, err)
		return
	}
	api.WriteRawJSON(w, http.StatusOK, body)
}

func (c *Config) handlePut(w http.ResponseWriter, r *http.Request) {
	body, err := api.ReadBody(r)
	if err != nil {
		api.WriteErr(w, err)
		return
	}
	res, err := c.Apply(body)
	if err != nil {
		api.WriteErr(w, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, res)
}

// handleSchema serves the schema. It may be cached but must be revalidated (no-cache): the
// ETag changes whenever a run-time namespace comes or goes.
func (c *Config) handleSchema(w http.ResponseWriter, r *http.Request) {
	body, etag := c.Schema()
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "no-cache")
	if etagMatch(r.Header.Values("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/schema+json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// etagMatch applies If-None-Match's weak comparison (RFC 9110 13.1.2): a W/ prefix is
// ignored, "*" matches any current representation.
func etagMatch(headers []string, etag string) bool {
	for _, h := range headers {
		for _, t := range strings.Split(h, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == etag {
				return true
			}
		}
	}
	return false
}
