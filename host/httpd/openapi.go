package httpd

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"devhost/host/api"
)

// The device describes its own API: GET /api/v1/openapi.json is an OpenAPI 3.1 document
// generated on every request from the router's tables (core routes, then the application
// routes present at that moment), so it and the router agree route by route by construction.
// Each operation's words come from the route's api.Doc or, for core routes, RouteDocs. A
// route documented neither way is still listed, with `x-undocumented: true`, and the
// agreement test fails on it. The document is protected like every endpoint not named public
// by the spec: it describes the device's surface to someone who may use it.

// OpenAPIPath is where the document is served, relative to Prefix.
const OpenAPIPath = "/openapi.json"

// openAPIRoute is the document's own route, added by New.
func (s *Server) openAPIRoute() api.Route {
	return api.Route{Method: http.MethodGet, Path: OpenAPIPath, Handler: api.Document(s.OpenAPI)}
}

// docFor is the words of a route, and false when it has none.
func docFor(rt api.Route, table map[string]api.Doc) (api.Doc, bool) {
	if rt.Doc != nil {
		return *rt.Doc, rt.Doc.Summary != ""
	}
	d, ok := table[rt.Method+" "+rt.Path]
	return d, ok && d.Summary != ""
}

// OpenAPI builds the document.
func (s *Server) OpenAPI() map[string]any {
	paths := map[string]map[string]any{}
	add := func(rt api.Route, owner string) {
		p := openAPIPathOf(rt.Path)
		if paths[p] == nil {
			paths[p] = map[string]any{}
		}
		doc, ok := docFor(rt, RouteDocs)
		if owner != "" && !ok {
			doc, ok = api.Doc{Summary: "Endpoint of application " + owner}, true
		}
		op := operation(rt, doc)
		if !ok {
			op["x-undocumented"] = true
		}
		if owner != "" {
			op["x-dev-application"] = owner
		}
		paths[p][strings.ToLower(rt.Method)] = op
	}
	for _, rt := range s.coreRoutes {
		add(rt, "")
	}
	s.appMu.Lock()
	for owner, rs := range s.appRoutes {
		for _, rt := range rs {
			add(rt, owner)
		}
	}
	s.appMu.Unlock()
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "devhost device API",
			"version": "1",
			"description": "The REST API of a devhost device, under /api/v1. Every error is JSON " +
				"{error, path?, message?} with the status of the device's error table. Endpoints " +
				"need the API key (Bearer) or a session cookie once a key is set, unless their " +
				"security list is empty.",
		},
		"servers": []any{map[string]any{"url": Prefix}},
		"paths":   paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{
				"bearer":  map[string]any{"type": "http", "scheme": "bearer", "description": "The API key (httpd.api_key)."},
				"session": map[string]any{"type": "apiKey", "in": "cookie", "name": "dev_sid", "description": "Session from POST /auth/login."},
			},
			"schemas": map[string]any{
				"Error": map[string]any{
					"type":     "object",
					"required": []string{"error"},
					"properties": map[string]any{
						"error":   map[string]any{"type": "string", "description": "The error code."},
						"path":    map[string]any{"type": "string", "description": "The offending member, for validation errors."},
						"message": map[string]any{"type": "string", "description": "What went wrong, for people."},
					},
				},
			},
		},
	}
}

// operation is one route's OpenAPI operation object.
func operation(rt api.Route, doc api.Doc) map[string]any {
	op := map[string]any{"summary": doc.Summary, "operationId": operationID(rt)}
	if doc.Description != "" {
		op["description"] = doc.Description
	}
	if rt.Public {
		op["security"] = []any{}
	} else {
		op["security"] = []any{map[string]any{"bearer": []string{}}, map[string]any{"session": []string{}}}
	}
	var params []any
	for _, seg := range strings.Split(rt.Path, "/") {
		if name, ok := paramName(seg); ok {
			params = append(params, map[string]any{"name": name, "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
	}
	if params != nil {
		op["parameters"] = params
	}
	if doc.Request != "" {
		op["requestBody"] = map[string]any{
			"required":    true,
			"description": doc.Request,
			"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{}}},
		}
	}
	status := doc.Status
	status = cmp.Or(status, http.StatusOK)
	resp := map[string]any{"description": orDefault(doc.Response, http.StatusText(status))}
	switch {
	case status == http.StatusNoContent:
	case rt.Stream && rt.Path == "/events":
		resp["content"] = map[string]any{"text/event-stream": map[string]any{"schema": map[string]any{"type": "string"}}}
	default:
		resp["content"] = map[string]any{"application/json": map[string]any{"schema": map[string]any{}}}
	}
	op["responses"] = map[string]any{
		strconv.Itoa(status): resp,
		"default": map[string]any{
			"description": "An error of the device's error table.",
			"content": map[string]any{"application/json": map[string]any{
				"schema": map[string]any{"$ref": "#/components/schemas/Error"}}},
		},
	}
	return op
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// paramName reads an httprouter parameter segment (:name or *name).
func paramName(seg string) (string, bool) {
	if strings.HasPrefix(seg, ":") || strings.HasPrefix(seg, "*") {
		return seg[1:], true
	}
	return "", false
}

// openAPIPathOf turns /plugins/:id into /plugins/{id}.
func openAPIPathOf(p string) string {
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		if name, ok := paramName(seg); ok {
			segs[i] = "{" + name + "}"
		}
	}
	return strings.Join(segs, "/")
}

// operationID is a stable name: method and path words, e.g. put_config, get_plugins_id_sub.
func operationID(rt api.Route) string {
	words := []string{strings.ToLower(rt.Method)}
	for _, seg := range strings.Split(rt.Path, "/") {
		seg = strings.TrimLeft(seg, ":*")
		seg = strings.NewReplacer("-", "_", ".", "_").Replace(seg)
		if seg != "" {
			words = append(words, seg)
		}
	}
	return strings.Join(words, "_")
}

// Undocumented lists the served routes ("METHOD path") that have no words in the document,
// sorted.
func (s *Server) Undocumented() []string {
	var out []string
	for id, rt := range s.coreRoutes {
		if _, ok := docFor(rt, RouteDocs); !ok {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}
