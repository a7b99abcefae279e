package sensors

import (
	"encoding/binary"
	"fmt"
)

// Xiaomi LYWSD03MMC with custom firmware, service data under UUID 0x181A in one of two
// layouts told apart by length:
//   - ATC1441 (13 bytes, big-endian): MAC, temperature int16 0.1 °C, humidity uint8 %,
//     battery uint8 %, battery uint16 mV, frame counter.
//   - pvvx "custom" (15 bytes, little-endian): MAC reversed, temperature int16 0.01 °C,
//     humidity uint16 0.01 %, battery uint16 mV, battery uint8 %, counter, flags.
// The reference decoder calls these its "ATC-Exploit" and "ATC-LE" parsers.

const (
	atcLen  = 13
	pvvxLen = 15
)

func decodeATC(ad adFields) ([]Value, error) {
	sd, ok := ad.service[uuidEnvSensing]
	if !ok {
		return nil, fmt.Errorf("no ATC/pvvx service data (UUID 0x%04X)", uuidEnvSensing)
	}
	switch len(sd) {
	case pvvxLen:
		le := binary.LittleEndian
		return []Value{
			{Path: "temperature", Value: toFixed(273.15+float64(int16(le.Uint16(sd[6:])))/100, 2), Units: "K"},
			{Path: "humidity", Value: float64(le.Uint16(sd[8:])) / 10000, Units: "ratio"},
			{Path: "battery.voltage", Value: float64(le.Uint16(sd[10:])) / 1000, Units: "V"},
			{Path: "battery.strength", Value: float64(sd[12]) / 100, Units: "ratio"},
		}, nil
	case atcLen:
		be := binary.BigEndian
		return []Value{
			{Path: "temperature", Value: toFixed(273.15+float64(int16(be.Uint16(sd[6:])))/10, 2), Units: "K"},
			{Path: "humidity", Value: float64(sd[8]) / 100, Units: "ratio"},
			{Path: "battery.voltage", Value: float64(be.Uint16(sd[10:])) / 1000, Units: "V"},
			{Path: "battery.strength", Value: float64(sd[9]) / 100, Units: "ratio"},
		}, nil
	default:
		return nil, fmt.Errorf("ATC/pvvx service data of %d bytes, want %d (ATC1441) or %d (pvvx)", len(sd), atcLen, pvvxLen)
	}
}
