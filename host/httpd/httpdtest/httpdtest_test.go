package httpdtest

import (
	"net/http"
	"testing"

	"devhost/host/api"
	"devhost/host/httpd"
)

// A route registered before Start answers at the base URL.
func TestStartServes(t *testing.T) {
	s := httpd.New(httpd.Options{})
	if err := s.Handle(api.Route{Method: "GET", Path: "/thing", Public: true, Handler: func(w http.ResponseWriter, _ *http.Request) {
		api.WriteJSON(w, http.StatusOK, "ok")
	}}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(Start(t, s) + httpd.Prefix + "/thing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
}
