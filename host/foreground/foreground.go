// Package foreground counts the requests of the device's own API in flight, so that
// background work can give way to them: a plugin's code, which the device runs at a lower
// priority than its management API (package plugin's throttle), checks Busy and holds itself
// back while the API has requests to answer.
//
// The count is process-wide, as the CPU it describes is: the HTTP server (package httpd)
// counts its core routes' requests, not the plugins' own routes (a request waiting for a
// plugin's answer must not hold that plugin back) nor the long-lived event streams.
package foreground

import "sync/atomic"

var inFlight atomic.Int64

// Begin counts a request from the moment it is being answered; End must follow.
func Begin() { inFlight.Add(1) }

// End counts a request answered.
func End() { inFlight.Add(-1) }

// Busy reports whether a request of the API is being answered.
func Busy() bool { return inFlight.Load() > 0 }
