package sktls

import (
	"encoding/json"
	"errors"
	"net/http"

	"devhost/host/api"
)

// Routes are GET and DELETE /sk/tls and PUT /sk/tls/ca.
func (m *Manager) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/sk/tls", Handler: m.handleGet},
		{Method: http.MethodDelete, Path: "/sk/tls", Handler: m.handleDelete, NoBody: true},
		{Method: http.MethodPut, Path: "/sk/tls/ca", Handler: m.handlePutCA},
	}
}

func (m *Manager) handleGet(w http.ResponseWriter, _ *http.Request) {
	api.WriteJSON(w, http.StatusOK, m.Document())
}

// handleDelete forgets the anchors and answers 200 with the document as it is afterwards.
func (m *Manager) handleDelete(w http.ResponseWriter, _ *http.Request) {
	if err := m.Forget(); err != nil {
		m.log.Error("forget TLS anchors", "err", err)
		api.WriteErr(w, &api.Error{Status: http.StatusInternalServerError, Code: api.CodeWriteFailed, Message: "storage failure while forgetting the anchors"})
		return
	}
	api.WriteJSON(w, http.StatusOK, m.Document())
}

// handlePutCA takes {"pem": "..."}, anchors the CA and answers 200 with the document.
func (m *Manager) handlePutCA(w http.ResponseWriter, r *http.Request) {
	// pem is read raw so that a value of the wrong type is named `pem`, not a malformed body.
	var doc *struct {
		PEM json.RawMessage `json:"pem"`
	}
	if err := api.DecodeJSON(r, &doc); err != nil {
		api.WriteErr(w, err)
		return
	}
	if doc == nil {
		api.WriteErr(w, api.Validation("", "body must be an object {\"pem\": string}"))
		return
	}
	var text string
	if doc.PEM == nil || json.Unmarshal(doc.PEM, &text) != nil {
		api.WriteErr(w, api.Validation("pem", "pem must be a string"))
		return
	}
	if err := m.SetCA([]byte(text)); err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			api.WriteErr(w, ae)
			return
		}
		m.log.Error("store TLS CA", "err", err)
		api.WriteErr(w, &api.Error{Status: http.StatusInternalServerError, Code: api.CodeWriteFailed, Message: "storage failure while storing the CA"})
		return
	}
	api.WriteJSON(w, http.StatusOK, m.Document())
}
