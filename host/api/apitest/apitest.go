// Package apitest holds the checks the tests of the API's packages make on their errors: which
// *api.Error an error carries, and whether it is the 400 `validation` answer.
package apitest

import (
	"errors"
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
