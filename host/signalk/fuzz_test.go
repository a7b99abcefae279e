package signalk

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzAccessAnswers feeds the parsers of the server's access-request answers: a poll answer
// never panics, an approval always carries a token, and a pending href is always a path on
// the same server.
func FuzzAccessAnswers(f *testing.F) {
	f.Add(200, []byte(pendingJS))
	f.Add(200, []byte(approved))
	f.Add(200, []byte(deniedJS))
	f.Add(500, []byte("Unable to check request: not found"))
	f.Add(200, []byte(`{"state":"COMPLETED","accessRequest":{"permission":"APPROVED"}}`))
	f.Add(202, []byte(`<html>`))
	f.Add(200, []byte(`{"state":"PENDING","href":"http://evil.example/x?y=1"}`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		out, tok := classifyPoll(status, body)
		if (out == pollApproved) != (tok != "") {
			t.Fatalf("outcome %d with token %q", out, tok)
		}
		if out != pollForget && out != pollUnusable && status/100 != 2 {
			t.Fatalf("outcome %d from status %d", out, status)
		}
		if status == http.StatusNotFound && out != pollForget {
			t.Fatal("404 must forget the request")
		}
		if h := hrefPath(string(body)); h != "" && !strings.HasPrefix(h, "/") {
			t.Fatalf("href %q is not a path", h)
		}
	})
}
