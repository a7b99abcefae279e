package plugin

import (
	"encoding/json"
	"time"

	"devhost/host/api"
	"devhost/host/sk"
)

// The host reaches the device through these interfaces; the device wiring implements them.
// Every method may be called from any goroutine. Callbacks handed to them (deliver, reply,
// answer, watch functions) never block: the host queues their work for the plugin.
//
// Errors: an implementation may wrap an abi.Errno (errors.Is(err, abi.ErrBusy)) to choose the
// code the plugin sees; otherwise each host function uses the ABI's default for that call
// (hardware fault for GPIO, CAN and BLE; invalid state for Signal K).

// ConfigRegistry is the run-time namespace registry (package runtimens) plus the effective
// values of a namespace.
type ConfigRegistry interface {
	// Register adds the namespace `f_<id>` from a descriptor in the spec's JSON shape and
	// returns its name (runtimens.Registry.RegisterJSON).
	Register(id string, descriptor []byte) (string, error)
	// Unregister removes it; stored values stay (runtimens.Registry.Unregister).
	Unregister(id string) error
	// Purge erases the stored values of an unregistered namespace (runtimens.Registry.Purge).
	Purge(id string) error
	// Values is the effective values of namespace ns as a JSON object keyed by key name,
	// secrets in clear: the plugin owns them.
	Values(ns string) (json.RawMessage, error)
}

// Health is the condition table (package health): Report never carries the reboot flag;
// ReportFatal does. state is normal, warn or alarm.
type Health interface {
	Report(key, state, message string) error
	ReportFatal(key, state, message string) error
}

// Router is the HTTP server's application table (httpd.Server.AddApp and RemoveApp).
type Router interface {
	AddApp(owner string, routes ...api.Route) error
	RemoveApp(owner string)
}

// Clock reads the device's wall clock: the time, its source and whether it is synced.
type Clock func() (t time.Time, source string, synced bool)

// Power counts application holds of the power duty cycle (package power).
type Power interface {
	// Hold keeps the device awake for the plugin with this id until the returned release is
	// called (once). The id lets the duty cycle show which plugin holds it; the host releases
	// the hold when the plugin's instance ends (stop, crash, removal, shutdown).
	Hold(plugin string) (release func())
}

// GPIO is the board's general-purpose pins.
type GPIO interface {
	// Read answers a pin's level; a pin the board lacks wraps abi.ErrNotFound.
	Read(pin int) (high bool, err error)
	// Write drives an output pin; a pin fault is any other error.
	Write(pin int, high bool) error
	// Watch calls fn on every level change of an input pin until cancel is called.
	Watch(pin int, fn func(pin int, high bool)) (cancel func(), err error)
}

// CANFrame is one CAN bus frame.
type CANFrame struct {
	ID       uint32 `json:"id"`
	Extended bool   `json:"ext,omitempty"` // 29-bit id
	Remote   bool   `json:"rtr,omitempty"`
	Data     []byte `json:"data"` // at most 8 bytes
}

// CAN is the board's CAN bus.
type CAN interface {
	Send(f CANFrame) error
	// Receive calls fn with every received frame until cancel is called.
	Receive(fn func(CANFrame)) (cancel func(), err error)
}

// BLEAdvert is an advertisement seen by a scan.
type BLEAdvert struct {
	Address string `json:"addr"`
	RSSI    int    `json:"rssi"`
	Data    []byte `json:"data"`
}

// BLE is the board's Bluetooth LE radio.
type BLE interface {
	// Advertise starts (or replaces) the device's advertisement (payload of at most 31 bytes).
	Advertise(data []byte) error
	StopAdvertising() error
	// Scan calls fn with every advertisement seen until cancel is called.
	Scan(fn func(BLEAdvert)) (cancel func(), err error)
}

// SignalK is the Signal K client as plugins use it.
type SignalK interface {
	// Publish queues values for vessels.self; it never blocks. It keeps the values, not the
	// slice: the caller reuses it.
	Publish(values ...sk.Value) error
	// PublishContext is Publish for another context (abi.ValidContext's grammar, checked
	// by the caller): another vessel, an aid to navigation, a base station...; a value with
	// the empty path carries a JSON object of members of the context's root.
	PublishContext(context string, values ...sk.Value) error
	// PublishSource is PublishContext (context "": vessels.self, as Publish) with the
	// values' own source (abi.Source.Validate's rules, checked by the caller): the device's
	// label and the source's type, src, pgn and instance (ABI 1.5).
	PublishSource(src sk.Source, context string, values ...sk.Value) error
	// DeclareMeta declares the metadata of a non-standard path.
	DeclareMeta(path string, meta json.RawMessage) error
	// Subscribe delivers deltas for an exact path or a family (`prefix.*`, `prefix*`, `*`).
	// A full subscription table (48) wraps abi.ErrLimit.
	Subscribe(pattern string, deliver func(sk.Delta)) (cancel func(), err error)
	// HandlePut routes inbound PUTs for paths matching pattern to h.
	HandlePut(pattern string, h sk.PutHandler) (remove func(), err error)
	// Put sends an outbound PUT; answer is called once with the server's answer (or TIMEOUT).
	// An error means nothing was sent: abi.ErrBusy with 8 in flight, otherwise invalid state
	// (the stream is down).
	Put(path string, value json.RawMessage, answer func(sk.PutAnswer)) error
}
