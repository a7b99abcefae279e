package api

import "net/http"

// Route is one endpoint a capability offers. Path is relative to /api/v1 and uses httprouter's
// syntax. Routes are protected (need a credential once a key is set) unless Public.
type Route struct {
	Method  string
	Path    string
	Handler http.HandlerFunc
	// Public routes skip authentication (spec Authentication rule 6).
	Public bool
	// NoBody routes are state-changing requests the spec defines without a body (POST
	// /system/reboot); they still need the JSON content type but not a Content-Length.
	NoBody bool
	// Stream routes (SSE, chunked logs) are exempt from the write timeout.
	Stream bool
}

// Registrar is where a capability adds its routes. The HTTP server implements it; a route
// whose method and path another route already holds is refused with an error, never a panic.
type Registrar interface {
	Handle(rt Route) error
}
