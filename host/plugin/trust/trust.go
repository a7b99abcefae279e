// Package trust owns the device's trust store for plugin bundles (the firmware's compiled-in
// public key plus the publisher keys an operator adds through the API) and the development key
// pair an author or a development device uses when no other key exists. Key formats, key ids
// and signatures are the ABI's (package abi).
//
// Choices where the spec is silent:
//   - The compiled-in key is the PEM public key in FirmwareKey, set by a release build with
//     `-ldflags "-X 'devhost/host/plugin/trust.FirmwareKey=$(cat key.pub)'"` (or its base64
//     PKIX DER, which survives Makefiles better). A build without one trusts the development
//     key instead, generated when none exists as the spec does for firmware. It lives outside
//     the repository in the user's configuration directory (`$DEVHOST_KEYS`, else
//     `<os.UserConfigDir>/devhost/keys`) as `dev.key` (PKCS #8 PEM, mode 0600) and `dev.pub.pem`.
//     A device built without a compiled-in key refuses bundles signed by any other key unless
//     an operator adds that publisher key.
//   - Operator keys live in the `plugins` partition as `keys/<kid>.pem`, written atomically.
//     Built-in keys cannot be removed; adding a key already trusted answers the existing entry.
//     At most MaxKeys operator keys are kept.
package trust

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"devhost/abi"
)

// FirmwareKey is the compiled-in public key (PEM, or base64 PKIX DER), empty in development
// builds.
var FirmwareKey = ""

// ErrUnknownKey is returned for a key id the store does not hold.
var ErrUnknownKey = errors.New("trust: key not in the trust store")

// ParsePublic reads an RSA-3072 public key from PEM ("PUBLIC KEY") or base64 PKIX DER.
func ParsePublic(b []byte) (*rsa.PublicKey, error) {
	s := strings.TrimSpace(string(b))
	if strings.HasPrefix(s, "-----BEGIN") {
		return abi.ParsePublicKey([]byte(s))
	}
	der, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("trust: public key: neither PEM nor base64 DER")
	}
	x, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("trust: public key: %w", err)
	}
	pub, ok := x.(*rsa.PublicKey)
	if !ok {
		return nil, errors.New("trust: public key: not RSA")
	}
	if _, err := abi.KeyID(pub); err != nil { // checks the size
		return nil, err
	}
	return pub, nil
}

// DecodeFirmwareKey parses the compiled-in key; ok is false when the build has none.
func DecodeFirmwareKey() (pub *rsa.PublicKey, ok bool, err error) {
	if FirmwareKey == "" {
		return nil, false, nil
	}
	pub, err = ParsePublic([]byte(FirmwareKey))
	if err != nil {
		return nil, false, fmt.Errorf("trust: compiled-in key: %w", err)
	}
	return pub, true, nil
}

// DevKeyDir is where the development key pair lives: $DEVHOST_KEYS, else
// <user config dir>/devhost/keys.
func DevKeyDir() (string, error) {
	if d := os.Getenv("DEVHOST_KEYS"); d != "" {
		return d, nil
	}
	base, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("trust: no configuration directory for the development key: %w", err)
	}
	return filepath.Join(base, "devhost", "keys"), nil
}

// Development key file names inside the key directory.
const (
	DevPrivateFile = "dev.key"
	DevPublicFile  = "dev.pub.pem"
)

// LoadOrCreateDevKey returns the development key pair in dir, generating it (and dir) when
// none exists; created says so.
func LoadOrCreateDevKey(dir string) (k *rsa.PrivateKey, created bool, err error) {
	return LoadOrCreateKey(dir, DevPrivateFile, DevPublicFile)
}

// LoadOrCreateKey returns the key pair whose private half is the file privName in dir,
// generating it (and dir) when none exists; created says so. The private key is linked into
// place, which fails when another process got there first; that process's key is then the
// one, so two racing tools never end up with two keys. pubName receives a copy of the
// public half for operators to hand to devices; the private key is the truth.
func LoadOrCreateKey(dir, privName, pubName string) (k *rsa.PrivateKey, created bool, err error) {
	priv := filepath.Join(dir, privName)
	k, err = abi.ReadPrivateKey(priv)
	if err == nil {
		return k, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, fmt.Errorf("trust: key %s: %w", privName, err)
	}
	if k, err = abi.GenerateKey(); err != nil {
		return nil, false, err
	}
	pemPriv, err := abi.MarshalPrivateKey(k)
	if err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("trust: key directory: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+privName+".tmp*")
	if err != nil {
		return nil, false, fmt.Errorf("trust: key %s: %w", privName, err)
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
		return nil, false, fmt.Errorf("trust: key %s: %w", privName, err)
	}
	if err := os.Link(tmp.Name(), priv); err != nil {
		if errors.Is(err, os.ErrExist) {
			return LoadOrCreateKey(dir, privName, pubName)
		}
		return nil, false, fmt.Errorf("trust: key %s: %w", privName, err)
	}
	if err := SyncDir(dir); err != nil {
		return nil, false, err
	}
	pemPub, err := abi.MarshalPublicKey(&k.PublicKey)
	if err != nil {
		return nil, false, err
	}
	if err := WriteFileAtomic(filepath.Join(dir, pubName), pemPub, 0o644); err != nil {
		return nil, false, err
	}
	return k, true, nil
}

// DevicePublicKeys is what a device built from this source trusts out of the box: the
// compiled-in key, or else the development public key in devDir (created when none exists).
func DevicePublicKeys(devDir string) ([]*rsa.PublicKey, error) {
	pub, ok, err := DecodeFirmwareKey()
	if err != nil {
		return nil, err
	}
	if ok {
		return []*rsa.PublicKey{pub}, nil
	}
	k, _, err := LoadOrCreateDevKey(devDir)
	if err != nil {
		return nil, err
	}
	return []*rsa.PublicKey{&k.PublicKey}, nil
}

// WriteFileAtomic writes data to path so that a power cut leaves either the old file or the
// new one: a synced temporary file renamed over path, then the directory synced.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err == nil {
		if _, err = f.Write(data); err == nil {
			err = f.Sync()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	ok = true
	return SyncDir(dir)
}

// SyncDir makes a rename or removal in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
