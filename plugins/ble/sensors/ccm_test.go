package sensors

import (
	"crypto/aes"
	"encoding/hex"
	"errors"
	"testing"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// RFC 3610 section 8, packet vectors #1 and #2 (8-byte MIC, 8 bytes of additional data).
func TestCCMOpenRFC3610(t *testing.T) {
	key := mustHex(t, "C0C1C2C3C4C5C6C7C8C9CACBCCCDCECF")
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ nonce, aad, pt, out string }{
		{"00000003020100A0A1A2A3A4A5", "0001020304050607",
			"08090A0B0C0D0E0F101112131415161718191A1B1C1D1E",
			"588C979A61C663D2F066D0C2C0F989806D5F6B61DAC38417E8D12CFDF926E0"},
		{"00000004030201A0A1A2A3A4A5", "0001020304050607",
			"08090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F",
			"72C91A36E135F8CF291CA894085C87E3CC15C439C9E43A3BA091D56E10400916"},
	}
	for _, tc := range tests {
		out := mustHex(t, tc.out)
		ct, mic := out[:len(out)-8], out[len(out)-8:]
		pt, err := ccmOpen(block, mustHex(t, tc.nonce), ct, mic, mustHex(t, tc.aad))
		if err != nil {
			t.Fatalf("nonce %s: %v", tc.nonce, err)
		}
		if got := hex.EncodeToString(pt); got != hex.EncodeToString(mustHex(t, tc.pt)) {
			t.Fatalf("nonce %s: plaintext %s, want %s", tc.nonce, got, tc.pt)
		}
		bad := append([]byte(nil), mic...)
		bad[0] ^= 1
		if _, err := ccmOpen(block, mustHex(t, tc.nonce), ct, bad, mustHex(t, tc.aad)); !errors.Is(err, errMIC) {
			t.Fatalf("nonce %s: tampered MIC gave %v, want errMIC", tc.nonce, err)
		}
	}
}
