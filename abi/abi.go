package abi

import (
	"fmt"
	"strconv"
)

// Version is the ABI major version this package speaks. A host runs a plugin only when the
// manifest's abi equals its major and the manifest's abi_minor is at most Minor.
const Version = 1

// Minor is the ABI minor version: within one major, only additions happen (new host
// functions, new event kinds a plugin may ignore, new capabilities). Minor 1 added
// power_sleep with the power.sleep capability, and mdns_service with the mdns capability.
// Minor 2 added net_open, net_send and net_close with the net.client capability and the
// net_data and net_state events, and what a provisioning plugin needs: the GATT server role
// (ble.peripheral), portal-root routes (portal), the WiFi hand-off (wifi.prov), the proof of
// possession (prov.pop) and the provisioning button (button). Minor 3 added sk_publish_ctx:
// values for another vessel, aid to navigation, base station, aircraft or SAR transponder.
// Minor 4 added dormant: a plugin whose work is off asks to be closed until a Wake condition
// holds, so that it costs (almost) nothing at rest. Minor 5 added sk_publish_src: values
// with a source of their own (an NMEA 2000 sender's address and PGN), for a gateway.
const Minor = 5

// CheckVersion reports whether a plugin built for ABI major.minor runs on this host.
func CheckVersion(major, minor int) error {
	if major != Version {
		return fmt.Errorf("abi: plugin speaks ABI %d, this host speaks ABI %d", major, Version)
	}
	if minor < 0 || minor > Minor {
		return fmt.Errorf("abi: plugin needs ABI %d.%d, this host provides ABI %d.%d", major, minor, Version, Minor)
	}
	return nil
}

// Module is the import module name of every host function, as extism names user functions.
const Module = "extism:host/user"

// Exports every plugin module provides. The host runs the guest runtime's _initialize first
// (before the first call, as extism does), then ExportInit once, then ExportEvent per batch.
const (
	ExportInit  = "dev_init"
	ExportEvent = "dev_event"
)

// Host function names (imported by the plugin from Module).
const (
	FnEventRead       = "event_read"
	FnLog             = "log"
	FnNsRegister      = "ns_register"
	FnConfigGet       = "config_get"
	FnSKPublish       = "sk_publish"
	FnSKMeta          = "sk_meta"
	FnSKSubscribe     = "sk_subscribe"
	FnSKUnsub         = "sk_unsubscribe"
	FnSKPutHandle     = "sk_put_handle"
	FnSKPutReply      = "sk_put_reply"
	FnSKPutSend       = "sk_put_send"
	FnHealthReport    = "health_report"
	FnTimerSet        = "timer_set"
	FnTimerCancel     = "timer_cancel"
	FnPowerHold       = "power_hold"
	FnClockNow        = "clock_now"
	FnHTTPReply       = "http_reply"
	FnSSEPublish      = "sse_publish"
	FnGPIORead        = "gpio_read"
	FnGPIOWrite       = "gpio_write"
	FnGPIOWatch       = "gpio_watch"
	FnCANSend         = "can_send"
	FnCANFilter       = "can_filter"
	FnBLEScan         = "ble_scan"
	FnBLEAdvertise    = "ble_advertise"
	FnMDNSService     = "mdns_service"      // ABI 1.1
	FnPowerSleep      = "power_sleep"       // minor 1
	FnNetOpen         = "net_open"          // minor 2
	FnNetSend         = "net_send"          // minor 2
	FnNetClose        = "net_close"         // minor 2
	FnGATTServe       = "gatt_serve"        // minor 2
	FnGATTReply       = "gatt_reply"        // minor 2
	FnGATTNotify      = "gatt_notify"       // minor 2
	FnBLEScanResponse = "ble_scan_response" // minor 2
	FnPortalServe     = "portal_serve"      // minor 2
	FnPortalReply     = "portal_reply"      // minor 2
	FnWiFiProvision   = "wifi_provision"    // minor 2
	FnWiFiStatus      = "wifi_status"       // minor 2
	FnWiFiWatch       = "wifi_watch"        // minor 2
	FnWiFiScan        = "wifi_scan"         // minor 2
	FnPortalHold      = "portal_hold"       // minor 2
	FnProvPoP         = "prov_pop"          // minor 2
	FnButtonWatch     = "button_watch"      // minor 2
	FnSKPublishCtx    = "sk_publish_ctx"    // minor 3
	FnDormant         = "dormant"           // minor 4
	FnSKPublishSrc    = "sk_publish_src"    // minor 5
)

// Capability is a permission a manifest asks for and an operator grants at install.
type Capability string

