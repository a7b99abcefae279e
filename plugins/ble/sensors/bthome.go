package sensors

import (
	"crypto/aes"
	"errors"
	"fmt"
	"math"
)

// BTHome v2 (https://bthome.io/format/): service data under UUID 0xFCD2, one device
// information byte (bit 0 encrypted, bits 5-7 the version), then objects of one id byte and
// a fixed-size little-endian value. Encrypted adverts carry the objects as AES-CCM
// ciphertext followed by a 4-byte counter and a 4-byte MIC; the nonce is the advertiser's
// address, the UUID, the device information byte and the counter.

// bthomeObj describes one object id: its value size (0: length-prefixed), whether signed, the
// spec's factor, and how it is published (path "" decodes but does not publish).
type bthomeObj struct {
	size   int
	signed bool
	factor float64
	path   string
	units  string
	conv   func(float64) any // spec unit to the published value; nil: as is
}

func kelvin2(c float64) any { return toFixed(273.15+c, 2) } // the reference's rounding
func pctRatio2(p float64) any {
	return toFixed(p/100.0, 2)
}
func mul(k float64) func(float64) any { return func(v float64) any { return v * k } }
func boolean(v float64) any           { return v != 0 }

var bthomeButton = map[int]string{
	1: "press", 2: "double_press", 3: "triple_press", 4: "long_press",
	5: "long_double_press", 6: "long_triple_press", 0x80: "hold_press",
	0xFE: "hold_press", // Shelly firmware before 1.0.20 sent 0xFE for a hold
}

