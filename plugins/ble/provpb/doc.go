// Package provpb holds the protobuf messages of Espressif's unified provisioning (ESP-IDF
// protocomm and wifi_provisioning): the .proto files beside this file declare the same
// messages, field numbers and enum values as ESP-IDF's, so the phone apps and esp_prov speak
// to this device unchanged. The Go files are generated; regenerate with `go generate`.
package provpb

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative constants.proto sec0.proto sec1.proto session.proto wifi_constants.proto wifi_config.proto wifi_scan.proto wifi_ctrl.proto
