package board

import (
	"context"
	"net/http"
)

// Advert puts one advertisement on the air for the device's scanners (POST /ble/advert).
func (c *Client) Advert(ctx context.Context, a BLEAdvert) (State, error) {
	return c.do(ctx, http.MethodPost, "/ble/advert", a)
}