// Capabilities.
const (
	CapConfig       Capability = "config"            // ns_register, config_get, config events
	CapSKPublish    Capability = "signalk.publish"   // sk_publish, sk_meta, sk_publish_ctx (minor 3), sk_publish_src (minor 5)
	CapSKSubscribe  Capability = "signalk.subscribe" // sk_subscribe, sk_unsubscribe, delta events
	CapSKPut        Capability = "signalk.put"       // sk_put_handle, sk_put_reply, put events
	CapSKPutSend    Capability = "signalk.put.send"  // sk_put_send, put answer events
	CapHealth       Capability = "health"            // health_report without the reboot flag
	CapHealthReboot Capability = "health.reboot"     // health_report with the reboot flag
	CapLog          Capability = "log"               // log
	CapTimer        Capability = "timer"             // timer_set, timer_cancel, timer events
	CapPowerHold    Capability = "power.hold"        // power_hold
	CapClock        Capability = "clock"             // clock_now
	CapHTTP         Capability = "http"              // manifest routes, http events, http_reply
	CapEvents       Capability = "events"            // manifest SSE events, sse_publish
	CapGPIO         Capability = "gpio"              // gpio_*, gpio events
	CapCAN          Capability = "can"               // can_*, can events
	CapBLE          Capability = "ble"               // ble_*, ble events
	CapMDNS         Capability = "mdns"              // mdns_service (ABI 1.1)
	CapPowerSleep   Capability = "power.sleep"       // power_sleep (minor 1)
	CapNetClient    Capability = "net.client"        // net_open, net_send, net_close, net events (minor 2)
	CapPeripheral   Capability = "ble.peripheral"    // gatt_*, ble_scan_response, gatt events (minor 2)
	CapPortal       Capability = "portal"            // portal_serve, portal_reply, portal events (minor 2)
	CapWiFiProv     Capability = "wifi.prov"         // wifi_*, portal_hold, wifi events (minor 2)
	CapProvPoP      Capability = "prov.pop"          // prov_pop (minor 2)
	CapButton       Capability = "button"            // button_watch, button events (minor 2)
)

// Capabilities lists every capability this ABI version knows, in documentation order.
var Capabilities = []Capability{
	CapConfig, CapSKPublish, CapSKSubscribe, CapSKPut, CapSKPutSend, CapHealth, CapHealthReboot,
	CapLog, CapTimer, CapPowerHold, CapClock, CapHTTP, CapEvents, CapGPIO, CapCAN, CapBLE,
	CapMDNS, CapPowerSleep, CapNetClient, CapPeripheral, CapPortal, CapWiFiProv, CapProvPoP, CapButton,
}

// Known reports whether c is a capability of this ABI version.
func (c Capability) Known() bool {
	for _, k := range Capabilities {
		if c == k {
			return true
		}
	}
	return false
}

// FunctionCapability maps each host function to the capability it needs. event_read needs
// none. health_report with the reboot flag needs CapHealthReboot besides CapHealth.
var FunctionCapability = map[string]Capability{
	FnEventRead:       "",
	FnLog:             CapLog,
	FnNsRegister:      CapConfig,
	FnConfigGet:       CapConfig,
	FnSKPublish:       CapSKPublish,
	FnSKMeta:          CapSKPublish,
	FnSKPublishCtx:    CapSKPublish,
	FnSKPublishSrc:    CapSKPublish,
	FnSKSubscribe:     CapSKSubscribe,
	FnSKUnsub:         CapSKSubscribe,
	FnSKPutHandle:     CapSKPut,
	FnSKPutReply:      CapSKPut,
	FnSKPutSend:       CapSKPutSend,
	FnHealthReport:    CapHealth,
	FnTimerSet:        CapTimer,
	FnTimerCancel:     CapTimer,
	FnPowerHold:       CapPowerHold,
	FnClockNow:        CapClock,
	FnHTTPReply:       CapHTTP,
	FnSSEPublish:      CapEvents,
	FnGPIORead:        CapGPIO,
	FnGPIOWrite:       CapGPIO,
	FnGPIOWatch:       CapGPIO,
	FnCANSend:         CapCAN,
	FnCANFilter:       CapCAN,
	FnBLEScan:         CapBLE,
	FnBLEAdvertise:    CapBLE,
	FnMDNSService:     CapMDNS,
	FnPowerSleep:      CapPowerSleep,
	FnNetOpen:         CapNetClient,
	FnNetSend:         CapNetClient,
	FnNetClose:        CapNetClient,
	FnGATTServe:       CapPeripheral,
	FnGATTReply:       CapPeripheral,
	FnGATTNotify:      CapPeripheral,
	FnBLEScanResponse: CapPeripheral,
	FnPortalServe:     CapPortal,
	FnPortalReply:     CapPortal,
	FnWiFiProvision:   CapWiFiProv,
	FnWiFiStatus:      CapWiFiProv,
	FnWiFiWatch:       CapWiFiProv,
	FnWiFiScan:        CapWiFiProv,
	FnPortalHold:      CapWiFiProv,
	FnProvPoP:         CapProvPoP,
	FnButtonWatch:     CapButton,
	FnDormant:         "",
}

