package image

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"devhost/abi"
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
// exists; created says so. Two racing tools end up with one key: the private key is linked
// into place and the loser reads the winner's.
func LoadOrCreateDevKey(dir string) (k *rsa.PrivateKey, created bool, err error) {
	priv := filepath.Join(dir, DevPrivateFile)
	b, err := os.ReadFile(priv)
	if err == nil {
		k, err := abi.ParsePrivateKey(b)
		if err != nil {
			return nil, false, fmt.Errorf("firmware key %s: %w", priv, err)
		}
		return k, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("firmware key: %w", err)
	}
	if k, err = abi.GenerateKey(); err != nil {
		return nil, false, err
	}
	pemPriv, err := abi.MarshalPrivateKey(k)
	if err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("firmware key directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".firmware.key.tmp*")
	if err != nil {
		return nil, false, fmt.Errorf("firmware key: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err = tmp.Chmod(0o600); err == nil {
		if _, err = tmp.Write(pemPriv); err == nil {
			err = tmp.Sync()
		}
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, false, fmt.Errorf("firmware key: %w", err)
	}
	if err := os.Link(tmp.Name(), priv); err != nil {
		if errors.Is(err, os.ErrExist) {
			return LoadOrCreateDevKey(dir)
		}
		return nil, false, fmt.Errorf("firmware key: %w", err)
	}
	if err := trust.SyncDir(dir); err != nil {
		return nil, false, err
	}
	pemPub, err := abi.MarshalPublicKey(&k.PublicKey)
	if err != nil {
		return nil, false, err
	}
	if err := trust.WriteFileAtomic(filepath.Join(dir, DevPublicFile), pemPub, 0o644); err != nil {
		return nil, false, err
	}
	return k, true, nil
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
