package board

import (
	"context"
	"net/http"
)

// InjectCAN puts a frame on the simulated bus as if another device on it had sent it (the
// control channel's POST /can); `devctl board can replay` plays logs through it.
func (c *Client) InjectCAN(ctx context.Context, f CANFrame) (State, error) {
	return c.do(ctx, http.MethodPost, "/can", f)
}