// Errno is the error a host function answers, as a negative i32 result. Errno values are
// comparable, so errors.Is(err, abi.ErrPermission) works on an error a caller wrapped.
type Errno int32

// Error codes. Zero and positive results are successes (a length, an id, a level).
const (
	ErrPermission  Errno = -1  // the capability was not granted
	ErrInvalid     Errno = -2  // malformed message or argument out of range
	ErrNotFound    Errno = -3  // unknown id (PUT, HTTP request, timer, pin)
	ErrLimit       Errno = -4  // too large or too many
	ErrState       Errno = -5  // not possible now (namespace not registered, stream down)
	ErrConflict    Errno = -6  // already registered or claimed
	ErrBusy        Errno = -7  // try later (PUTs in flight)
	ErrUnavailable Errno = -8  // the board has no such hardware
	ErrIO          Errno = -9  // hardware fault
	ErrStopped     Errno = -10 // the instance was stopped
	ErrInternal    Errno = -11 // host failure
)

var errnoText = map[Errno]string{
	ErrPermission:  "permission denied",
	ErrInvalid:     "invalid argument",
	ErrNotFound:    "not found",
	ErrLimit:       "limit exceeded",
	ErrState:       "invalid state",
	ErrConflict:    "conflict",
	ErrBusy:        "busy",
	ErrUnavailable: "unavailable",
	ErrIO:          "hardware fault",
	ErrStopped:     "plugin stopped",
	ErrInternal:    "internal error",
}

func (e Errno) Error() string {
	if s, ok := errnoText[e]; ok {
		return s
	}
	return "abi error " + strconv.Itoa(int(e))
}

// Result turns a host function's i32 result into (value, error): a negative result is an
// Errno (an unknown negative code too), anything else a value.
func Result(rc int32) (int32, error) {
	if rc < 0 {
		return 0, Errno(rc)
	}
	return rc, nil
}

// Limits of the ABI. A host refuses larger inputs with ErrLimit (except the log line, which is
// truncated) and never sends larger records.
const (
	MaxManifest       = 16 << 10   // manifest JSON bytes
	MaxBundle         = 16 << 20   // whole bundle, the host's download and upload cap
	SignatureSize     = 384        // RSA-3072 signature bytes
	KeyBits           = 3072       // publisher key size
	MaxMessage        = 256 << 10  // one host function input
	MaxEventBatch     = 1 << 20    // one event_read result
	MaxPath           = 256        // Signal K path or pattern bytes
	MaxValue          = 16 << 10   // a string or JSON value's bytes
	MaxValuesPerCall  = 1024       // values in one sk_publish
	MaxMetaPerCall    = 64         // paths in one sk_meta
	MaxMetaBytes      = 4 << 10    // one meta object
	MaxLogLine        = 256        // log line bytes, longer lines are truncated
	MaxHealthName     = 19         // condition name bytes; the host key is <id>.<name>
	MaxHealthMessage  = 95         // condition message bytes
	MaxHealthKeys     = 2          // distinct condition names per plugin per boot
	MaxTimers         = 32         // timers per plugin
	MinPeriodMs       = 10         // shortest timer period
	MaxDelayMs        = 2592000000 // 30 days, longest delay and period
	MaxPatterns       = 16         // subscription patterns per plugin
	MaxPutHandlers    = 16         // PUT handler patterns per plugin
	PutDeferMs        = 30000      // a deferred inbound PUT not completed by then fails (502)
	MaxHTTPResponse   = 64 << 10   // http_reply body bytes
	MaxContentType    = 128        // http_reply content type bytes
	MaxSSEData        = 8 << 10    // sse_publish data bytes
	MaxRoutes         = 16         // manifest routes
	MaxEvents         = 8          // manifest SSE event names
	MaxCANData        = 8          // classic CAN payload
	MaxCANFilters     = 16         // can_filter entries
	MaxBLEAdvertising = 31         // legacy advertising payload
	ClockSize         = 24         // clock_now record bytes
)

// ValueType is a WebAssembly value type, by its binary encoding (as wazero's api.ValueType).
type ValueType byte

// Value types of host function parameters and results.
const (
	I32 ValueType = 0x7f
	I64 ValueType = 0x7e
)

// Signature is a host function's WebAssembly type.
type Signature struct {
	Params  []ValueType
	Results []ValueType
}

