package sensors

import (
	"encoding/binary"
	"fmt"
)

// RuuviTag data format 5 (RAWv2), manufacturer data of company 0x0499: format byte 5, then
// big-endian temperature (int16, 0.005 °C), humidity (uint16, 0.0025 %), pressure (uint16,
// Pa above 50000), acceleration x/y/z (int16, mG), power info (11 bits battery mV above 1600,
// 5 bits TX power), movement counter, sequence number and MAC. The reserved "not available"
// values (0x8000, 0xFFFF, 2047) are left out.

const ruuviV5Len = 24

func decodeRuuvi(ad adFields) ([]Value, error) {
	md, ok := ad.mfr[companyRuuvi]
	if !ok {
		return nil, fmt.Errorf("no Ruuvi manufacturer data (company 0x%04X)", companyRuuvi)
	}
	if len(md) < 1 || md[0] != 5 {
		return nil, fmt.Errorf("unsupported Ruuvi data format (want 5)")
	}
	if len(md) < ruuviV5Len {
		return nil, fmt.Errorf("format 5 data of %d bytes, want %d: %w", len(md), ruuviV5Len, ErrTruncated)
	}
	var vals []Value
	if t := int16(binary.BigEndian.Uint16(md[1:])); t != -0x8000 {
		vals = append(vals, Value{Path: "temperature", Value: toFixed(273.15+float64(t)*.005, 3), Units: "K"})
	}
	if h := binary.BigEndian.Uint16(md[3:]); h != 0xFFFF {
		vals = append(vals, Value{Path: "humidity", Value: toFixed((float64(h)*.0025)/100, 2), Units: "ratio"})
	}
	if p := binary.BigEndian.Uint16(md[5:]); p != 0xFFFF {
		vals = append(vals, Value{Path: "pressure", Value: float64(p) + 50000, Units: "Pa"})
	}
	if mv := binary.BigEndian.Uint16(md[13:]) >> 5; mv != 0x7FF {
		vals = append(vals, Value{Path: "battery.voltage", Value: toFixed(1.6+float64(mv)/1000, 2), Units: "V"})
	}
	return vals, nil
}
