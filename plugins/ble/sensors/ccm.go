package sensors

import (
	"crypto/cipher"
	"crypto/subtle"
	"errors"
	"fmt"
)

// The Go standard library has AES and CTR but no CCM, and the CCM modules on the proxy come
// inside large DTLS/TLS stacks; CCM opening (RFC 3610) is short, so it is written here on
// crypto/cipher's block cipher and CTR stream and checked against RFC 3610's and BTHome's
// published vectors in ccm_test.go.

var errMIC = errors.New("message integrity check failed")

// ccmOpen authenticates and decrypts ciphertext ct with tag mic (M = len(mic) bytes) under
// nonce (7 to 13 bytes, so L = 15 - len(nonce)) and additional data aad.
func ccmOpen(block cipher.Block, nonce, ct, mic, aad []byte) ([]byte, error) {
	const bs = 16
	if block.BlockSize() != bs {
		return nil, errors.New("ccm needs a 128-bit block cipher")
	}
	m := len(mic)
	if m < 4 || m > 16 || m%2 != 0 {
		return nil, fmt.Errorf("ccm: MIC of %d bytes", m)
	}
	if len(nonce) < 7 || len(nonce) > 13 {
		return nil, fmt.Errorf("ccm: nonce of %d bytes", len(nonce))
	}
	l := 15 - len(nonce)
	if l < 8 && uint64(len(ct)) >= 1<<(8*uint(l)) {
		return nil, fmt.Errorf("ccm: %d bytes do not fit a %d-byte length", len(ct), l)
	}

	// Counter blocks A_i = flags(L-1) | nonce | i; A_0 masks the tag, A_1.. the payload.
	var a0 [bs]byte
	a0[0] = byte(l - 1)
	copy(a0[1:], nonce)
	var s0 [bs]byte
	block.Encrypt(s0[:], a0[:])
	a1 := a0
	a1[bs-1] = 1
	pt := make([]byte, len(ct))
	cipher.NewCTR(block, a1[:]).XORKeyStream(pt, ct)

	// CBC-MAC over B_0, the length-prefixed additional data and the plaintext.
	var x, b [bs]byte
	b[0] = byte((m-2)/2)<<3 | byte(l-1)
	if len(aad) > 0 {
		b[0] |= 0x40
	}
	copy(b[1:], nonce)
	for i, n := 0, len(ct); i < l; i, n = i+1, n>>8 {
		b[bs-1-i] = byte(n)
	}
	mac := func(blk []byte) {
		for i := range x {
			x[i] ^= blk[i]
		}
		block.Encrypt(x[:], x[:])
	}
	mac(b[:])
	if len(aad) > 0 {
		if len(aad) >= 0xFF00 {
			return nil, errors.New("ccm: additional data too long")
		}
		hdr := append([]byte{byte(len(aad) >> 8), byte(len(aad))}, aad...)
		macPadded(hdr, mac)
	}
	macPadded(pt, mac)

	want := make([]byte, m)
	for i := range want {
		want[i] = x[i] ^ s0[i]
	}
	if subtle.ConstantTimeCompare(want, mic) != 1 {
		return nil, errMIC
	}
	return pt, nil
}

// macPadded feeds data to mac in 16-byte blocks, the last one zero-padded.
func macPadded(data []byte, mac func([]byte)) {
	for len(data) > 0 {
		var blk [16]byte
		n := copy(blk[:], data)
		mac(blk[:])
		data = data[n:]
	}
}
