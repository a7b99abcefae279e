package signalk

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"devhost/host/api"
	"devhost/host/sk"
)

// ServerStatus is the `server` object of /sk/status.
type ServerStatus struct {
	Host   string `json:"host"`
	Port   int    `json:"port"`
	Scheme string `json:"scheme"`
	Self   string `json:"self"`
	// Source is manual (sk.server_host), discovered, or none.
	Source string `json:"source"`
	Guess  bool   `json:"scheme_guessed"`
}

// StatusDoc is GET /sk/status and the `sk` event.
type StatusDoc struct {
	Server ServerStatus `json:"server"`
	Token  TokenStatus  `json:"token"`
	WS     any          `json:"ws"`
	// TimeSubscribed tells whether navigation.datetime is subscribed for the clock.
	TimeSubscribed bool `json:"time_subscribed"`
}

// Status answers the /sk/status document.
func (c *Client) Status() StatusDoc {
	d := StatusDoc{Token: c.tm.Status(), WS: c.stream.Status(), TimeSubscribed: c.timeSubOn.Load()}
	s := c.Server()
	if _, cur := c.tm.token(); cur != nil && s != nil && cur.Host == s.Host && cur.Port == s.Port {
		// The token machine learns a manual server's self URN.
		s.Self = cur.Self
	}
	if s == nil {
		d.Server = ServerStatus{Source: "none"}
	} else {
		d.Server = ServerStatus{Host: s.Host, Port: s.Port, Scheme: s.Scheme, Self: s.Self, Source: s.Source, Guess: s.Guess}
	}
	return d
}

// ServerEntry is one server of /sk/servers.
type ServerEntry struct {
	Self   string            `json:"self"`
	Roles  []string          `json:"roles"`
	SWName string            `json:"swname"`
	SWVers string            `json:"swvers"`
	Host   string            `json:"host"`
	Port   int               `json:"port"`
	Scheme string            `json:"scheme"`
	TXT    map[string]string `json:"txt"`
	// AgeS is the time since a pass last saw it (null when unknown).
	AgeS *int64 `json:"age_s"`
	// SkippedS is how long it stays skipped as unreachable (0: not skipped).
	SkippedS int64 `json:"skipped_s"`
	Chosen   bool  `json:"chosen"`
}

// ServersDoc is GET /sk/servers and the `sk_servers` event.
type ServersDoc struct {
	Servers []ServerEntry `json:"servers"`
}

// Servers answers the /sk/servers document.
func (c *Client) Servers() ServersDoc {
	now := c.clk.Now()
	skipped, _ := c.skips.snapshot(now)
	cur := c.Server()
	d := ServersDoc{Servers: []ServerEntry{}}
	for _, s := range c.discovered() {
		e := ServerEntry{Self: s.Self, Roles: s.Roles, SWName: s.SWName, SWVers: s.SWVers,
			Host: s.Host, Port: s.Port, Scheme: s.Scheme, TXT: s.TXT}
		if e.Roles == nil {
			e.Roles = []string{}
		}
		if e.TXT == nil {
			e.TXT = map[string]string{}
		}
		if e.SWName == "" {
			e.SWName = s.TXT["swname"]
		}
		if e.SWVers == "" {
			e.SWVers = s.TXT["swvers"]
		}
		if !s.LastSeen.IsZero() {
			a := int64(now.Sub(s.LastSeen) / time.Second)
			if a < 0 {
				a = 0
			}
			e.AgeS = &a
		}
		if until, ok := skippedUntil(skipped, s); ok {
			e.SkippedS = int64((until.Sub(now) + time.Second - 1) / time.Second)
		}
		// One server may be listed twice (http and https) and servers without a self share
		// the empty one: the chosen entry is the very address in use.
		e.Chosen = cur != nil && cur.Source == "discovered" && cur.Self == s.Self &&
			cur.Host == s.Host && cur.Port == s.Port && cur.Scheme == s.Scheme
		d.Servers = append(d.Servers, e)
	}
	return d
}

