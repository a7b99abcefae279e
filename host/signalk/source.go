package signalk

import (
	"fmt"

	"devhost/abi"
	"devhost/host/sk"
)

// PublishSource queues values with a source of their own (ABI 1.5): what a gateway relays
// from another device, such as an NMEA 2000 sender's heading with its address and PGN.
// Context "" is vessels.self, anything else another context as PublishContext takes. The
// device's label stays the update's label, so the server names the source `<label>.<src>`.
// They are batched, buffered and drained as Publish's values, one delta message per context
// and source.
func (c *Client) PublishSource(src sk.Source, context string, values ...sk.Value) error {
	if err := checkStarted(c); err != nil {
		return err
	}
	if err := abi.Source(src).Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	if context != "" {
		if err := abi.ValidContext(context); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
		}
	}
	if err := checkContextValues(context, values); err != nil {
		return err
	}
	return c.stream.PublishSource(src, context, values...)
}
