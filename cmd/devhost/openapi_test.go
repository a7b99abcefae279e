package main_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"devhost/host/httpd"
)

// TestOpenAPIMatchesRouter checks GET /api/v1/openapi.json against the device's router, route
// by route, and that every route has words. A route added without documentation fails here
// with what to do.
func TestOpenAPIMatchesRouter(t *testing.T) {
	d := newDev(t, withArgs("--debug-crash")) // POST /system/crash exists only with its build option
	doc := getDoc[struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}](d, "/api/v1/openapi.json")
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	type op struct {
		method, path string // path as registered: /plugins/:id
		public       bool
	}
	var ops []op
	served := map[string]bool{}
	var undocumented []string
	for p, byMethod := range doc.Paths {
		rp := strings.NewReplacer("{", ":", "}", "").Replace(p)
		for m, o := range byMethod {
			id := strings.ToUpper(m) + " " + rp
			served[id] = true
			sec, _ := o["security"].([]any)
			ops = append(ops, op{strings.ToUpper(m), rp, sec != nil && len(sec) == 0})
			if o["x-undocumented"] == true {
				undocumented = append(undocumented, id)
			}
		}
	}
	sort.Strings(undocumented)
	for _, id := range undocumented {
		method, path, _ := strings.Cut(id, " ")
		t.Errorf("route %s is served but has no documentation: give its api.Route a Doc "+
			"(&api.Doc{Summary, Description, Request, Status, Response}) or add %q to httpd.RouteDocs "+
			"in host/httpd/openapi_docs.go (path relative to /api/v1, as registered)", id, method+" "+path)
	}
	for id := range httpd.RouteDocs {
		if !served[id] {
			t.Errorf("httpd.RouteDocs documents %s, which the device does not serve: correct or remove the entry", id)
		}
	}

	// Over the wire: each documented operation reaches its route. With a key set, a
	// protected route answers 401 (the router matched it; an unknown one is 404, a wrong
	// method 405); a public write answers 415 to a non-JSON body before its handler runs.
	d.putConfig(`{"httpd":{"api_key":"boat-key-42"}}`)
	sort.Slice(ops, func(i, j int) bool { return ops[i].path+ops[i].method < ops[j].path+ops[j].method })
	for _, o := range ops {
		path := "/api/v1" + strings.NewReplacer(":id", "x", ":sub", "y").Replace(o.path)
		name := fmt.Sprintf("%s %s", o.method, o.path)
		switch {
		case !o.public:
			if r := d.call(o.method, path, "", "Content-Type", "text/plain"); r.status != 401 {
				t.Errorf("%s: %d %s, want 401 from its protected route", name, r.status, r.body)
			}
		case o.method == "GET":
			if r := d.call(o.method, path, ""); r.status == 404 || r.status == 405 {
				t.Errorf("%s: %d %s, want the public route's answer", name, r.status, r.body)
			}
		default:
			if r := d.call(o.method, path, "{}", "Content-Type", "text/plain"); r.status != 415 {
				t.Errorf("%s: %d %s, want 415 from its public route", name, r.status, r.body)
			}
		}
	}
}
