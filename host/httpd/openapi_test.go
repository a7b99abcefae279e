package httpd

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"devhost/host/api"
)

func TestOpenAPIDocumentFollowsTheRouter(t *testing.T) {
	s, base := newTestServer(t, nil)
	if err := s.Handle(api.Route{Method: "PUT", Path: "/things/:id", Handler: echo,
		Doc: &api.Doc{Summary: "Replace a thing", Request: "{a}", Response: "The thing."}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddApp("app1", api.Route{Method: "GET", Path: "/app1/state", Handler: echo}); err != nil {
		t.Fatal(err)
	}
	resp := do(t, "GET", base+Prefix+OpenAPIPath, "", "")
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	// Route by route: everything the router answers is in the document, and nothing else.
	want := map[string]bool{}
	for id := range s.coreRoutes {
		want[id] = true
	}
	want["GET /app1/state"] = true
	got := map[string]bool{}
	for p, ops := range doc.Paths {
		for m := range ops {
			rp := strings.NewReplacer("{", ":", "}", "").Replace(p)
			got[strings.ToUpper(m)+" "+rp] = true
			if h, _, _ := s.core.Lookup(strings.ToUpper(m), samplePath(rp)); h == nil {
				if h, _, _ := s.app.Load().Lookup(strings.ToUpper(m), samplePath(rp)); h == nil {
					t.Errorf("%s %s is documented but the router does not answer it", m, p)
				}
			}
		}
	}
	for id := range want {
		if !got[id] {
			t.Errorf("%s is served but not in the document", id)
		}
	}
	if len(got) != len(want) {
		t.Errorf("document has %d operations, router %d", len(got), len(want))
	}
	put := doc.Paths["/things/{id}"]["put"]
	if put["summary"] != "Replace a thing" || put["requestBody"] == nil || put["parameters"] == nil {
		t.Fatalf("route doc not used: %v", put)
	}
	if doc.Paths["/thing"]["get"]["x-undocumented"] != true {
		t.Fatalf("an undocumented test route is not flagged: %v", doc.Paths["/thing"]["get"])
	}
	if doc.Paths["/app1/state"]["get"]["x-dev-application"] != "app1" {
		t.Fatalf("application route: %v", doc.Paths["/app1/state"]["get"])
	}
	if doc.Paths["/open"]["get"]["security"] == nil || len(doc.Paths["/open"]["get"]["security"].([]any)) != 0 {
		t.Fatalf("a public route must have an empty security list: %v", doc.Paths["/open"]["get"])
	}
	und := s.Undocumented()
	if len(und) == 0 || und[0] != "GET /boom" {
		t.Fatalf("Undocumented() = %v", und)
	}
}

func TestOpenAPIDocumentIsProtected(t *testing.T) {
	a := &fakeAuth{err: &api.Error{Status: http.StatusUnauthorized, Code: api.CodeUnauthorized}}
	_, base := newTestServer(t, a)
	resp := do(t, "GET", base+Prefix+OpenAPIPath, "", "")
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}
