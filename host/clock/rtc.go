package clock

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

// RTCValue is what the clock leaves in RTC memory before a deep sleep, and what the next
// deep-sleep wake hands back through Options.RTC.
type RTCValue struct {
	// Wall is the clock's reading when the device went to sleep.
	Wall time.Time
	// Source held the clock then; `rtc` when the value was itself carried across an earlier
	// sleep. Informational: a woken clock always says `rtc`.
	Source Source
	// SyncedAt is the wall time at which a real source last set the clock; the stale rule ages
	// the value from here, across any number of sleeps.
	SyncedAt time.Time
	// SleptFor is how long the device slept: the sleep it armed, or a measured figure the
	// caller puts in after decoding. The wake time is Wall + SleptFor.
	SleptFor time.Duration
}

// RTC is the value to leave in RTC memory before sleeping for sleepFor; ok is false while
// nothing set the clock (there is then nothing worth carrying).
func (c *Clock) RTC(sleepFor time.Duration) (v RTCValue, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src == SourceNone {
		return RTCValue{}, false
	}
	return RTCValue{
		Wall:     c.nowLocked(),
		Source:   c.src,
		SyncedAt: c.syncedAt,
		SleptFor: sleepFor,
	}, true
}

// EncodeRTC is the RTC memory blob for a sleep of sleepFor; nil while nothing set the clock.
func (c *Clock) EncodeRTC(sleepFor time.Duration) []byte {
	v, ok := c.RTC(sleepFor)
	if !ok {
		return nil
	}
	b, err := v.MarshalBinary()
	if err != nil {
		c.log.Warn("clock value not carried across the sleep", "err", err)
		return nil
	}
	return b
}

// Blob layout, version 1, big-endian, 34 bytes:
//
//	0  magic "DCLK"
//	4  version (1)
//	5  source rank
//	6  wall, unix ms
//	14 synced-at, unix ms
//	22 slept for, ms
//	30 CRC-32C of bytes 0..29
const (
	rtcMagic   = "DCLK"
	rtcVersion = 1
	rtcLen     = 34
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrBadRTC: the RTC memory blob is damaged, of an unknown version or holds an impossible value.
var ErrBadRTC = errors.New("clock: unusable RTC memory value")

// MarshalBinary encodes the value for RTC memory.
func (v RTCValue) MarshalBinary() ([]byte, error) {
	if err := v.check(); err != nil {
		return nil, err
	}
	b := make([]byte, rtcLen)
	copy(b, rtcMagic)
	b[4] = rtcVersion
	b[5] = byte(v.Source)
	binary.BigEndian.PutUint64(b[6:], uint64(v.Wall.UnixMilli()))
	binary.BigEndian.PutUint64(b[14:], uint64(v.SyncedAt.UnixMilli()))
	binary.BigEndian.PutUint64(b[22:], uint64(v.SleptFor.Milliseconds()))
	binary.BigEndian.PutUint32(b[30:], crc32.Checksum(b[:30], castagnoli))
	return b, nil
}

// DecodeRTC reads an RTC memory blob. A damaged blob (wrong length, magic, version or
// checksum) or an impossible value is ErrBadRTC; the caller then starts with no RTC value.
func DecodeRTC(b []byte) (*RTCValue, error) {
	if len(b) != rtcLen {
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrBadRTC, len(b), rtcLen)
	}
	if string(b[:4]) != rtcMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrBadRTC)
	}
	if b[4] != rtcVersion {
		return nil, fmt.Errorf("%w: version %d", ErrBadRTC, b[4])
	}
	if crc32.Checksum(b[:30], castagnoli) != binary.BigEndian.Uint32(b[30:]) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrBadRTC)
	}
	v := &RTCValue{
		Source:   Source(b[5]),
		Wall:     time.UnixMilli(int64(binary.BigEndian.Uint64(b[6:]))).UTC(),
		SyncedAt: time.UnixMilli(int64(binary.BigEndian.Uint64(b[14:]))).UTC(),
	}
	slept := int64(binary.BigEndian.Uint64(b[22:]))
	if slept < 0 || slept > Ceiling.Sub(Floor).Milliseconds() {
		return nil, fmt.Errorf("%w: sleep of %d ms", ErrBadRTC, slept)
	}
	v.SleptFor = time.Duration(slept) * time.Millisecond
	if err := v.check(); err != nil {
		return nil, err
	}
	return v, nil
}

// check refuses values the clock could not have written.
func (v RTCValue) check() error {
	if !v.Source.valid() || v.Source == SourceNone {
		return fmt.Errorf("%w: source %s", ErrBadRTC, v.Source)
	}
	if v.SleptFor < 0 {
		return fmt.Errorf("%w: negative sleep", ErrBadRTC)
	}
	if err := checkRange(v.Wall); err != nil {
		return fmt.Errorf("%w: wall: %w", ErrBadRTC, err)
	}
	if err := checkRange(v.SyncedAt); err != nil {
		return fmt.Errorf("%w: synced-at: %w", ErrBadRTC, err)
	}
	if v.SyncedAt.After(v.Wall) {
		return fmt.Errorf("%w: synced after the sleep began", ErrBadRTC)
	}
	if err := checkRange(v.Wall.Add(v.SleptFor)); err != nil {
		return fmt.Errorf("%w: wake: %w", ErrBadRTC, err)
	}
	return nil
}
