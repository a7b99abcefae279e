//go:build !wasip1

package abi

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// Bundle layout (all lengths u32 little-endian):
//
//	magic      8 bytes "DEVPLUG1"
//	key id     8 bytes, the first 8 bytes of SHA-256 over the signing key's PKIX DER
//	manifest   u32 length (1..MaxManifest), the manifest JSON
//	module     u32 length, the Wasm module (starts with "\0asm")
//	signature  u32 length (SignatureSize), RSASSA-PSS (SHA-256, salt 32) over SHA-256 of
//	           every byte before this length field
//
// Nothing may follow the signature; the whole bundle is at most MaxBundle bytes.

// Magic opens every bundle; its last character is the bundle format version.
const Magic = "DEVPLUG1"

const keyIDSize = 8

var wasmMagic = []byte("\x00asm")

// pssOptions are the signature parameters of every bundle.
var pssOptions = &rsa.PSSOptions{SaltLength: 32, Hash: crypto.SHA256}

// Bundle is a parsed bundle. Parse checks its structure and manifest, not its signature:
// call Verify with the trust store's key named by KeyID.
type Bundle struct {
	Manifest     Manifest
	ManifestJSON []byte // the manifest exactly as signed
	Module       []byte
	KeyID        string // 16 lowercase hex characters
	Signature    []byte
	Signed       []byte // the bytes the signature covers
}

// Errors of Parse and Verify, matched with errors.Is.
var (
	ErrNotBundle    = errors.New("abi: not a plugin bundle")
	ErrBadSignature = errors.New("abi: bad signature")
	ErrWrongKey     = errors.New("abi: bundle signed by another key")
)

// Parse decodes a bundle and validates its manifest. It never panics and refuses anything
// but the exact layout.
func Parse(b []byte) (*Bundle, error) {
	if len(b) > MaxBundle {
		return nil, fmt.Errorf("abi: bundle of %d bytes, at most %d", len(b), MaxBundle)
	}
	if len(b) < len(Magic)+keyIDSize || string(b[:len(Magic)]) != Magic {
		return nil, ErrNotBundle
	}
	r := reader{b: b[len(Magic)+keyIDSize:]}
	keyID := hex.EncodeToString(b[len(Magic) : len(Magic)+keyIDSize])
	man := r.bytes(MaxManifest, "manifest")
	mod := r.bytes(MaxBundle, "module")
	if r.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotBundle, r.err)
	}
	signed := b[: len(b)-len(r.b) : len(b)-len(r.b)]
	sig := r.bytes(SignatureSize, "signature")
	if err := r.end(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotBundle, err)
	}
	if len(sig) != SignatureSize {
		return nil, fmt.Errorf("%w: signature of %d bytes, want %d (RSA-3072)", ErrNotBundle, len(sig), SignatureSize)
	}
	if !bytes.HasPrefix(mod, wasmMagic) {
		return nil, fmt.Errorf("%w: the module is not WebAssembly", ErrNotBundle)
	}
	m, err := ParseManifest(man)
	if err != nil {
		return nil, err
	}
	return &Bundle{Manifest: m, ManifestJSON: man, Module: mod, KeyID: keyID, Signature: sig, Signed: signed}, nil
}

// Verify checks the bundle's signature against pub, which must be the RSA-3072 key KeyID
// names.
func (b *Bundle) Verify(pub *rsa.PublicKey) error {
	id, err := KeyID(pub)
	if err != nil {
		return err
	}
	if id != b.KeyID {
		return fmt.Errorf("%w: bundle key %s, given key %s", ErrWrongKey, b.KeyID, id)
	}
	sum := sha256.Sum256(b.Signed)
	if err := rsa.VerifyPSS(pub, crypto.SHA256, sum[:], b.Signature, pssOptions); err != nil {
		return fmt.Errorf("%w (key %s)", ErrBadSignature, id)
	}
	return nil
}

// Pack validates m, then builds and signs a bundle with signer, whose public key must be
// RSA-3072 (an *rsa.PrivateKey, or a key held elsewhere behind crypto.Signer).
func Pack(m Manifest, module []byte, signer crypto.Signer) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	man, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("abi: manifest: %w", err)
	}
	return PackRaw(man, module, signer)
}

