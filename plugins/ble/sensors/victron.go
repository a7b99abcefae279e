package sensors

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Victron Instant Readout ("extra manufacturer data", company 0x02E1): 0x10 (product
// advertisement), 2 bytes, model id (uint16 LE), record type, the AES-CTR counter's initial
// value (uint16 LE), the key's first byte, then the record encrypted with AES-128-CTR under
// the per-device key. The record's bit-packed fields depend on the record type; values are
// published as the reference decoder does, leaving out the "not available" patterns.

const (
	victronProductAdvert = 0x10
	victronHeaderLen     = 8

	victronSolarCharger   = 0x01
	victronBatteryMonitor = 0x02
	victronDCDC           = 0x04
)

// Errors of Victron adverts.
var (
	ErrVictronKeyMismatch = errors.New("encryption key does not match the advert's key byte")
	ErrVictronRecord      = errors.New("unsupported Victron record type")
)

func decodeVictron(ad adFields, key string) ([]Value, error) {
	md, ok := ad.mfr[companyVictron]
	if !ok {
		return nil, fmt.Errorf("no Victron manufacturer data (company 0x%04X)", companyVictron)
	}
	if len(md) < victronHeaderLen+1 || md[0] != victronProductAdvert {
		return nil, fmt.Errorf("not an Instant Readout product advertisement (%d bytes)", len(md))
	}
	if key == "" {
		return nil, ErrKeyNeeded
	}
	k, err := parseKey(key, 16)
	if err != nil {
		return nil, fmt.Errorf("encryption key: %w", err)
	}
	if md[7] != k[0] {
		return nil, ErrVictronKeyMismatch
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, fmt.Errorf("encryption key: %w", err)
	}
	var iv [16]byte
	iv[0], iv[1] = md[5], md[6]
	rec := make([]byte, len(md)-victronHeaderLen)
	cipher.NewCTR(block, iv[:]).XORKeyStream(rec, md[victronHeaderLen:])
	switch typ := md[4]; typ {
	case victronSolarCharger:
		return victronSolar(rec)
	case victronBatteryMonitor:
		return victronBattery(rec)
	case victronDCDC:
		return victronDCDCConverter(rec)
	default:
		return nil, fmt.Errorf("%w 0x%02X", ErrVictronRecord, typ)
	}
}

func needRecord(rec []byte, n int, what string) error {
	if len(rec) < n {
		return fmt.Errorf("%s record of %d bytes, want %d: %w", what, len(rec), n, ErrTruncated)
	}
	return nil
}

// chargerHead checks the length of a charger-like record (solar charger, DC-DC converter)
// and decodes the state and error bytes that open it.
func chargerHead(rec []byte, n int, what string) ([]Value, error) {
	if err := needRecord(rec, n, what); err != nil {
		return nil, err
	}
	vals := appendName(nil, "state", victronOperationMode, uint32(rec[0]))
	return appendName(vals, "error", victronChargerError, uint32(rec[1])), nil
}

// victronSolar: state, error, battery voltage (int16 10 mV), battery current (int16 0.1 A),
// yield today (uint16 10 Wh), PV power (uint16 W), load current (9 bits, 0.1 A).
func victronSolar(rec []byte) ([]Value, error) {
	vals, err := chargerHead(rec, 12, "solar charger")
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	if v := int16(le.Uint16(rec[2:])); v != 0x7FFF {
		vals = append(vals, Value{Path: "dc.voltage", Value: float64(v) / 100, Units: "V"})
	}
	if v := int16(le.Uint16(rec[4:])); v != 0x7FFF {
		vals = append(vals, Value{Path: "dc.current", Value: float64(v) / 10, Units: "A"})
	}
	if v := le.Uint16(rec[6:]); v != 0xFFFF {
		vals = append(vals, Value{Path: "yieldToday", Value: float64(v) * 10, Units: "Wh"})
	}
	if v := le.Uint16(rec[8:]); v != 0xFFFF {
		vals = append(vals, Value{Path: "panelPower", Value: float64(v), Units: "W"})
	}
	if v := le.Uint16(rec[10:]) & 0x1FF; v != 0x1FF {
		vals = append(vals, Value{Path: "loadCurrent", Value: float64(v) / 10, Units: "A"})
	}
	return vals, nil
}

// Battery monitor aux input modes (low 2 bits of byte 8).
const (
	auxStarter     = 0
	auxMidpoint    = 1
	auxTemperature = 2
)

// victronBattery: time to go (uint16 min), voltage (int16 10 mV), alarm (bit set), aux value,
// then bit-packed aux mode (2), current (22, mA), consumed (20, 0.1 Ah) and SOC (10, 0.1 %).
func victronBattery(rec []byte) ([]Value, error) {
	if err := needRecord(rec, 15, "battery monitor"); err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	var vals []Value
	if v := le.Uint16(rec[0:]); v != 0xFFFF {
		vals = append(vals, Value{Path: "capacity.timeRemaining", Value: float64(v) * 60, Units: "s"})
	}
	if v := int16(le.Uint16(rec[2:])); v != 0x7FFF {
		vals = append(vals, Value{Path: "voltage", Value: float64(v) / 100, Units: "V"})
	}
	if a := int16(le.Uint16(rec[4:])); a > 0 {
		vals = append(vals, Value{Path: "alarm", Value: victronAlarm(uint16(a))})
	}
	aux := le.Uint16(rec[6:])
	switch rec[8] & 0x3 {
	case auxStarter:
		vals = append(vals, Value{Path: "starterVoltage", Value: float64(int16(aux)) / 100, Units: "V"})
	case auxMidpoint:
		vals = append(vals, Value{Path: "midpointVoltage", Value: float64(aux) / 100, Units: "V"})
	case auxTemperature:
		vals = append(vals, Value{Path: "temperature", Value: float64(aux) / 100, Units: "K"})
	}
	i24 := func(off int) int32 {
		return int32(uint32(rec[off])|uint32(rec[off+1])<<8|uint32(rec[off+2])<<16) << 8 >> 8
	}
	if c := i24(8) >> 2; c != 0x1FFFFF {
		vals = append(vals, Value{Path: "current", Value: float64(c) / 1000, Units: "A"})
	}
	if c := i24(11) & 0xFFFFF; c != 0xFFFFF {
		vals = append(vals, Value{Path: "capacity.ampHoursConsumed", Value: float64(c) / 10, Units: "Ah"})
	}
	if s := (le.Uint16(rec[13:]) & 0x3FFF) >> 4; s != 0x3FF {
		vals = append(vals, Value{Path: "capacity.stateOfCharge", Value: float64(s) / 1000, Units: "ratio"})
	}
	return vals, nil
}

// victronDCDCConverter: state, error, input voltage (uint16 10 mV), output voltage (int16
// 10 mV), off reason (uint32 bit set).
func victronDCDCConverter(rec []byte) ([]Value, error) {
	vals, err := chargerHead(rec, 10, "DC-DC converter")
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	if v := le.Uint16(rec[2:]); v != 0xFFFF {
		vals = append(vals, Value{Path: "input.voltage", Value: float64(v) / 100, Units: "V"})
	}
	if v := int16(le.Uint16(rec[4:])); v != 0x7FFF {
		vals = append(vals, Value{Path: "output.voltage", Value: float64(v) / 100, Units: "V"})
	}
	vals = append(vals, Value{Path: "offReason", Value: bitNames(le.Uint32(rec[6:]), victronOffReasons)})
	return vals, nil
}

// victronAlarm is a battery monitor alarm as the reference publishes it: the reason names
// joined by "|", the code in hex and the state "alert".
func victronAlarm(code uint16) map[string]any {
	return map[string]any{
		"message":    bitNames(uint32(code), victronAlarmReasons),
		"alarm":      fmt.Sprintf("0x%08x", code),
		"alarmstate": "alert",
	}
}

func appendName(vals []Value, path string, names map[uint32]string, code uint32) []Value {
	if n, ok := names[code]; ok {
		return append(vals, Value{Path: path, Value: n})
	}
	return vals
}

// bitNames joins the names of the bits set in v, lowest bit first, with "|"; bits without a
// name are left out.
func bitNames(v uint32, names map[uint32]string) string {
	var parts []string
	for bit := uint32(1); bit != 0; bit <<= 1 {
		if n, ok := names[bit]; ok && v&bit != 0 {
			parts = append(parts, n)
		}
	}
	return strings.Join(parts, "|")
}

// Names as the reference decoder publishes them (Victron's published enumerations).
var victronOperationMode = map[uint32]string{0: "OFF", 1: "LOW_POWER", 2: "FAULT", 3: "BULK", 4: "ABSORPTION", 5: "FLOAT", 6: "STORAGE", 7: "EQUALIZE_MANUAL", 9: "INVERTING", 11: "POWER_SUPPLY", 245: "STARTING_UP", 246: "REPEATED_ABSORPTION", 247: "RECONDITION", 248: "BATTERY_SAFE", 252: "EXTERNAL_CONTROL"}

var victronAlarmReasons = map[uint32]string{1: "LOW_VOLTAGE", 2: "HIGH_VOLTAGE", 4: "LOW_SOC", 8: "LOW_STARTER_VOLTAGE", 16: "HIGH_STARTER_VOLTAGE", 32: "LOW_TEMPERATURE", 64: "HIGH_TEMPERATURE", 128: "MID_VOLTAGE", 256: "OVERLOAD", 512: "DC_RIPPLE", 1024: "LOW_V_AC_OUT", 2048: "HIGH_V_AC_OUT", 4096: "SHORT_CIRCUIT", 8192: "BMS_LOCKOUT"}

var victronOffReasons = map[uint32]string{1: "NO_INPUT_POWER", 2: "SWITCHED_OFF_SWITCH", 4: "SWITCHED_OFF_REGISTER", 8: "REMOTE_INPUT", 16: "PROTECTION_ACTIVE", 32: "PAY_AS_YOU_GO_OUT_OF_CREDIT", 64: "BMS", 128: "ENGINE_SHUTDOWN", 256: "ANALYSING_INPUT_VOLTAGE"}

var victronChargerError = map[uint32]string{0: "NO_ERROR", 1: "TEMPERATURE_BATTERY_HIGH", 2: "VOLTAGE_HIGH", 3: "REMOTE_TEMPERATURE_SENSOR_FAILURE_A", 4: "REMOTE_TEMPERATURE_SENSOR_FAILURE_B", 5: "REMOTE_TEMPERATURE_SENSOR_FAILURE_C_NO_RESET", 6: "REMOTE_BATTERY_VOLTAGE_SENSOR_A_FAILURE", 7: "REMOTE_BATTERY_VOLTAGE_SENSOR_B_FAILURE", 8: "REMOTE_BATTERY_VOLTAGE_SENSOR_C_FAILURE", 11: "HIGH_RIPPLE_VOLTAGE", 14: "TEMPERATURE_BATTERY_LOW", 17: "TEMPERATURE_CHARGER_HIGH", 18: "OVER_CURRENT", 20: "BULK_TIME_LIMIT_EXCEEDED", 21: "CURRENT_SENSOR_BROKEN", 22: "INTERNAL_TEMPERATURE_SENSOR_A_FAILURE", 23: "INTERNAL_TEMPERATURE_SENSOR_B_FAILURE", 24: "FAN_FAILURE", 26: "OVERHEATED_TERMINALS", 27: "SHORT_CIRCUIT", 28: "CONVERTER_ISSUE", 29: "OVER_CHARGE_PROTECTION", 33: "SOLAR_INPUT_VOLTAGE_TOO_HIGH", 34: "SOLAR_INPUT_CURRENT_TOO_HIGH", 35: "INPUT_POWER", 38: "INPUT_SHUTDOWN_OVER_VOLTAGE", 39: "INPUT_SHUTDOWN_CURRENT", 40: "INPUT_SHUTDOWN_FAILURE", 41: "INVERTER_SHUTDOWN_ISOLATION_41", 42: "INVERTER_SHUTDOWN_ISOLATION_42", 43: "INVERTER_SHUTDOWN_GROUND_FAULT", 50: "INVERTER_OVERLOAD", 51: "INVERTER_TEMPERATURE_TOO_HIGH", 52: "INVERTER_PEAK_CURRENT", 53: "INVERTER_OUPUT_VOLTAGE_A", 54: "INVERTER_OUPUT_VOLTAGE_B", 55: "INVERTER_SELF_TEST_A", 56: "INVERTER_SELF_TEST_B", 57: "INVERTER_AC_VOLTAGE_ON_OUTPUT", 58: "INVERTER_SELF_TEST_C", 65: "LOST_COMMUNICATION", 66: "INCOMPATIBLE_SYNCHRONISATION", 67: "BMS_CONNECTION_LOST", 68: "MISCONFIGURED_NETWORK_A", 69: "MISCONFIGURED_NETWORK_B", 70: "MISCONFIGURED_NETWORK_C", 71: "MISCONFIGURED_NETWORK_D", 80: "PV_INPUT_SHUTDOWN_80", 81: "PV_INPUT_SHUTDOWN_81", 82: "PV_INPUT_SHUTDOWN_82", 83: "PV_INPUT_SHUTDOWN_83", 84: "PV_INPUT_SHUTDOWN_84", 85: "PV_INPUT_SHUTDOWN_85", 86: "PV_INPUT_SHUTDOWN_86", 87: "PV_INPUT_SHUTDOWN_87", 114: "CPU_TEMPERATURE_TOO_HIGH", 116: "CALIBRATION_LOST", 117: "INVALID_FIRMWARE", 119: "SETINGS_LOST", 121: "TESTER_FAIL", 200: "INTERNAL_DC_VOLTAGE_A", 201: "INTERNAL_DC_VOLTAGE_B", 202: "PV_RESIDUAL_CURRENT_SENSOR SELF_TEST", 203: "INTERNAL_SUPPLY_VOLTAGE_A", 205: "INTERNAL_SUPPLY_VOLTAGE_B", 212: "INTERNAL_SUPPLY_VOLTAGE_C", 215: "INTERNAL_SUPPLY_VOLTAGE_D"}
