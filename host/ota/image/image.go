// Package image is the firmware image format and its signature: what `devctl ota pack` writes,
// what the device downloads into an OTA slot, and the keys a device trusts.
//
// # Format
//
// An image is, in order:
//
//	magic      8 bytes  "DVHIMG1\n"
//	hlen       4 bytes  big-endian length of the header JSON (1..MaxHeader)
//	header     hlen bytes of JSON: {"project","version","target","build_time","size"}
//	executable size bytes: the devhost app executable, unchanged
//	signature  384 bytes: RSA-3072 PSS (salt length = hash length) over
//	           SHA-256(magic || hlen || header || executable)
//
// The header comes first so that a device can refuse an image for another project, or one that
// is not an image at all, before it writes a byte into a slot. The signature comes last so that
// a packer can stream; the device checks it only once the whole executable is in the slot.
// Every refusal reads as ErrRejected, the spec's one message, whatever the cause.
package image

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
)

// Magic opens every image.
const Magic = "DVHIMG1\n"

// Limits of the format.
const (
	MaxHeader     = 4096
	MaxSize       = 512 << 20 // executable bytes
	SignatureSize = 384       // RSA-3072
	KeyBits       = 3072
)

// ErrRejected is the spec's answer to any image that is not a valid, signed image for this
// project: a bad signature, another key, a corrupt or truncated download, a non-image.
var ErrRejected = errors.New("image rejected: bad signature or corrupt")

// pss matches the plugin bundles' signature scheme.
var pss = &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: crypto.SHA256}

// Header describes the executable an image carries.
type Header struct {
	Project   string `json:"project"`
	Version   string `json:"version"`
	Target    string `json:"target"`
	BuildTime string `json:"build_time"`
	Size      int64  `json:"size"`
}

func (h Header) check() error {
	switch {
	case h.Project == "":
		return errors.New("no project name")
	case h.Version == "":
		return errors.New("no version")
	case h.Size <= 0 || h.Size > MaxSize:
		return fmt.Errorf("executable size %d out of range", h.Size)
	}
	return nil
}

// Rejected wraps a cause as ErrRejected, keeping the cause for the log.
func Rejected(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRejected, fmt.Sprintf(format, args...))
}

// encodeHeader is the signed prefix: magic, length and header JSON.
func encodeHeader(h Header) ([]byte, error) {
	if err := h.check(); err != nil {
		return nil, fmt.Errorf("image header: %w", err)
	}
	js, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("image header: %w", err)
	}
	if len(js) > MaxHeader {
		return nil, fmt.Errorf("image header of %d bytes, at most %d", len(js), MaxHeader)
	}
	out := append([]byte(Magic), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(out[len(Magic):], uint32(len(js)))
	return append(out, js...), nil
}

// Pack writes a signed image of exe to w. h.Size is set from exe.
func Pack(w io.Writer, h Header, exe io.Reader, size int64, signer crypto.Signer) error {
	pub, ok := signer.Public().(*rsa.PublicKey)
	if !ok || pub.N.BitLen() != KeyBits {
		return errors.New("image: the signing key is not RSA-3072")
	}
	h.Size = size
	head, err := encodeHeader(h)
	if err != nil {
		return err
	}
	sum := sha256.New()
	sum.Write(head)
	if _, err := w.Write(head); err != nil {
		return fmt.Errorf("image: write: %w", err)
	}
	n, err := io.Copy(io.MultiWriter(w, sum), exe)
	if err != nil {
		return fmt.Errorf("image: copy the executable: %w", err)
	}
	if n != size {
		return fmt.Errorf("image: the executable has %d bytes, not %d", n, size)
	}
	sig, err := signer.Sign(rand.Reader, sum.Sum(nil), pss)
	if err != nil {
		return fmt.Errorf("image: sign: %w", err)
	}
	if _, err := w.Write(sig); err != nil {
		return fmt.Errorf("image: write: %w", err)
	}
	return nil
}

// ReadHeader reads and checks the header at the start of r; raw is the signed prefix the
// verification needs again. It reads no byte of the executable.
func ReadHeader(r io.Reader) (h Header, raw []byte, err error) {
	pre := make([]byte, len(Magic)+4)
	if _, err := io.ReadFull(r, pre); err != nil {
		return h, nil, Rejected("short header: %v", err)
	}
	if string(pre[:len(Magic)]) != Magic {
		return h, nil, Rejected("not an image")
	}
	n := binary.BigEndian.Uint32(pre[len(Magic):])
	if n == 0 || n > MaxHeader {
		return h, nil, Rejected("header length %d", n)
	}
	js := make([]byte, n)
	if _, err := io.ReadFull(r, js); err != nil {
		return h, nil, Rejected("short header: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return h, nil, Rejected("header: %v", err)
	}
	if err := h.check(); err != nil {
		return h, nil, Rejected("header: %v", err)
	}
	return h, append(pre, js...), nil
}

// Verify checks sig over raw and the executable bytes that hashed into sum (a SHA-256 that
// already consumed raw and the executable) against any of keys.
func Verify(sum hash.Hash, sig []byte, keys []*rsa.PublicKey) error {
	if len(sig) != SignatureSize {
		return Rejected("signature of %d bytes", len(sig))
	}
	d := sum.Sum(nil)
	for _, k := range keys {
		if k != nil && rsa.VerifyPSS(k, crypto.SHA256, d, sig, pss) == nil {
			return nil
		}
	}
	return Rejected("no trusted key made this signature")
}

// VerifyFile checks a slot file holding exactly the executable of an image whose signed
// prefix is raw and whose signature is sig. It returns the executable's own SHA-256 (hex),
// which the bootloader checks the slot against at every boot.
func VerifyFile(raw []byte, path string, size int64, sig []byte, keys []*rsa.PublicKey) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("image: open the slot: %w", err)
	}
	defer f.Close()
	sum, exe := sha256.New(), sha256.New()
	sum.Write(raw)
	n, err := io.Copy(io.MultiWriter(sum, exe), f)
	if err != nil {
		return "", fmt.Errorf("image: read the slot: %w", err)
	}
	if n != size {
		return "", Rejected("slot holds %d bytes, header says %d", n, size)
	}
	if err := Verify(sum, sig, keys); err != nil {
		return "", err
	}
	return hex.EncodeToString(exe.Sum(nil)), nil
}

// Parse reads a whole image from r (for tools and tests): the header and the executable.
func Parse(r io.Reader, keys []*rsa.PublicKey) (Header, []byte, error) {
	h, raw, err := ReadHeader(r)
	if err != nil {
		return h, nil, err
	}
	exe := make([]byte, h.Size)
	if _, err := io.ReadFull(r, exe); err != nil {
		return h, nil, Rejected("truncated executable: %v", err)
	}
	sig, err := io.ReadAll(io.LimitReader(r, SignatureSize+1))
	if err != nil {
		return h, nil, Rejected("signature: %v", err)
	}
	sum := sha256.New()
	sum.Write(raw)
	sum.Write(exe)
	if err := Verify(sum, sig, keys); err != nil {
		return h, nil, err
	}
	return h, exe, nil
}
