package gattprov

import (
	"fmt"

	"devhost/plugins/ble/protocomm"
)

// Central is the GATT client operations the provisioning client uses.
type Central interface {
	// Write writes value at offset; prepare queues it as a prepared write.
	Write(handle uint16, offset int, value []byte, prepare bool) error
	// Execute commits the prepared writes.
	Execute() error
	// Read reads at most MTU-1 bytes of the value from offset.
	Read(handle uint16, offset int) ([]byte, error)
}

// Exchange is the client side of one connection: each request is written to the endpoint's
// characteristic (as a long write when it exceeds MTU-3 bytes) and the answer read back
// page by page. handles maps endpoint names (the user descriptions) to value handles.
func Exchange(c Central, handles map[string]uint16, mtu int) protocomm.Exchange {
	return func(ep string, body []byte) ([]byte, error) {
		h, ok := handles[ep]
		if !ok {
			return nil, fmt.Errorf("gattprov: the device has no %s characteristic", ep)
		}
		if len(body) <= mtu-3 {
			if err := c.Write(h, 0, body, false); err != nil {
				return nil, fmt.Errorf("write %s: %w", ep, err)
			}
		} else {
			for off := 0; off < len(body); off += mtu - 5 {
				if err := c.Write(h, off, body[off:min(len(body), off+mtu-5)], true); err != nil {
					return nil, fmt.Errorf("long write %s at %d: %w", ep, off, err)
				}
			}
			if err := c.Execute(); err != nil {
				return nil, fmt.Errorf("execute write %s: %w", ep, err)
			}
		}
		var out []byte
		for {
			part, err := c.Read(h, len(out))
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", ep, err)
			}
			out = append(out, part...)
			if len(part) < mtu-1 {
				return out, nil
			}
		}
	}
}
