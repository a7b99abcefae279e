package sensors

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Kind names a sensor family's advertisement format.
type Kind string

// The kinds Decode understands.
const (
	KindBTHome    Kind = "bthome"
	KindRuuvi     Kind = "ruuvi"
	KindVictron   Kind = "victron"
	KindXiaomiATC Kind = "xiaomi_atc"
	KindMopeka    Kind = "mopeka"
)

// Kinds lists every kind Decode accepts, in a stable order.
func Kinds() []Kind {
	return []Kind{KindBTHome, KindRuuvi, KindVictron, KindXiaomiATC, KindMopeka}
}

// Value is one decoded reading. Path is relative to the sensor's Signal K prefix; Value is a
// float64, a bool or a string; Units is the Signal K unit ("K", "ratio", "V", ...) or "".
type Value struct {
	Path  string
	Value any
	Units string
}

// ErrUnknownKind is returned by Decode for a kind it does not implement.
var ErrUnknownKind = errors.New("sensors: unknown sensor kind")

// Decode decodes one advertisement of a configured sensor. key is the bind/encryption key
// (hex) or "".
func Decode(kind Kind, addr string, adv []byte, key string) ([]Value, error) {
	ad, err := parseAD(adv)
	if err != nil {
		return nil, err
	}
	var vals []Value
	switch kind {
	case KindBTHome:
		vals, err = decodeBTHome(ad, addr, key)
	case KindRuuvi:
		vals, err = decodeRuuvi(ad)
	case KindVictron:
		vals, err = decodeVictron(ad, key)
	case KindXiaomiATC:
		vals, err = decodeATC(ad)
	case KindMopeka:
		vals, err = decodeMopeka(ad)
	default:
		return nil, fmt.Errorf("%w %q", ErrUnknownKind, kind)
	}
	if err != nil {
		return nil, fmt.Errorf("sensors: %s advert from %s: %w", kind, addr, err)
	}
	return vals, nil
}

// Detect guesses the kind of an unknown advert ("" when unknown); never an error.
func Detect(adv []byte) Kind {
	ad, err := parseAD(adv)
	if err != nil {
		return ""
	}
	if _, ok := ad.service[uuidBTHome]; ok {
		return KindBTHome
	}
	if sd, ok := ad.service[uuidEnvSensing]; ok && (len(sd) == atcLen || len(sd) == pvvxLen) {
		return KindXiaomiATC
	}
	if md, ok := ad.mfr[companyRuuvi]; ok && len(md) > 0 && md[0] == 5 {
		return KindRuuvi
	}
	if md, ok := ad.mfr[companyVictron]; ok && len(md) > 0 && md[0] == victronProductAdvert {
		return KindVictron
	}
	if md, ok := ad.mfr[companyMopeka]; ok && len(md) == mopekaLen && ad.uuids[uuidMopeka] {
		return KindMopeka
	}
	return ""
}

// Assigned numbers used to recognise the formats.
const (
	uuidBTHome     = 0xFCD2
	uuidEnvSensing = 0x181A
	uuidMopeka     = 0xFEE5
	companyRuuvi   = 0x0499
	companyVictron = 0x02E1
	companyMopeka  = 0x0059
)

// adFields is the part of an advertisement the decoders read: manufacturer-specific data by
// company identifier (without the identifier), 16-bit service data by UUID (without the
// UUID), the 16-bit service UUIDs listed, and the local name.
type adFields struct {
	mfr     map[uint16][]byte
	service map[uint16][]byte
	uuids   map[uint16]bool
	name    string
}

// AD types (Bluetooth Core Supplement, part A).
const (
	adIncomplete16 = 0x02
	adComplete16   = 0x03
	adShortName    = 0x08
	adCompleteName = 0x09
	adService16    = 0x16
	adManufacturer = 0xFF
)

var errEmptyAdvert = errors.New("empty advertising data")

// parseAD splits advertising data into its AD structures. A structure running past the end is
// an error; a zero length byte ends the significant part (the rest is padding).
func parseAD(adv []byte) (adFields, error) {
	f := adFields{mfr: map[uint16][]byte{}, service: map[uint16][]byte{}, uuids: map[uint16]bool{}}
	if len(adv) == 0 {
		return f, errEmptyAdvert
	}
	for i := 0; i < len(adv); {
		n := int(adv[i])
		if n == 0 {
			break
		}
		if i+1+n > len(adv) {
			return f, fmt.Errorf("AD structure at offset %d: length %d runs past the %d-byte advert", i, n, len(adv))
		}
		typ, data := adv[i+1], adv[i+2:i+1+n]
		switch typ {
		case adManufacturer:
			if len(data) >= 2 {
				f.mfr[binary.LittleEndian.Uint16(data)] = data[2:]
			}
		case adService16:
			if len(data) >= 2 {
				f.service[binary.LittleEndian.Uint16(data)] = data[2:]
			}
		case adIncomplete16, adComplete16:
			for j := 0; j+1 < len(data); j += 2 {
				f.uuids[binary.LittleEndian.Uint16(data[j:])] = true
			}
		case adShortName, adCompleteName:
			f.name = string(data)
		}
		i += 1 + n
	}
	return f, nil
}

// parseKey decodes a hex key of want bytes.
func parseKey(key string, want int) ([]byte, error) {
	k, err := hex.DecodeString(strings.TrimSpace(key))
	if err != nil {
		return nil, fmt.Errorf("key is not hex: %w", err)
	}
	if len(k) != want {
		return nil, fmt.Errorf("key has %d bytes, want %d", len(k), want)
	}
	return k, nil
}

// parseAddr decodes "AA:BB:CC:DD:EE:FF" (or without separators) into 6 bytes, most
// significant first, as the address is written.
func parseAddr(addr string) ([]byte, error) {
	s := strings.NewReplacer(":", "", "-", "").Replace(strings.TrimSpace(addr))
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 6 {
		return nil, fmt.Errorf("address %q is not a 6-byte Bluetooth address", addr)
	}
	return b, nil
}
