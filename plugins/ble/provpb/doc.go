// Package provpb holds the protobuf messages of Espressif's unified provisioning (ESP-IDF
// protocomm and wifi_provisioning): espprov.proto beside this file declares the same
// messages, field numbers and enum values as ESP-IDF's, so the phone apps and esp_prov speak
// to this device unchanged. The Go file is generated; regenerate with `go generate`.
package provpb

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative espprov.proto
