//go:build !wasip1

package abi

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// Head is what a bundle says about itself outside its module: its manifest, who signed it
// and the signature. ReadHead reads it without reading the module, so a host can list
// stored or carried bundles without loading megabytes of code.
type Head struct {
	Manifest     Manifest
	ManifestJSON []byte // the manifest exactly as signed
	KeyID        string // 16 lowercase hex characters
	// Signature is over the SHA-256 of every byte before it, module included: two bundles
	// that verify with the same signature are the same bytes.
	Signature []byte
	Size      int64 // the whole bundle's length
}

// ReadHead reads the head of the size-byte bundle in r: the layout's lengths are checked
// as Parse checks them and the manifest is validated, but the module is not read (beyond
// its first four bytes) and nothing is verified. Parse and Verify still decide whether the
// bundle is good.
func ReadHead(r io.ReaderAt, size int64) (*Head, error) {
	if size > MaxBundle {
		return nil, fmt.Errorf("abi: bundle of %d bytes, at most %d", size, MaxBundle)
	}
	pre := int64(len(Magic) + keyIDSize)
	start := make([]byte, pre+4)
	if err := readFull(r, start, 0, size); err != nil {
		return nil, err
	}
	if string(start[:len(Magic)]) != Magic {
		return nil, ErrNotBundle
	}
	keyID := hex.EncodeToString(start[len(Magic):pre])
	manLen := int64(binary.LittleEndian.Uint32(start[pre:]))
	if manLen > MaxManifest {
		return nil, fmt.Errorf("%w: abi: manifest of %d bytes, at most %d", ErrNotBundle, manLen, MaxManifest)
	}
	off := pre + 4
	man := make([]byte, manLen)
	if err := readFull(r, man, off, size); err != nil {
		return nil, err
	}
	off += manLen
	modLen, err := readU32(r, off, size)
	if err != nil {
		return nil, err
	}
	off += 4
	magic := make([]byte, len(wasmMagic))
	if err := readFull(r, magic, off, size); err != nil {
		return nil, err
	}
	if string(magic) != string(wasmMagic) {
		return nil, fmt.Errorf("%w: the module is not WebAssembly", ErrNotBundle)
	}
	off += modLen
	sigLen, err := readU32(r, off, size)
	if err != nil {
		return nil, err
	}
	off += 4
	if sigLen != SignatureSize {
		return nil, fmt.Errorf("%w: signature of %d bytes, want %d (RSA-3072)", ErrNotBundle, sigLen, SignatureSize)
	}
	if off+sigLen != size {
		return nil, fmt.Errorf("%w: %d bytes where the layout has %d", ErrNotBundle, size, off+sigLen)
	}
	sig := make([]byte, sigLen)
	if err := readFull(r, sig, off, size); err != nil {
		return nil, err
	}
	m, err := ParseManifest(man)
	if err != nil {
		return nil, err
	}
	return &Head{Manifest: m, ManifestJSON: man, KeyID: keyID, Signature: sig, Size: size}, nil
}

// readFull fills b from r at off, within a bundle of size bytes.
func readFull(r io.ReaderAt, b []byte, off, size int64) error {
	if off+int64(len(b)) > size {
		return fmt.Errorf("%w: %w", ErrNotBundle, errShort)
	}
	n, err := r.ReadAt(b, off)
	switch {
	case n == len(b):
		return nil // io.ReaderAt may say io.EOF along with the input's last bytes
	case err == nil, errors.Is(err, io.EOF):
		return fmt.Errorf("%w: %w", ErrNotBundle, errShort)
	}
	return fmt.Errorf("abi: read the bundle: %w", err)
}

func readU32(r io.ReaderAt, off, size int64) (int64, error) {
	var b [4]byte
	if err := readFull(r, b[:], off, size); err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint32(b[:])), nil
}
