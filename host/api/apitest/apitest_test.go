package apitest

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"devhost/host/api"
)

func TestIsValidation(t *testing.T) {
	for _, err := range []error{api.Validation("a", "bad"), fmt.Errorf("apply: %w", api.Validation("", "bad"))} {
		if !IsValidation(err) {
			t.Errorf("%v: not taken for a validation error", err)
		}
	}
	for _, err := range []error{
		api.Errorf(http.StatusBadRequest, api.CodeBadRequest, "other code"),
		&api.Error{Status: http.StatusConflict, Code: api.CodeValidation, Message: "other status"},
		errors.New("plain"), nil,
	} {
		if IsValidation(err) {
			t.Errorf("%v: taken for a validation error", err)
		}
	}
}

func TestErr(t *testing.T) {
	if e := Err(t, fmt.Errorf("x: %w", api.Validation("p", "bad"))); e.Code != api.CodeValidation || *e.Path != "p" {
		t.Fatalf("Err = %+v", e)
	}
}

func TestErrorCode(t *testing.T) {
	w := httptest.NewRecorder()
	api.WriteErr(w, api.Validation("a", "bad"))
	resp := w.Result()
	if got := ResponseCode(t, resp); got != api.CodeValidation {
		t.Fatalf("ResponseCode = %q", got)
	}
	for _, b := range []string{`[]`, `{}`, `not JSON`, ``} {
		if got := ErrorCode([]byte(b)); got != "" {
			t.Errorf("ErrorCode(%q) = %q, want none", b, got)
		}
	}
}