// PutRecord is GET /sk/put: the last PUT sent through POST /sk/put and its answer.
type PutRecord struct {
	Path       string          `json:"path"`
	Value      json.RawMessage `json:"value"`
	State      string          `json:"state"` // PENDING until the answer, then COMPLETED, FAILED or TIMEOUT
	StatusCode int             `json:"statusCode,omitempty"`
	Message    string          `json:"message,omitempty"`
	// AgeS is the time since the PUT was sent.
	AgeS int64     `json:"age_s"`
	sent time.Time `json:"-"`
	// prev is the record this one replaced, kept while the PUT may still be refused; dead marks
	// a PUT that was never sent.
	prev *PutRecord
	dead bool
}

// Routes are the Signal K client's endpoints (GET/DELETE /sk/tls and PUT /sk/tls/ca belong to
// the TLS component).
func (c *Client) Routes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/sk/status", Handler: c.getStatus},
		{Method: http.MethodGet, Path: "/sk/servers", Handler: c.getServers},
		{Method: http.MethodPost, Path: "/sk/request", Handler: c.postRequest, NoBody: true},
		{Method: http.MethodPost, Path: "/sk/token", Handler: c.postToken},
		{Method: http.MethodPost, Path: "/sk/put", Handler: c.postPut},
		{Method: http.MethodGet, Path: "/sk/put", Handler: c.getPut},
	}
}

func (c *Client) getStatus(w http.ResponseWriter, _ *http.Request) {
	api.WriteJSON(w, http.StatusOK, c.Status())
}

func (c *Client) getServers(w http.ResponseWriter, _ *http.Request) {
	api.WriteJSON(w, http.StatusOK, c.Servers())
}

// noServer is the answer while no server is chosen.
func noServer() *api.Error {
	return api.Errorf(http.StatusConflict, api.CodeConflict, "no Signal K server is chosen")
}

// postRequest asks for access again: 202 with the status document.
func (c *Client) postRequest(w http.ResponseWriter, r *http.Request) {
	if b, err := api.ReadBody(r); err != nil {
		api.WriteErr(w, err)
		return
	} else if len(strings.TrimSpace(string(b))) > 0 {
		// An empty object is tolerated; anything else is not a request of this endpoint.
		var m map[string]json.RawMessage
		if err := api.Unmarshal(b, &m); err != nil || len(m) > 0 {
			api.WriteErr(w, api.Validation("", "POST /sk/request takes no body"))
			return
		}
	}
	if err := c.tm.requestAgain(r.Context()); err != nil {
		if errors.Is(err, ErrNoServer) {
			api.WriteErr(w, noServer())
			return
		}
		api.WriteErr(w, err)
		return
	}
	api.WriteJSON(w, http.StatusAccepted, c.Status())
}

// objectBody decodes a JSON object body whose members are all among members; an unknown one
// is a validation error naming it, as api.Unmarshal names it for a struct. Members are read
// raw so that each endpoint words its own error for a member of the wrong type.
func objectBody(r *http.Request, members ...string) (map[string]json.RawMessage, error) {
	var body map[string]json.RawMessage
	if err := api.DecodeJSON(r, &body); err != nil {
		return nil, err
	}
	for k := range body {
		if !slices.Contains(members, k) {
			return nil, api.Validation(k, "unknown member %q", k)
		}
	}
	return body, nil
}

