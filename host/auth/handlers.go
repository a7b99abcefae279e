package auth

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"devhost/host/api"
)

// Status is the auth status document (GET /auth/status).
type Status struct {
	Required      bool   `json:"required"`
	Configured    bool   `json:"configured"`
	Authenticated bool   `json:"authenticated"`
	Method        Method `json:"method"`
	RecoveryS     int    `json:"recovery_s"`
}

// Routes are the /auth/* endpoints. All are public: they make their own checks.
func (a *Auth) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodPost, Path: "/auth/login", Handler: a.handleLogin, Public: true},
		{Method: http.MethodPost, Path: "/auth/logout", Handler: a.handleLogout, Public: true, NoBody: true},
		{Method: http.MethodGet, Path: "/auth/status", Handler: a.handleStatus, Public: true},
	}
}

// Status describes r's standing. A wrong Bearer counts toward the throttle, and a Bearer
// during a lockout is answered with the *Throttled error.
func (a *Auth) Status(r *http.Request) (Status, error) {
	key := a.key()
	st := Status{
		Required:   key != "" || a.required,
		Configured: key != "",
		Method:     MethodNone,
		RecoveryS:  a.RecoveryRemaining(),
	}
	m, err := a.check(r, key)
	var t *Throttled
	if errors.As(err, &t) {
		return Status{}, err
	}
	if err == nil && m != MethodNone {
		st.Authenticated = true
		st.Method = m
	}
	return st, nil
}

func (a *Auth) handleStatus(w http.ResponseWriter, r *http.Request) {
	st, err := a.Status(r)
	if err != nil {
		a.WriteError(w, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, st)
}

func (a *Auth) handleLogin(w http.ResponseWriter, r *http.Request) {
	key := a.key()
	if key == "" {
		// The code is the spec's either way; the words must not call the API open when
		// HTTPD_AUTH_REQUIRED is closing it until a key is set.
		msg := "no API key is configured; the API is open"
		if a.required {
			msg = "no API key is configured: set httpd.api_key from the setup portal first"
		}
		a.WriteError(w, &api.Error{Status: http.StatusConflict, Code: api.CodeAuthOpen, Message: msg})
		return
	}
	offered, err := api.ReadParsed(r, ParseLogin)
	if err != nil {
		a.WriteError(w, err)
		return
	}
	if err := a.checkKey(offered, key); err != nil {
		a.WriteError(w, err)
		return
	}
	ttl := a.sessionTTL()
	id := a.newSession(ttl)
	h := w.Header()
	h.Set("Set-Cookie", CookieName+"="+id+"; HttpOnly; SameSite=Strict; Path=/; Max-Age="+
		strconv.FormatInt(int64(ttl.Seconds()), 10))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

func (a *Auth) handleLogout(w http.ResponseWriter, r *http.Request) {
	a.dropSessions(r)
	h := w.Header()
	h.Set("Set-Cookie", CookieName+"=; Max-Age=0; HttpOnly; SameSite=Strict; Path=/")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// ParseLogin decodes the POST /auth/login body: exactly one JSON object whose only member is
// `key`, a string. Anything else is 400 `validation`.
func ParseLogin(b []byte) (string, error) {
	var doc map[string]json.RawMessage
	if err := api.Unmarshal(b, &doc); err != nil {
		return "", err
	}
	if doc == nil {
		return "", api.Validation("", "the body must be a JSON object")
	}
	for name := range doc {
		if name != "key" {
			return "", api.Validation(name, "unknown member")
		}
	}
	raw, ok := doc["key"]
	if !ok {
		return "", api.Validation("key", "missing")
	}
	var key string
	if len(raw) == 0 || raw[0] != '"' {
		return "", api.Validation("key", "must be a string")
	}
	if err := json.Unmarshal(raw, &key); err != nil {
		return "", api.Validation("key", "must be a string")
	}
	return key, nil
}
