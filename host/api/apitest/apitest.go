// Package apitest holds the checks the tests of the API's packages make on their errors: which
// *api.Error an error carries, whether it is the 400 `validation` answer, and the code of an
// error body on the wire.
package apitest

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"devhost/host/api"
)

// Err answers the *api.Error err carries, and fails the test when it carries none.
func Err(t testing.TB, err error) *api.Error {
	t.Helper()
	var e *api.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not an *api.Error", err)
	}
	return e
}

// IsValidation tells whether err carries a 400 `validation` error.
func IsValidation(err error) bool {
	var e *api.Error
	return errors.As(err, &e) && e.Status == http.StatusBadRequest && e.Code == api.CodeValidation
}

// ErrorCode answers the `error` member of a JSON error body, or "" when b is none.
func ErrorCode(b []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil {
		return ""
	}
	return e.Error
}

// ResponseCode reads and closes resp's body and answers its error code; it fails the test
// unless the body is a JSON error body.
func ResponseCode(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q, want application/json", ct)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	code := ErrorCode(b)
	if code == "" {
		t.Fatalf("status %d: %q is no error body", resp.StatusCode, b)
	}
	return code
}

// FuzzParser fuzzes an endpoint's body parser from seeds: every refusal must be a 400
// `validation` error, and every body parse accepts goes to accepted for the endpoint's own
// checks.
func FuzzParser[T any](f *testing.F, seeds []string, parse func([]byte) (T, error), accepted func(t *testing.T, b []byte, v T)) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parse(b)
		if err != nil {
			if !IsValidation(err) {
				t.Fatalf("parse %q: error %v is not a 400 validation", b, err)
			}
			return
		}
		accepted(t, b, v)
	})
}
