package image

import (
	"crypto/rsa"
	"fmt"

	"devhost/host/plugin/trust"
)

// FirmwareKey is the compiled-in firmware public key (PEM or base64 PKIX DER). `make build`
// sets it with -ldflags "-X devhost/host/ota/image.FirmwareKey=..." from the development
// firmware key; a plain `go build` leaves it empty and the device trusts the development
// firmware key in the key directory instead.
var FirmwareKey = ""

// Development firmware key file names, beside the plugin development key in trust.DevKeyDir.
const (
	DevPrivateFile = "firmware.key"
	DevPublicFile  = "firmware.pub.pem"
)

// LoadOrCreateDevKey returns the development firmware key in dir, generating it when none
// exists; created says so (the same create-once rule as the plugin development key).
func LoadOrCreateDevKey(dir string) (k *rsa.PrivateKey, created bool, err error) {
	return trust.LoadOrCreateKey(dir, DevPrivateFile, DevPublicFile)
}

// DeviceKey is the key this build verifies images with: the compiled-in key, else the
// development firmware key in $DEVHOST_KEYS (created when none exists).
func DeviceKey() (*rsa.PublicKey, error) {
	if FirmwareKey != "" {
		pub, err := trust.ParsePublic([]byte(FirmwareKey))
		if err != nil {
			return nil, fmt.Errorf("compiled-in firmware key: %w", err)
		}
		return pub, nil
	}
	dir, err := trust.DevKeyDir()
	if err != nil {
		return nil, err
	}
	k, _, err := LoadOrCreateDevKey(dir)
	if err != nil {
		return nil, err
	}
	return &k.PublicKey, nil
}
