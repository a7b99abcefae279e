package portal

import (
	"net"
	"net/http"

	"devhost/host/api"
	"devhost/host/httpd"
)

// ProbePaths are the captive-portal probes of the spec: the paths phones and laptops fetch
// to learn whether the network they joined is captive.
var ProbePaths = []string{
	"/generate_204", "/gen_204", "/hotspot-detect.html", "/library/test/success.html",
	"/connecttest.txt", "/ncsi.txt", "/redirect", "/canonical.html", "/success.txt",
}

// Routes are the probes as API routes. They are public to the HTTP server's chain because a
// probe arriving on the portal network needs no credential whatever the key; on the station
// side the handler applies the ordinary credential check itself.
func (p *Portal) Routes() []api.Route {
	rs := make([]api.Route, 0, len(ProbePaths))
	for _, path := range ProbePaths {
		rs = append(rs, api.Route{Method: http.MethodGet, Path: path, Handler: p.probe, Public: true,
			Doc: &api.Doc{Summary: "Captive-portal probe " + path,
				Description: "On the setup portal's network: 302 to the portal's root page, public. On the station side an ordinary protected endpoint (401 with a key set) with the same redirect. Also answered at the root path, where phones fetch it.",
				Status:      http.StatusFound, Response: "No body; Location is the portal's root URL."}})
	}
	return rs
}

// IsProbe reports whether path (without the API prefix) is one of the probes.
func IsProbe(path string) bool {
	for _, pp := range ProbePaths {
		if pp == path {
			return true
		}
	}
	return false
}

// RootProbes answers the probes at the root paths phones and laptops fetch them from
// (http://connectivitycheck.gstatic.com/generate_204 resolves to the portal) with the same API
// routes, passed to srv (the device's HTTP server) under the API prefix so its whole chain
// applies; every other request goes to ui. It is the server's UI handler.
func RootProbes(srv func() http.Handler, ui http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && IsProbe(r.URL.Path) {
			r2 := r.Clone(r.Context())
			r2.URL.Path = httpd.Prefix + r.URL.Path
			r2.URL.RawPath = ""
			srv().ServeHTTP(w, r2)
			return
		}
		ui.ServeHTTP(w, r)
	})
}

// probe answers 302 to the portal's root page.
func (p *Portal) probe(w http.ResponseWriter, r *http.Request) {
	if !p.FromPortal(r) && p.opts.Auth != nil {
		if err := p.opts.Auth.Check(r); err != nil {
			p.opts.Auth.WriteError(w, err)
			return
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, p.RootURL(), http.StatusFound)
}

// FromPortal reports whether r arrived on the portal address while the portal is up.
func (p *Portal) FromPortal(r *http.Request) bool {
	pip := net.ParseIP(p.IP())
	if pip == nil {
		return false
	}
	addr, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	ta, ok := addr.(*net.TCPAddr)
	return ok && ta.IP.Equal(pip)
}
