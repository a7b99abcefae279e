// Package api owns the HTTP conventions every capability of the device shares: the JSON error
// body of the spec's error table, strict JSON request decoding, JSON responses, and the route
// description capabilities hand to the HTTP server. It has no state.
package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Error codes of the spec's error table.
const (
	CodeBadRequest       = "bad_request"
	CodeValidation       = "validation"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeAuthUnconfigured = "auth_unconfigured"
	CodeNotFound         = "not_found"
	CodeUnknownNamespace = "unknown_namespace"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeTimeout          = "timeout"
	CodeAuthOpen         = "auth_open"
	CodeBusy             = "busy"
	CodeOutranked        = "outranked"
	CodeLengthRequired   = "length_required"
	CodeTooLarge         = "too_large"
	CodeURITooLong       = "uri_too_long"
	CodeUnsupportedMedia = "unsupported_media_type"
	CodeTooManyAttempts  = "too_many_attempts"
	CodeHeadersTooLarge  = "headers_too_large"
	CodeInternal         = "internal"
	CodeWriteFailed      = "write_failed"
	CodeRestarting       = "restarting"
	CodeStorageFull      = "insufficient_storage"
	CodeConflict         = "conflict"
)

// Error is an answer the spec defines as a status and an `error` code. Path is set for
// configuration validation errors (`<ns>.<key>`, `<ns>`, or "" for document-level errors);
// Message is a human-readable explanation and never replaces the code.
type Error struct {
	Status  int
	Code    string
	Path    *string
	Message string
}

func (e *Error) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
	}
	return fmt.Sprintf("%d %s", e.Status, e.Code)
}

// Errorf builds an *Error with a formatted message.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Validation builds a 400 `validation` error that names the offending path.
func Validation(path, format string, args ...any) *Error {
	p := path
	return &Error{Status: http.StatusBadRequest, Code: CodeValidation, Path: &p, Message: fmt.Sprintf(format, args...)}
}

// body is the wire form of an error.
type body struct {
	Error   string  `json:"error"`
	Path    *string `json:"path,omitempty"`
	Message string  `json:"message,omitempty"`
}

// WriteError answers with the spec's JSON error body. Errors are never cacheable.
func WriteError(w http.ResponseWriter, status int, code string) {
	WriteErr(w, &Error{Status: status, Code: code})
}

// WriteErr answers err: an *Error (found with errors.As) as itself, anything else as
// 500 `internal` without leaking the message.
func WriteErr(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Status: http.StatusInternalServerError, Code: CodeInternal}
	}
	b := ErrorBody(e)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Encoding")
	h.Del("ETag")
	w.WriteHeader(e.Status)
	_, _ = w.Write(b)
}

// ErrorBody is the wire form of e, newline-terminated, for the few answers written below the
// handlers (the HTTP server's connection layer).
func ErrorBody(e *Error) []byte {
	b, _ := json.Marshal(body{Error: e.Code, Path: e.Path, Message: e.Message})
	return append(b, '\n')
}

// WriteJSON answers v as JSON with the given status. API documents describe live state, so
// they carry `Cache-Control: no-store`.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		WriteErr(w, fmt.Errorf("encode response: %w", err))
		return
	}
	WriteRawJSON(w, status, b)
}

// WriteRawJSON answers already-encoded JSON.
func WriteRawJSON(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	if len(b) == 0 || b[len(b)-1] != '\n' {
		_, _ = w.Write([]byte{'\n'})
	}
}

// ReadBody reads the whole request body. The HTTP server has already capped its size; a body
// that stops arriving surfaces here as the server's read timeout, answered 408 `timeout`.
func ReadBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge}
		}
		return nil, &Error{Status: http.StatusRequestTimeout, Code: CodeTimeout, Message: "request body did not arrive"}
	}
	return b, nil
}

// DecodeJSON reads the body and decodes exactly one JSON value into v. Malformed JSON, a
// value of the wrong shape and trailing non-whitespace are 400 `validation` with path "".
func DecodeJSON(r *http.Request, v any) error {
	b, err := ReadBody(r)
	if err != nil {
		return err
	}
	return Unmarshal(b, v)
}

// Unmarshal decodes exactly one JSON value from b into v with the rules of DecodeJSON.
func Unmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return Validation("", "malformed JSON: %v", err)
	}
	if len(bytes.TrimSpace(b[dec.InputOffset():])) > 0 {
		return Validation("", "malformed JSON: trailing data after the document")
	}
	return nil
}