// postToken sets a token by hand and verifies it at once.
func (c *Client) postToken(w http.ResponseWriter, r *http.Request) {
	body, err := objectBody(r, "token")
	if err != nil {
		api.WriteErr(w, err)
		return
	}
	var tok string
	if raw, ok := body["token"]; !ok || json.Unmarshal(raw, &tok) != nil {
		api.WriteErr(w, api.Validation("token", "token must be a string"))
		return
	}
	tok = strings.TrimSpace(tok)
	if tok == "" || len(tok) > 4096 || strings.ContainsAny(tok, " \t\r\n") {
		api.WriteErr(w, api.Validation("token", "token must be 1..4096 characters without spaces"))
		return
	}
	err = c.tm.setToken(r.Context(), tok)
	switch {
	case errors.Is(err, ErrNoServer):
		api.WriteErr(w, noServer())
	case errors.Is(err, errTokenRefused):
		api.WriteErr(w, api.Validation("token", "%v", err))
	case err != nil:
		api.WriteErr(w, err)
	default:
		status := http.StatusOK
		if c.tm.Status().State != StateApproved {
			// Kept, but not verified yet (the server did not answer, or a certificate refusal).
			status = http.StatusAccepted
		}
		api.WriteJSON(w, status, c.Status())
	}
}

// postPut sends a PUT to the server through the stream: 202 at once; the answer shows up in
// GET /sk/put.
func (c *Client) postPut(w http.ResponseWriter, r *http.Request) {
	body, err := objectBody(r, "path", "value")
	if err != nil {
		api.WriteErr(w, err)
		return
	}
	var path string
	if raw, ok := body["path"]; !ok || json.Unmarshal(raw, &path) != nil || !validPath(path) {
		api.WriteErr(w, api.Validation("path", "path must be a dotted Signal K path"))
		return
	}
	value, ok := body["value"]
	if !ok {
		api.WriteErr(w, api.Validation("value", "value is required"))
		return
	}
	value = json.RawMessage(compact(value))
	// The record is in place before the PUT goes out, so an answer that comes back before Put
	// returns finds it. An answer always lands in its own record: a record that is not the
	// newest now may be again, when a newer PUT turns out refused.
	c.mu.Lock()
	rec := &PutRecord{Path: path, Value: value, State: "PENDING", sent: c.clk.Now(), prev: c.lastPut}
	c.lastPut = rec
	c.mu.Unlock()
	err = c.Put(path, value, func(a sk.PutAnswer) {
		c.mu.Lock()
		rec.State, rec.StatusCode, rec.Message = a.State, a.StatusCode, a.Message
		c.mu.Unlock()
	})
	c.mu.Lock()
	if err == nil {
		rec.prev = nil
	} else {
		// Nothing was sent: GET /sk/put goes back to the newest PUT that was.
		rec.dead = true
		if c.lastPut == rec {
			back := rec.prev
			for back != nil && back.dead {
				back = back.prev
			}
			c.lastPut = back
		}
	}
	c.mu.Unlock()
	if err != nil {
		switch {
		case errors.Is(err, ErrBusy):
			api.WriteErr(w, api.Errorf(http.StatusConflict, api.CodeBusy, "8 PUTs in flight"))
		case errors.Is(err, ErrInvalidState):
			api.WriteErr(w, api.Errorf(http.StatusConflict, api.CodeConflict, "the Signal K stream is down"))
		default:
			api.WriteErr(w, api.Validation("", "%v", err))
		}
		return
	}
	api.WriteJSON(w, http.StatusAccepted, map[string]any{"path": path, "state": "PENDING"})
}

func (c *Client) getPut(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	var out PutRecord
	if c.lastPut != nil {
		out = *c.lastPut
		out.AgeS = int64(c.clk.Since(out.sent) / time.Second)
	} else {
		out = PutRecord{State: "NONE", Value: json.RawMessage("null")}
	}
	c.mu.Unlock()
	api.WriteJSON(w, http.StatusOK, out)
}

func compact(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

// validPath accepts a dotted Signal K path: segments of letters, digits, '_', '-', ':' and
// '@' (as the spec's own paths and URN-like keys use), at most 256 bytes.
func validPath(p string) bool {
	if p == "" || len(p) > 256 {
		return false
	}
	for _, seg := range strings.Split(p, ".") {
		if seg == "" {
			return false
		}
		for _, r := range seg {
			ok := r == '_' || r == '-' || r == ':' || r == '@' ||
				(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
			if !ok {
				return false
			}
		}
	}
	return true
}