var bthomeObjects = map[byte]bthomeObj{
	0x00: {size: 1, factor: 1},                                                                  // packet id
	0x01: {size: 1, factor: 1, path: "battery.strength", units: "ratio", conv: pctRatio2},       // %
	0x02: {size: 2, signed: true, factor: 0.01, path: "temperature", units: "K", conv: kelvin2}, // °C
	0x03: {size: 2, factor: 0.01, path: "humidity", units: "ratio", conv: pctRatio2},            // %
	0x04: {size: 3, factor: 0.01, path: "pressure", units: "Pa", conv: mul(100)},                // hPa
	0x05: {size: 3, factor: 0.01, path: "illuminance", units: "lx"},                             // lux
	0x06: {size: 2, factor: 0.01, path: "mass", units: "kg"},                                    // kg
	0x07: {size: 2, factor: 0.01, path: "mass", units: "kg", conv: mul(0.45359237)},             // lb
	0x08: {size: 2, signed: true, factor: 0.01, path: "dewPointTemperature", units: "K", conv: kelvin2},
	0x09: {size: 1, factor: 1, path: "count"},
	0x0A: {size: 3, factor: 0.001, path: "energy", units: "J", conv: mul(3.6e6)}, // kWh
	0x0B: {size: 3, factor: 0.01, path: "power", units: "W"},
	0x0C: {size: 2, factor: 0.001, path: "voltage", units: "V"},
	0x0D: {size: 2, factor: 1, path: "pm25", units: "ug/m3"},
	0x0E: {size: 2, factor: 1, path: "pm10", units: "ug/m3"},
	0x0F: {size: 1, factor: 1, path: "generic", conv: boolean},
	0x10: {size: 1, factor: 1, path: "power.on", conv: boolean},
	0x11: {size: 1, factor: 1, path: "opening", conv: boolean},
	0x12: {size: 2, factor: 1, path: "co2", units: "ppm"},
	0x13: {size: 2, factor: 1, path: "tvoc", units: "ug/m3"},
	0x14: {size: 2, factor: 0.01, path: "moisture", units: "ratio", conv: mul(0.01)},
	0x15: {size: 1, factor: 1, path: "battery.low", conv: boolean},
	0x16: {size: 1, factor: 1, path: "battery.charging", conv: boolean},
	0x17: {size: 1, factor: 1, path: "carbonMonoxide", conv: boolean},
	0x18: {size: 1, factor: 1, path: "cold", conv: boolean},
	0x19: {size: 1, factor: 1, path: "connectivity", conv: boolean},
	0x1A: {size: 1, factor: 1, path: "door", conv: boolean},
	0x1B: {size: 1, factor: 1, path: "garageDoor", conv: boolean},
	0x1C: {size: 1, factor: 1, path: "gas", conv: boolean},
	0x1D: {size: 1, factor: 1, path: "heat", conv: boolean},
	0x1E: {size: 1, factor: 1, path: "light", conv: boolean},
	0x1F: {size: 1, factor: 1, path: "lock", conv: boolean},
	0x20: {size: 1, factor: 1, path: "moistureDetected", conv: boolean},
	0x21: {size: 1, factor: 1, path: "motion", conv: boolean},
	0x22: {size: 1, factor: 1, path: "moving", conv: boolean},
	0x23: {size: 1, factor: 1, path: "occupancy", conv: boolean},
	0x24: {size: 1, factor: 1, path: "plug", conv: boolean},
	0x25: {size: 1, factor: 1, path: "presence", conv: boolean},
	0x26: {size: 1, factor: 1, path: "problem", conv: boolean},
	0x27: {size: 1, factor: 1, path: "running", conv: boolean},
	0x28: {size: 1, factor: 1, path: "safety", conv: boolean},
	0x29: {size: 1, factor: 1, path: "smoke", conv: boolean},
	0x2A: {size: 1, factor: 1, path: "sound", conv: boolean},
	0x2B: {size: 1, factor: 1, path: "tamper", conv: boolean},
	0x2C: {size: 1, factor: 1, path: "vibration", conv: boolean},
	0x2D: {size: 1, factor: 1, path: "window", conv: boolean},
	0x2E: {size: 1, factor: 1, path: "humidity", units: "ratio", conv: pctRatio2},
	0x2F: {size: 1, factor: 1, path: "moisture", units: "ratio", conv: mul(0.01)},
	0x3A: {size: 1, factor: 1, path: "button", units: "enum"},
	0x3C: {size: 2, factor: 1}, // dimmer event: not published
	0x3D: {size: 2, factor: 1, path: "count"},
	0x3E: {size: 4, factor: 1, path: "count"},
	0x3F: {size: 2, signed: true, factor: 0.1, path: "rotation", units: "deg", conv: func(v float64) any { return toFixed(v, 2) }},
	0x40: {size: 2, factor: 1, path: "distance", units: "m", conv: mul(0.001)}, // mm
	0x41: {size: 2, factor: 0.1, path: "distance", units: "m"},
	0x42: {size: 3, factor: 0.001, path: "duration", units: "s"},
	0x43: {size: 2, factor: 0.001, path: "current", units: "A"},
	0x44: {size: 2, factor: 0.01, path: "speed", units: "m/s"},
	0x45: {size: 2, signed: true, factor: 0.1, path: "temperature", units: "K", conv: kelvin2},
	0x46: {size: 1, factor: 0.1, path: "uvIndex"},
	0x47: {size: 2, factor: 0.1, path: "volume", units: "m3", conv: mul(0.001)}, // L
	0x48: {size: 2, factor: 1, path: "volume", units: "m3", conv: mul(1e-6)},    // mL
	0x49: {size: 2, factor: 0.001, path: "volumeFlowRate", units: "m3/s", conv: mul(1.0 / 3600)},
	0x4A: {size: 2, factor: 0.1, path: "voltage", units: "V"},
	0x4B: {size: 3, factor: 0.001, path: "gas", units: "m3"},
	0x4C: {size: 4, factor: 0.001, path: "gas", units: "m3"},
	0x4D: {size: 4, factor: 0.001, path: "energy", units: "J", conv: mul(3.6e6)},
	0x4E: {size: 4, factor: 0.001, path: "volume", units: "m3", conv: mul(0.001)},
	0x4F: {size: 4, factor: 0.001, path: "water", units: "m3", conv: mul(0.001)},
	0x50: {size: 4, factor: 1, path: "timestamp", units: "s"},
	0x51: {size: 2, factor: 0.001, path: "acceleration", units: "m/s2"},
	0x52: {size: 2, factor: 0.001, path: "gyroscope", units: "deg/s"},
	0x53: {size: 0, path: "text"},
	0x54: {size: 0}, // raw bytes: not published
	0x55: {size: 4, factor: 0.001, path: "volumeStorage", units: "m3", conv: mul(0.001)},
	0x56: {size: 2, factor: 1, path: "conductivity", units: "S/m", conv: mul(1e-4)}, // µS/cm
	0x57: {size: 1, signed: true, factor: 1, path: "temperature", units: "K", conv: kelvin2},
	0x58: {size: 1, signed: true, factor: 0.35, path: "temperature", units: "K", conv: kelvin2},
	0x59: {size: 1, signed: true, factor: 1, path: "count"},
	0x5A: {size: 2, signed: true, factor: 1, path: "count"},
	0x5B: {size: 4, signed: true, factor: 1, path: "count"},
	0x5C: {size: 4, signed: true, factor: 0.01, path: "power", units: "W"},
	0x5D: {size: 2, signed: true, factor: 0.001, path: "current", units: "A"},
	0x5E: {size: 2, factor: 0.01, path: "direction", units: "rad", conv: mul(math.Pi / 180)},
	0x5F: {size: 2, factor: 0.1, path: "precipitation", units: "m", conv: mul(0.001)}, // mm
	0x60: {size: 1, factor: 1, path: "channel"},
	0x61: {size: 2, factor: 1, path: "rotationalSpeed", units: "Hz", conv: mul(1.0 / 60)}, // rpm
	0xF0: {size: 2, factor: 1},                                                            // device type id
	0xF1: {size: 4, factor: 1},                                                            // firmware version
	0xF2: {size: 3, factor: 1},                                                            // firmware version
}

