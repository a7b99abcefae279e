package sdk

import (
	"fmt"

	"devhost/abi"
)

// Values with a source of their own (ABI 1.5): a gateway relays what other devices measured,
// such as every sender on an NMEA 2000 bus, and Signal K keeps two GPS receivers apart by
// the source of their values. Values published with Publish and PublishTo carry the device's
// own source.

// Source is where values published with PublishFrom come from: Type ("NMEA2000", "NMEA0183",
// "Plugin"...), Src (the sender; for NMEA2000 its bus address in decimal, 0..253), PGN (the
// NMEA 2000 PGN, 0 for none; NMEA2000 needs one) and an optional Instance. The device sends
// them with its own label, and the Signal K server names the source `<label>.<src>`
// (`<label>.<src>.<instance>` with an instance) and lists its PGNs under
// /signalk/v1/api/sources.
type Source = abi.Source

// ValidSource reports why src is not a source PublishFrom takes (nil when it is).
func ValidSource(src Source) error {
	if err := src.Validate(); err != nil {
		return fmt.Errorf("sdk: %w: %w", err, ErrInvalid)
	}
	return nil
}

// PublishFrom queues a Signal K value for vessels.self with its own source; it goes to the
// device when the running handler returns (or at Flush), after the values published with
// Publish, the values of every source in one host call. It fails at once on a malformed source, path or value and
// without the signalk.publish capability; the device's refusal comes from Flush. Needs ABI
// 1.5 (manifest abi_minor 5).
func PublishFrom(src Source, path string, v any) error { return PublishToFrom("", src, path, v) }

// PublishToFrom is PublishFrom for a context as PublishTo takes ("" is vessels.self): an AIS
// target's values with the source of the receiver that heard them. A context counts against
// MaxContexts as PublishTo's do, and the device also keeps at most MaxContexts sources live
// (a source's PGN does not make another source).
func PublishToFrom(context string, src Source, path string, v any) error {
	q := contextQueue(context, src)
	if q == nil {
		if err := ValidSource(src); err != nil {
			return err
		}
		if context != "" {
			if err := ValidContext(context); err != nil {
				return err
			}
		}
	}
	return queueIn(q, context, src, path, v)
}
