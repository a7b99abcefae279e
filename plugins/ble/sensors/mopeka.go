package sensors

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Mopeka tank sensors (Pro Check, Pro Plus, ...), manufacturer data of company 0x0059:
// hardware id, battery (1/32 V), temperature (7 bits, °C + 40), level (14 bits, µs of echo)
// with the reading quality in the top 2 bits, 3 MAC bytes and two acceleration bytes.
//
// The level follows the reference decoder exactly, including its expression
// (t-233.15)^2, which JavaScript evaluates as a bitwise XOR on the integer part rather than
// a square: published values must equal what signalk-server users see. Medium and tank
// height are the reference's defaults (propane, 304.8 mm).

const mopekaLen = 10

var mopekaPropane = [3]float64{0.573045, -0.002822, -0.00000535}

const mopekaTankHeightMM = 304.8

func decodeMopeka(ad adFields) ([]Value, error) {
	md, ok := ad.mfr[companyMopeka]
	if !ok {
		return nil, fmt.Errorf("no Mopeka manufacturer data (company 0x%04X)", companyMopeka)
	}
	if len(md) != mopekaLen {
		return nil, fmt.Errorf("manufacturer data of %d bytes, want %d", len(md), mopekaLen)
	}
	battV := float64(md[1]) / 32
	strength := math.Max(0, math.Min(1, (battV-2.2)/0.65))
	temp := toFixed(float64(md[2]&0x7F)+233.15, 2)
	raw := float64(binary.LittleEndian.Uint16(md[3:]) & 0x3FFF)
	dt := temp - 233.15
	xor := float64(jsInt32(dt) ^ 2)
	c := mopekaPropane
	level := raw * (c[0] + (c[1] * dt) + (c[2] * xor)) / mopekaTankHeightMM
	return []Value{
		{Path: "battery.voltage", Value: battV, Units: "V"},
		{Path: "battery.strength", Value: strength, Units: "ratio"},
		{Path: "temperature", Value: temp, Units: "K"},
		{Path: "currentLevel", Value: level, Units: "ratio"},
		{Path: "readingQuality", Value: float64(md[4] >> 6)},
	}, nil
}

// jsInt32 is JavaScript's ToInt32 for the small finite values used here.
func jsInt32(x float64) int32 {
	return int32(int64(math.Trunc(x)))
}
