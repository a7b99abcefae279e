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
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
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
	// RetryAfter, when positive, is sent as Retry-After (seconds): the request may succeed
	// when repeated that much later.
	RetryAfter int
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
	setJSONHeaders(h)
	h.Del("Content-Encoding")
	h.Del("ETag")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
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

// WriteRawJSON answers already-encoded JSON, newline-terminated. The length is sent, so a
// document larger than net/http's buffer goes out in one piece rather than chunked.
func WriteRawJSON(w http.ResponseWriter, status int, b []byte) {
	nl := len(b) == 0 || b[len(b)-1] != '\n'
	n := len(b)
	if nl {
		n++
	}
	h := w.Header()
	setJSONHeaders(h)
	h["Content-Length"] = []string{strconv.Itoa(n)}
	w.WriteHeader(status)
	_, _ = w.Write(b)
	if nl {
		_, _ = w.Write(newline)
	}
}

// The header values every JSON answer carries, shared rather than allocated per answer
// (Header.Set makes a new slice each time). Their capacity is their length, so an Add to
// them reallocates instead of writing into the shared array; nothing writes into a header
// value in place.
var (
	jsonType = []string{"application/json"}
	noStore  = []string{"no-store"}
	newline  = []byte{'\n'}
)

func setJSONHeaders(h http.Header) {
	h["Content-Type"] = jsonType[:1:1]
	h["Cache-Control"] = noStore[:1:1]
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

// DecodeJSON reads the body and decodes exactly one JSON value into v with the rules of
// Unmarshal.
func DecodeJSON(r *http.Request, v any) error {
	b, err := ReadBody(r)
	if err != nil {
		return err
	}
	return Unmarshal(b, v)
}

// Document is the handler of a route that only shows a document: it answers doc(), 200.
func Document[T any](doc func() T) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { WriteJSON(w, http.StatusOK, doc()) }
}

// ReadParsed reads the body and hands it to parse, the endpoint's own validating decoder.
func ReadParsed[T any](r *http.Request, parse func([]byte) (T, error)) (T, error) {
	b, err := ReadBody(r)
	if err != nil {
		var zero T
		return zero, err
	}
	return parse(b)
}

// Unmarshal is the device's one strict JSON decoder for request bodies: every endpoint that
// takes JSON decodes through it, so one rule holds everywhere. It decodes exactly one JSON
// value from b into v (numbers kept as json.Number) and refuses, as 400 `validation`:
//   - malformed JSON and trailing non-whitespace after the value (path "");
//   - text that is not valid UTF-8, and `\u` escapes that are not valid UTF-16 (a lone
//     surrogate), instead of replacing them with U+FFFD (path "");
//   - an object member given twice, at any depth (path: the member's dotted path, so a
//     configuration document names `<ns>.<key>`);
//   - members v has no field for, when v is a struct (path: the member);
//   - a value of the wrong JSON type for its field (path: the member's dotted path), said in
//     JSON's words ("must be a string, not a number") rather than Go's type names.
func Unmarshal(b []byte, v any) error {
	if !utf8.Valid(b) {
		return Validation("", "malformed JSON: the text is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			name = strings.Trim(name, `"`)
			return Validation(name, "unknown member %q", name)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return Validation(te.Field, "must be %s, not %s", jsonKind(te.Type), withArticle(te.Value))
		}
		return Validation("", "malformed JSON: %v", err)
	}
	if len(bytes.TrimSpace(b[dec.InputOffset():])) > 0 {
		return Validation("", "malformed JSON: trailing data after the document")
	}
	return checkText(b[:dec.InputOffset()])
}

// jsonKind names the JSON value a Go type takes.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

// withArticle is encoding/json's name of the value it met ("number", "string", "array",
// "object", "bool", or "number 1.5" for a number its field cannot hold) as a phrase.
func withArticle(v string) string {
	switch {
	case v == "array" || v == "object":
		return "an " + v
	case v == "bool":
		return "a boolean"
	case strings.HasPrefix(v, "number "):
		return strings.TrimPrefix(v, "number ")
	default:
		return "a " + v
	}
}

// checkText walks one well-formed JSON value for what encoding/json accepts silently: a
// member name repeated within an object (the last one would win) and escapes that decode to
// U+FFFD because they are not valid UTF-16.
func checkText(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // a number too large for a float64 is the caller's to judge
	type frame struct {
		object bool
		seen   map[string]bool
		path   string
		key    bool // the next token of an object is a member name
		member string
	}
	var stack []*frame
	child := func() string { // path of the value about to start
		if len(stack) == 0 {
			return ""
		}
		f := stack[len(stack)-1]
		if !f.object {
			return f.path
		}
		if f.path == "" {
			return f.member
		}
		return f.path + "." + f.member
	}
	valueDone := func() {
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return Validation("", "malformed JSON: %v", err)
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				stack = append(stack, &frame{object: t == '{', seen: map[string]bool{}, path: child(), key: true})
			case '}', ']':
				stack = stack[:len(stack)-1]
				valueDone()
			}
			continue
		case string:
			if len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].key {
				f := stack[len(stack)-1]
				f.member, f.key = t, false
				if f.seen[t] {
					return Validation(child(), "member %q given more than once", t)
				}
				f.seen[t] = true
				continue
			}
		}
		valueDone()
	}
	if i := badEscape(b); i >= 0 {
		return Validation("", "malformed JSON: \\u escape at offset %d is not valid UTF-16", i)
	}
	return nil
}

// badEscape returns the offset of the first `\u` escape in a string of b that encodes a lone
// surrogate, or -1.
func badEscape(b []byte) int {
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !inString {
			inString = c == '"'
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 < len(b) && b[i+1] == 'u' {
				r := hex4(b, i+2)
				switch {
				case r >= 0xD800 && r < 0xDC00:
					if i+7 >= len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
						return i
					}
					if lo := hex4(b, i+8); lo < 0xDC00 || lo > 0xDFFF {
						return i
					}
					i += 11
					continue
				case r >= 0xDC00 && r <= 0xDFFF:
					return i
				}
				i += 5
				continue
			}
			i++ // the escaped character
		}
	}
	return -1
}

// hex4 reads four hex digits at b[i:], or -1.
func hex4(b []byte, i int) int {
	if i+4 > len(b) {
		return -1
	}
	n, err := strconv.ParseUint(string(b[i:i+4]), 16, 32)
	if err != nil {
		return -1
	}
	return int(n)
}