// Errors of BTHome adverts.
var (
	ErrNoBTHome       = errors.New("no BTHome service data (UUID 0xFCD2)")
	ErrBTHomeVersion  = errors.New("not BTHome version 2")
	ErrUnknownObject  = errors.New("unknown BTHome object id")
	ErrTruncated      = errors.New("truncated")
	ErrKeyNeeded      = errors.New("advert is encrypted and no bind key is configured")
	ErrNotEncrypted   = errors.New("a bind key is configured but the advert is not encrypted")
	ErrAuthentication = errors.New("bind key or address does not authenticate the advert")
)

const (
	bthomeEncrypted = 0x01
	bthomeVersionV2 = 2
)

func decodeBTHome(ad adFields, addr, key string) ([]Value, error) {
	sd, ok := ad.service[uuidBTHome]
	if !ok {
		return nil, ErrNoBTHome
	}
	if len(sd) < 1 {
		return nil, fmt.Errorf("device information byte: %w", ErrTruncated)
	}
	info := sd[0]
	if info>>5 != bthomeVersionV2 {
		return nil, fmt.Errorf("%w (version %d)", ErrBTHomeVersion, info>>5)
	}
	objs := sd[1:]
	switch {
	case info&bthomeEncrypted != 0:
		if key == "" {
			return nil, ErrKeyNeeded
		}
		pt, err := bthomeDecrypt(sd, addr, key)
		if err != nil {
			return nil, err
		}
		objs = pt
	case key != "":
		return nil, ErrNotEncrypted
	}
	return bthomeObjects2Values(objs)
}

// bthomeDecrypt opens the encrypted objects of service data sd (device information byte
// first) sent by addr.
func bthomeDecrypt(sd []byte, addr, key string) ([]byte, error) {
	k, err := parseKey(key, 16)
	if err != nil {
		return nil, fmt.Errorf("bind key: %w", err)
	}
	mac, err := parseAddr(addr)
	if err != nil {
		return nil, err
	}
	if len(sd) < 1+4+4 {
		return nil, fmt.Errorf("encrypted payload of %d bytes: %w", len(sd), ErrTruncated)
	}
	ct := sd[1 : len(sd)-8]
	counter, mic := sd[len(sd)-8:len(sd)-4], sd[len(sd)-4:]
	nonce := make([]byte, 0, 13)
	nonce = append(nonce, mac...)
	nonce = append(nonce, byte(uuidBTHome&0xFF), byte(uuidBTHome>>8), sd[0])
	nonce = append(nonce, counter...)
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, fmt.Errorf("bind key: %w", err)
	}
	pt, err := ccmOpen(block, nonce, ct, mic, nil)
	if errors.Is(err, errMIC) {
		return nil, ErrAuthentication
	}
	return pt, err
}

// bthomeWalk calls fn for each object of b in order: its id, description, raw value
// (little-endian, not sign-extended) and, for length-prefixed objects, its bytes.
func bthomeWalk(b []byte, fn func(id byte, o bthomeObj, raw uint64, data []byte)) error {
	for i := 0; i < len(b); {
		id := b[i]
		o, ok := bthomeObjects[id]
		if !ok {
			return fmt.Errorf("%w 0x%02X at offset %d", ErrUnknownObject, id, i)
		}
		i++
		if o.size == 0 { // length-prefixed
			if i >= len(b) || i+1+int(b[i]) > len(b) {
				return fmt.Errorf("object 0x%02X: %w", id, ErrTruncated)
			}
			fn(id, o, 0, b[i+1:i+1+int(b[i])])
			i += 1 + int(b[i])
			continue
		}
		if i+o.size > len(b) {
			return fmt.Errorf("object 0x%02X needs %d bytes, %d left: %w", id, o.size, len(b)-i, ErrTruncated)
		}
		fn(id, o, leUint(b[i:i+o.size]), nil)
		i += o.size
	}
	return nil
}

// bthomeObjects2Values publishes the objects; the first object of a path wins, as in the
// reference, which reads the first measurement of an id.
func bthomeObjects2Values(b []byte) ([]Value, error) {
	var vals []Value
	seen := map[string]bool{}
	err := bthomeWalk(b, func(id byte, o bthomeObj, raw uint64, data []byte) {
		if o.path == "" || seen[o.path] {
			return
		}
		var v any
		switch {
		case o.size == 0:
			v = string(data)
		case id == 0x3A:
			name, ok := bthomeButton[int(raw)]
			if !ok {
				return // no event
			}
			v = name
		default:
			x := float64(raw)
			if o.signed {
				x = float64(signExtend(raw, o.size))
			}
			x *= o.factor
			if o.conv != nil {
				v = o.conv(x)
			} else {
				v = x
			}
		}
		seen[o.path] = true
		vals = append(vals, Value{Path: o.path, Value: v, Units: o.units})
	})
	if err != nil {
		return nil, err
	}
	return vals, nil
}

func leUint(b []byte) uint64 {
	var v uint64
	for i := len(b) - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

func signExtend(v uint64, size int) int64 {
	shift := 64 - 8*uint(size)
	return int64(v<<shift) >> shift
}
