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
	// Doc describes the route in the device's OpenAPI document (GET /api/v1/openapi.json).
	// A route without one is looked up in the HTTP server's table of core route docs.
	Doc *Doc
}

// Doc is a route's entry in the OpenAPI document.
type Doc struct {
	Summary     string
	Description string
	// Request describes the JSON request body; "" for a route without one.
	Request string
	// Status is the success status (0 means 200); Response describes its body.
	Status   int
	Response string
}

// Registrar is where a capability adds its routes. The HTTP server implements it; a route
// whose method and path another route already holds is refused with an error, never a panic.
type Registrar interface {
	Handle(rt Route) error
}
