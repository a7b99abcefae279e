// Package sensors decodes the passive-scan advertisements of common boat BLE sensors into
// Signal K values: BTHome v2 (plain, and encrypted with a bind key: AES-CCM with its MIC
// checked), RuuviTag data format 5 (RAWv2), Victron Instant Readout (battery monitors, solar
// chargers, DC-DC converters; AES-CTR with the per-device key), Xiaomi LYWSD03MMC running the
// ATC1441 or pvvx custom firmware, and Mopeka tank sensors.
//
// The API the BLE plugin calls:
//
//	type Kind string // "bthome", "ruuvi", "victron", "xiaomi_atc", "mopeka"
//	type Value struct { Path string; Value any; Units string }
//	func Decode(kind Kind, addr string, adv []byte, key string) ([]Value, error)
//	func Detect(adv []byte) Kind
//
// adv is the whole advertising data as AD structures (length, type, data), exactly as the
// scanner hears it. addr is the advertiser's address "AA:BB:CC:DD:EE:FF" (BTHome encryption
// binds it into the nonce). key is the bind/encryption key in hex, or "" for plain sensors.
// Decode answers an error, never a panic, for any malformed, truncated or unauthenticated
// advert; Detect answers "" for adverts it does not recognise.
//
// Values follow npm bt-sensors-plugin-sk 1.3.7, the decoder signalk-server users run: the
// same values (including its rounding), the same units and the same paths, each relative to
// the sensor's configured Signal K prefix (what follows the "{zone}", "{id}", "{batteryID}" or
// "{macAndName}" segment of that plugin's default path): "temperature" (K), "humidity"
// (ratio), "pressure" (Pa), "battery.voltage" (V), "battery.strength" (ratio), "voltage",
// "current", "capacity.stateOfCharge", "dc.voltage", "currentLevel" and so on. A value the
// sensor marks as not available is left out rather than published as a number. Values are
// float64, bool or string, except a Victron battery monitor's "alarm", an object
// (map[string]any with "message", "alarm" and "alarmstate") as that plugin emits it. One
// deliberate difference: that plugin publishes a battery monitor's starter and midpoint
// voltages outside the battery's prefix (electrical.batteries.starter.voltage); here they
// are "starterVoltage" and "midpointVoltage" under it.
//
// Where that plugin needs settings the API does not carry, its defaults are used: a Mopeka
// sensor's level is computed for propane in a 304.8 mm tank, as the plugin does before the
// owner sets medium and height.
package sensors
