// Package sk is the host's one Signal K vocabulary: the values it publishes, the deltas it
// receives, inbound PUT requests with their handlers and results, and the answers to outbound
// PUTs. The delta stream (host/skstream), the client (host/signalk), the plugin host
// (host/plugin) and the bridge between the last two all speak these types, so a value or a PUT
// crosses them without being copied into a look-alike struct or cast between enums that only
// happen to be numbered alike.
//
// The package is a leaf on the standard library alone. The plugin ABI (package abi) keeps its
// own wire records (abi.PutRequest carries a request number and a typed abi.Value, abi.PutResult
// is one byte on the wire); host/plugin maps them to these types by name, never by ordinal.
package sk

import "encoding/json"

// Value is one value for vessels.self. Value is a float64, string, bool, nil (JSON null) or
// json.RawMessage (any other JSON value); the stream also takes other numbers and JSON-encodes
// anything else.
type Value struct {
	Path  string
	Value any
}

// Source is where values published with their own source come from (ABI 1.5,
// sk_publish_src): the update's source is `{label: <the device's label>, type, src, pgn,
// instance}`, named `<label>.<src>` by the server. The zero Source is the device's own. Its
// members are abi.Source's, in the same order, so one converts to the other.
type Source struct {
	Type     string // NMEA2000, NMEA0183, Plugin...
	Src      string // the sender: for NMEA2000 its bus address in decimal
	PGN      uint32 // the NMEA 2000 PGN, 0 for none
	Instance string // "" for none
}

// Sourced is a PUT-able path's state that came with a source of its own (a relayed switch
// bank's status): a PUT handler's current state answers it so that the state is published again
// under that source, not under the device's own. signalk-server routes a PUT by the sources a
// path has; a second, device-sourced copy of a relayed state would make it ask for a source.
type Sourced struct {
	Source Source
	Value  any
}

// Delta is one value received for a subscription, or one meta entry when Meta is set (the
// stream delivers those; the client drops them before its subscribers).
type Delta struct {
	Context   string
	Path      string
	Value     json.RawMessage
	Timestamp string
	Source    string // $source of the update, when given
	Meta      bool
}

// PutResult is a handler's answer to an inbound PUT: a row of the spec's handler-result table.
type PutResult int

// The four handler results.
const (
	PutSuccess  PutResult = iota // COMPLETED 200
	PutInvalid                   // COMPLETED 400
	PutFailure                   // COMPLETED 502
	PutDeferred                  // PENDING 202, completed by a later reply
)

// PutRequest is one path of an inbound PUT.
type PutRequest struct {
	RequestID string
	Context   string
	Path      string
	Value     json.RawMessage
}

// PutHandler answers an inbound PUT through reply: once with PutSuccess, PutInvalid or
// PutFailure; or first with PutDeferred and later once more with the final result. A handler
// that returns without replying is treated as deferred. Replies after the final one are
// ignored. It must not block; reply may be called from any goroutine.
type PutHandler func(req PutRequest, reply func(result PutResult, message string))

// PutAnswer is the server's answer to an outbound PUT. State is COMPLETED, FAILED or TIMEOUT
// (no final answer within 10 s); StatusCode is the server's statusCode (0 when none).
type PutAnswer struct {
	RequestID  string `json:"requestId"`
	Path       string `json:"path"`
	State      string `json:"state"`
	StatusCode int    `json:"statusCode,omitempty"`
	Message    string `json:"message,omitempty"`
}

// OK reports a COMPLETED answer with a 2xx status.
func (a PutAnswer) OK() bool {
	return a.State == "COMPLETED" && a.StatusCode >= 200 && a.StatusCode < 300
}