// PackRaw is Pack for manifest JSON as written by its author (it is signed byte for byte).
func PackRaw(manifestJSON, module []byte, signer crypto.Signer) ([]byte, error) {
	if _, err := ParseManifest(manifestJSON); err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(module, wasmMagic) {
		return nil, errors.New("abi: the module is not WebAssembly")
	}
	pub, ok := signer.Public().(*rsa.PublicKey)
	if !ok {
		return nil, errors.New("abi: the signing key is not RSA")
	}
	id, err := keyIDBytes(pub)
	if err != nil {
		return nil, err
	}
	size := len(Magic) + keyIDSize + 4 + len(manifestJSON) + 4 + len(module) + 4 + SignatureSize
	if size > MaxBundle {
		return nil, fmt.Errorf("abi: bundle of %d bytes, at most %d", size, MaxBundle)
	}
	out := make([]byte, 0, size)
	out = append(out, Magic...)
	out = append(out, id...)
	out = appendBytes(out, manifestJSON)
	out = appendBytes(out, module)
	sum := sha256.Sum256(out)
	sig, err := signer.Sign(rand.Reader, sum[:], pssOptions)
	if err != nil {
		return nil, fmt.Errorf("abi: sign: %w", err)
	}
	if len(sig) != SignatureSize {
		return nil, fmt.Errorf("abi: signature of %d bytes, want %d", len(sig), SignatureSize)
	}
	out = binary.LittleEndian.AppendUint32(out, uint32(len(sig)))
	return append(out, sig...), nil
}

func checkKey(pub *rsa.PublicKey) error {
	if pub == nil || pub.N == nil {
		return errors.New("abi: no public key")
	}
	if pub.N.BitLen() != KeyBits {
		return fmt.Errorf("abi: an RSA-%d key, publisher keys are RSA-%d", pub.N.BitLen(), KeyBits)
	}
	return nil
}

// publicDER checks that pub is a publisher key and answers its PKIX DER form, which its id
// hashes and its PEM form carries.
func publicDER(pub *rsa.PublicKey) ([]byte, error) {
	if err := checkKey(pub); err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("abi: public key: %w", err)
	}
	return der, nil
}

func keyIDBytes(pub *rsa.PublicKey) ([]byte, error) {
	der, err := publicDER(pub)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	return sum[:keyIDSize], nil
}

// KeyID is a publisher key's id: the first 16 hex characters of SHA-256 over its PKIX DER.
func KeyID(pub *rsa.PublicKey) (string, error) {
	b, err := keyIDBytes(pub)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// GenerateKey makes a new RSA-3072 publisher key.
func GenerateKey() (*rsa.PrivateKey, error) {
	k, err := rsa.GenerateKey(rand.Reader, KeyBits)
	if err != nil {
		return nil, fmt.Errorf("abi: generate key: %w", err)
	}
	return k, nil
}

// MarshalPrivateKey encodes a key as PEM "PRIVATE KEY" (PKCS #8).
func MarshalPrivateKey(k *rsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("abi: private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// ReadPrivateKey reads a key file in a form ParsePrivateKey accepts.
func ReadPrivateKey(file string) (*rsa.PrivateKey, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("abi: private key: %w", err)
	}
	k, err := ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return k, nil
}

// ParsePrivateKey decodes a PEM "PRIVATE KEY" (PKCS #8) or "RSA PRIVATE KEY" (PKCS #1)
// holding an RSA-3072 key.
func ParsePrivateKey(b []byte) (*rsa.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("abi: private key: no PEM block")
	}
	var k *rsa.PrivateKey
	switch blk.Type {
	case "PRIVATE KEY":
		x, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("abi: private key: %w", err)
		}
		var ok bool
		if k, ok = x.(*rsa.PrivateKey); !ok {
			return nil, errors.New("abi: private key: not RSA")
		}
	case "RSA PRIVATE KEY":
		x, err := x509.ParsePKCS1PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("abi: private key: %w", err)
		}
		k = x
	default:
		return nil, fmt.Errorf("abi: private key: PEM block %q", blk.Type)
	}
	if err := checkKey(&k.PublicKey); err != nil {
		return nil, err
	}
	return k, nil
}

// MarshalPublicKey encodes a key as PEM "PUBLIC KEY" (PKIX), the trust store's form.
func MarshalPublicKey(pub *rsa.PublicKey) ([]byte, error) {
	der, err := publicDER(pub)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// ParsePublicKey decodes a PEM "PUBLIC KEY" (PKIX) holding an RSA-3072 key; nothing but
// whitespace may follow the block.
func ParsePublicKey(b []byte) (*rsa.PublicKey, error) {
	blk, rest := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, errors.New("abi: public key: want one PEM \"PUBLIC KEY\" block")
	}
	if len(bytes.TrimSpace(rest)) > 0 {
		return nil, errors.New("abi: public key: trailing data after the PEM block")
	}
	x, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("abi: public key: %w", err)
	}
	pub, ok := x.(*rsa.PublicKey)
	if !ok {
		return nil, errors.New("abi: public key: not RSA")
	}
	if err := checkKey(pub); err != nil {
		return nil, err
	}
	return pub, nil
}
