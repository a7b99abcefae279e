//go:build wasip1

// Package hostcall declares the host functions with plain uint32 addresses for the test
// plugins that call them directly rather than through the SDK: garbage hands them malformed
// input and nocaps calls every one of them, so they need the raw calls the SDK hides.
package hostcall

import "unsafe"

// Addr is b's address in this module's linear memory.
func Addr(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

//go:wasmimport extism:host/user event_read
func EventRead(ptr, cap uint32) int32

//go:wasmimport extism:host/user log
func Log(level int32, ptr, n uint32) int32

//go:wasmimport extism:host/user ns_register
func NsRegister(ptr, n uint32) int32

//go:wasmimport extism:host/user config_get
func ConfigGet(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_publish
func SKPublish(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_meta
func SKMeta(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_publish_ctx
func SKPublishCtx(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_subscribe
func SKSubscribe(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_unsubscribe
func SKUnsubscribe(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_put_handle
func SKPutHandle(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_put_reply
func SKPutReply(ptr, n uint32) int32

//go:wasmimport extism:host/user sk_put_send
func SKPutSend(ptr, n uint32) int32

//go:wasmimport extism:host/user health_report
func HealthReport(ptr, n uint32) int32

//go:wasmimport extism:host/user timer_set
func TimerSet(id int32, delay, period int64) int32

//go:wasmimport extism:host/user timer_cancel
func TimerCancel(id int32) int32

//go:wasmimport extism:host/user power_hold
func PowerHold(on int32) int32

//go:wasmimport extism:host/user power_sleep
func PowerSleep(reserved int32) int32

//go:wasmimport extism:host/user clock_now
func ClockNow(ptr, n uint32) int32

//go:wasmimport extism:host/user http_reply
func HTTPReply(ptr, n uint32) int32

//go:wasmimport extism:host/user sse_publish
func SSEPublish(ptr, n uint32) int32

//go:wasmimport extism:host/user gpio_read
func GPIORead(pin int32) int32

//go:wasmimport extism:host/user gpio_write
func GPIOWrite(pin, level int32) int32

//go:wasmimport extism:host/user gpio_watch
func GPIOWatch(pin, edges int32) int32

//go:wasmimport extism:host/user can_send
func CANSend(ptr, n uint32) int32

//go:wasmimport extism:host/user can_filter
func CANFilter(ptr, n uint32) int32

//go:wasmimport extism:host/user ble_scan
func BLEScan(on int32) int32

//go:wasmimport extism:host/user ble_advertise
func BLEAdvertise(ptr, n uint32) int32

//go:wasmimport extism:host/user mdns_service
func MDNSService(ptr, n uint32) int32

//go:wasmimport extism:host/user net_open
func NetOpen(ptr, n uint32) int32

//go:wasmimport extism:host/user net_send
func NetSend(ptr, n uint32) int32

//go:wasmimport extism:host/user net_close
func NetClose(id int32) int32

//go:wasmimport extism:host/user gatt_serve
func GATTServe(ptr, n uint32) int32

//go:wasmimport extism:host/user gatt_reply
func GATTReply(ptr, n uint32) int32

//go:wasmimport extism:host/user gatt_notify
func GATTNotify(ptr, n uint32) int32

//go:wasmimport extism:host/user ble_scan_response
func BLEScanResponse(ptr, n uint32) int32

//go:wasmimport extism:host/user portal_serve
func PortalServe(ptr, n uint32) int32

//go:wasmimport extism:host/user portal_reply
func PortalReply(ptr, n uint32) int32

//go:wasmimport extism:host/user wifi_provision
func WiFiProvision(ptr, n uint32) int32

//go:wasmimport extism:host/user wifi_status
func WiFiStatus(ptr, n uint32) int32

//go:wasmimport extism:host/user wifi_watch
func WiFiWatch(on int32) int32

//go:wasmimport extism:host/user wifi_scan
func WiFiScan(ptr, n uint32) int32

//go:wasmimport extism:host/user portal_hold
func PortalHold(on int32) int32

//go:wasmimport extism:host/user prov_pop
func ProvPoP(ptr, n uint32) int32

//go:wasmimport extism:host/user button_watch
func ButtonWatch(on int32) int32