var (
	sigIn   = Signature{Params: []ValueType{I32, I32}, Results: []ValueType{I32}} // ptr,len or ptr,cap
	sigOne  = Signature{Params: []ValueType{I32}, Results: []ValueType{I32}}
	sigTwo  = Signature{Params: []ValueType{I32, I32}, Results: []ValueType{I32}}
	sigLog  = Signature{Params: []ValueType{I32, I32, I32}, Results: []ValueType{I32}}
	sigTime = Signature{Params: []ValueType{I32, I64, I64}, Results: []ValueType{I32}}
)

// Signatures is every host function's type; host and plugin build their imports from it.
var Signatures = map[string]Signature{
	FnEventRead: sigIn, FnLog: sigLog, FnNsRegister: sigIn, FnConfigGet: sigIn,
	FnSKPublish: sigIn, FnSKMeta: sigIn, FnSKSubscribe: sigIn, FnSKUnsub: sigIn,
	FnSKPutHandle: sigIn, FnSKPutReply: sigIn, FnSKPutSend: sigIn, FnHealthReport: sigIn,
	FnTimerSet: sigTime, FnTimerCancel: sigOne, FnPowerHold: sigOne, FnClockNow: sigIn,
	FnHTTPReply: sigIn, FnSSEPublish: sigIn, FnGPIORead: sigOne, FnGPIOWrite: sigTwo,
	FnGPIOWatch: sigTwo, FnCANSend: sigIn, FnCANFilter: sigIn, FnBLEScan: sigOne,
	FnBLEAdvertise: sigIn, FnMDNSService: sigIn, FnPowerSleep: sigOne,
	FnNetOpen: sigIn, FnNetSend: sigIn, FnNetClose: sigOne,
	FnGATTServe: sigIn, FnGATTReply: sigIn, FnGATTNotify: sigIn, FnBLEScanResponse: sigIn,
	FnPortalServe: sigIn, FnPortalReply: sigIn, FnWiFiProvision: sigIn, FnWiFiStatus: sigIn,
	FnWiFiWatch: sigOne, FnWiFiScan: sigIn, FnPortalHold: sigOne, FnProvPoP: sigIn,
	FnButtonWatch: sigOne, FnSKPublishCtx: sigIn, FnDormant: sigIn,
	FnSKPublishSrc: sigIn,
}

// ParamNames names every host function's parameters as the table of ABI.md section 8 does:
// "ptr" is an address in the plugin's memory, "len" the bytes of an input there and "cap"
// the room for an output; the others are plain numbers. WasmImports reads it to give the
// plugin side's declarations their Go types.
var ParamNames = map[string][]string{
	FnEventRead: {"ptr", "cap"}, FnLog: {"level", "ptr", "len"}, FnNsRegister: {"ptr", "len"},
	FnConfigGet: {"ptr", "cap"}, FnSKPublish: {"ptr", "len"}, FnSKMeta: {"ptr", "len"},
	FnSKSubscribe: {"ptr", "len"}, FnSKUnsub: {"ptr", "len"}, FnSKPutHandle: {"ptr", "len"},
	FnSKPutReply: {"ptr", "len"}, FnSKPutSend: {"ptr", "len"}, FnHealthReport: {"ptr", "len"},
	FnTimerSet: {"id", "delay_ms", "period_ms"}, FnTimerCancel: {"id"}, FnPowerHold: {"on"},
	FnClockNow: {"ptr", "cap"}, FnHTTPReply: {"ptr", "len"}, FnSSEPublish: {"ptr", "len"},
	FnGPIORead: {"pin"}, FnGPIOWrite: {"pin", "level"}, FnGPIOWatch: {"pin", "edges"},
	FnCANSend: {"ptr", "len"}, FnCANFilter: {"ptr", "len"}, FnBLEScan: {"on"},
	FnBLEAdvertise: {"ptr", "len"}, FnMDNSService: {"ptr", "len"}, FnPowerSleep: {"reserved"},
	FnNetOpen: {"ptr", "len"}, FnNetSend: {"ptr", "len"}, FnNetClose: {"id"},
	FnGATTServe: {"ptr", "len"}, FnGATTReply: {"ptr", "len"}, FnGATTNotify: {"ptr", "len"},
	FnBLEScanResponse: {"ptr", "len"}, FnPortalServe: {"ptr", "len"}, FnPortalReply: {"ptr", "len"},
	FnWiFiProvision: {"ptr", "len"}, FnWiFiStatus: {"ptr", "cap"}, FnWiFiWatch: {"on"},
	FnWiFiScan: {"ptr", "cap"}, FnPortalHold: {"on"}, FnProvPoP: {"ptr", "cap"}, FnButtonWatch: {"on"},
	FnSKPublishCtx: {"ptr", "len"},
	FnDormant:      {"ptr", "len"},
	FnSKPublishSrc: {"ptr", "len"},
}

// ExportSignature is the type of dev_init and dev_event: no parameters, one i32.
var ExportSignature = Signature{Results: []ValueType{I32}}
