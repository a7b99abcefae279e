//go:build !wasip1

package abi

import (
	"bytes"
	"crypto/rsa"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"testing"
)

func loadKey(t testing.TB, name string) *rsa.PrivateKey {
	t.Helper()
	k, err := ReadPrivateKey("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// packed is a good bundle, packed with the publisher key, and its parse.
func packed(tb testing.TB) ([]byte, *Bundle) {
	tb.Helper()
	good, err := Pack(testManifest(), testModule, loadKey(tb, "publisher.pem"))
	if err != nil {
		tb.Fatal(err)
	}
	bu, err := Parse(good)
	if err != nil {
		tb.Fatal(err)
	}
	return good, bu
}

func TestReadPrivateKeyRefuses(t *testing.T) {
	for _, c := range []struct {
		file     string
		notExist bool
	}{
		{"testdata/none.pem", true},
		{"testdata/small.pem", false}, // 2048 bits
		{"bundle_test.go", false},     // no PEM block
	} {
		_, err := ReadPrivateKey(c.file)
		if err == nil || errors.Is(err, os.ErrNotExist) != c.notExist {
			t.Errorf("%s: %v", c.file, err)
		}
	}
}

func TestPackParseVerify(t *testing.T) {
	key := loadKey(t, "publisher.pem")
	b, bu := packed(t)
	if !bytes.HasPrefix(b, []byte(Magic)) {
		t.Fatalf("bundle starts %q", b[:8])
	}
	id, _ := KeyID(&key.PublicKey)
	if bu.KeyID != id || len(bu.KeyID) != 16 {
		t.Fatalf("key id %q, want %q", bu.KeyID, id)
	}
	if !bytes.Equal(bu.Module, testModule) || bu.Manifest.ID != "app" || len(bu.Signature) != SignatureSize {
		t.Fatalf("parsed %+v", bu)
	}
	if !bytes.Equal(bu.Signed, b[:len(b)-4-SignatureSize]) {
		t.Fatal("Signed is not every byte before the signature length")
	}
	if err := bu.Verify(&key.PublicKey); err != nil {
		t.Fatalf("verify: %v", err)
	}
	other := loadKey(t, "other.pem")
	if err := bu.Verify(&other.PublicKey); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("verify with another key: %v", err)
	}
}

func TestVerifyDetectsEveryTamperedByte(t *testing.T) {
	key := loadKey(t, "publisher.pem")
	b, _ := packed(t)
	// Flip one bit in each region that parses again: manifest text, module, signature.
	manStart := len(Magic) + 8 + 4
	regions := map[string]int{
		"manifest": manStart + strings.Index(string(b[manStart:]), "Switch"),
		"module":   bytes.Index(b, testModule) + 5,
		"sig":      len(b) - 10,
	}
	for name, off := range regions {
		c := bytes.Clone(b)
		c[off] ^= 0x01
		bu, err := Parse(c)
		if err != nil {
			t.Fatalf("%s: parse: %v", name, err)
		}
		if err := bu.Verify(&key.PublicKey); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("%s tampered: verify %v", name, err)
		}
	}
	// A changed key id names another key: refused before any RSA work.
	c := bytes.Clone(b)
	c[len(Magic)] ^= 0xff
	bu, err := Parse(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := bu.Verify(&key.PublicKey); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("key id tampered: %v", err)
	}
}

func TestParseRefusesMalformed(t *testing.T) {
	good, _ := packed(t)
	cases := map[string][]byte{
		"empty":         nil,
		"magic":         append([]byte("DEVPLUG2"), good[8:]...),
		"truncated":     good[:len(good)-1],
		"trailing":      append(bytes.Clone(good), 0),
		"header only":   good[:16],
		"not wasm":      bytes.Replace(bytes.Clone(good), testModule, []byte("\x00asX\x01\x00\x00\x00"), 1),
		"huge manifest": func() []byte { c := bytes.Clone(good); binary.LittleEndian.PutUint32(c[16:], 1<<30); return c }(),
		"bad manifest": func() []byte {
			c := bytes.Clone(good)
			i := bytes.Index(c, []byte(`"app"`))
			copy(c[i:], `"API"`)
			return c
		}(),
		"short sig": func() []byte {
			c := bytes.Clone(good[:len(good)-SignatureSize-4])
			c = binary.LittleEndian.AppendUint32(c, 256)
			return append(c, make([]byte, 256)...)
		}(),
	}
	for name, b := range cases {
		if _, err := Parse(b); err == nil {
			t.Errorf("%s: parsed", name)
		}
		// ReadHead refuses each layout error too; "bad manifest" is the manifest's own.
		if _, err := ReadHead(bytes.NewReader(b), int64(len(b))); err == nil {
			t.Errorf("%s: head read", name)
		}
	}
	if _, err := Parse(make([]byte, MaxBundle+1)); err == nil {
		t.Error("oversized bundle parsed")
	}
	if _, err := ReadHead(bytes.NewReader(nil), MaxBundle+1); err == nil {
		t.Error("oversized bundle's head read")
	}
}

func TestReadHeadAgreesWithParse(t *testing.T) {
	good, bu := packed(t)
	h, err := ReadHead(bytes.NewReader(good), int64(len(good)))
	if err != nil {
		t.Fatal(err)
	}
	if h.KeyID != bu.KeyID || h.Manifest.ID != bu.Manifest.ID || h.Manifest.Version != bu.Manifest.Version ||
		!bytes.Equal(h.ManifestJSON, bu.ManifestJSON) || !bytes.Equal(h.Signature, bu.Signature) || h.Size != int64(len(good)) {
		t.Fatalf("head %+v, parsed %+v", h, bu)
	}
	// Every shorter bundle is refused, whether the reader or the stated size ends early.
	for n := range len(good) {
		if _, err := ReadHead(bytes.NewReader(good[:n]), int64(n)); err == nil {
			t.Fatalf("a bundle cut to %d of %d bytes: head read", n, len(good))
		}
		if _, err := ReadHead(bytes.NewReader(good[:n]), int64(len(good))); err == nil {
			t.Fatalf("a reader ending at %d of %d bytes: head read", n, len(good))
		}
	}
}

func TestPackRefuses(t *testing.T) {
	key := loadKey(t, "publisher.pem")
	bad := testManifest()
	bad.ID = "Bad"
	if _, err := Pack(bad, testModule, key); err == nil {
		t.Error("invalid manifest packed")
	}
	if _, err := Pack(testManifest(), []byte("not wasm"), key); err == nil {
		t.Error("non-wasm module packed")
	}
	small, err := os.ReadFile("testdata/small.pem")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParsePrivateKey(small); err == nil || !strings.Contains(err.Error(), "RSA-3072") {
		t.Errorf("2048-bit key: %v", err)
	}
	if _, err := PackRaw([]byte(`{"id":"app"}`), testModule, key); err == nil {
		t.Error("incomplete manifest packed")
	}
	if _, err := Pack(testManifest(), make([]byte, MaxBundle), key); err == nil {
		t.Error("oversized module packed")
	}
}

func TestPackRawSignsAuthorsBytes(t *testing.T) {
	key := loadKey(t, "publisher.pem")
	man := []byte("{\n  \"id\": \"raw\", \"name\": \"Raw\", \"version\": \"0.1.0-dev\", \"abi\": 1,\n  \"capabilities\": []\n}\n")
	b, err := PackRaw(man, testModule, key)
	if err != nil {
		t.Fatal(err)
	}
	bu, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bu.ManifestJSON, man) {
		t.Fatal("manifest bytes changed")
	}
	if err := bu.Verify(&key.PublicKey); err != nil {
		t.Fatal(err)
	}
}

func TestKeyPEMRoundTrip(t *testing.T) {
	key := loadKey(t, "publisher.pem")
	pubPEM, err := MarshalPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(&key.PublicKey) {
		t.Fatal("public key changed")
	}
	privPEM, err := MarshalPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := ParsePrivateKey(privPEM)
	if err != nil || !k2.Equal(key) {
		t.Fatalf("private key round trip: %v", err)
	}
	for name, in := range map[string][]byte{
		"empty":     nil,
		"private":   privPEM,
		"trailing":  append(bytes.Clone(pubPEM), "junk"...),
		"not a key": []byte("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"),
	} {
		if _, err := ParsePublicKey(in); err == nil {
			t.Errorf("%s: parsed as a public key", name)
		}
	}
	small := loadSmall(t)
	if _, err := MarshalPublicKey(&small.PublicKey); err == nil {
		t.Error("2048-bit public key marshalled")
	}
	if _, err := KeyID(&small.PublicKey); err == nil {
		t.Error("2048-bit key has an id")
	}
}

func loadSmall(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	b, err := os.ReadFile("testdata/small.pem")
	if err != nil {
		t.Fatal(err)
	}
	k, err := parsePrivateKeyAnySize(b)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func FuzzParse(f *testing.F) {
	good, goodBundle := packed(f)
	key := loadKey(f, "publisher.pem")
	f.Add(good)
	f.Add(good[:40])
	f.Add([]byte(Magic))
	f.Add(append([]byte(Magic+"12345678"), 0xff, 0xff, 0xff, 0xff))
	f.Fuzz(func(t *testing.T, b []byte) {
		bu, err := Parse(b)
		if err != nil {
			return
		}
		if err := bu.Manifest.Validate(); err != nil {
			t.Fatalf("parsed bundle with invalid manifest: %v", err)
		}
		if len(bu.Signature) != SignatureSize || !bytes.HasPrefix(bu.Module, wasmMagic) {
			t.Fatal("parsed bundle breaks the layout")
		}
		// Only an untouched manifest and module verify (PSS signatures are randomised, so
		// each fuzz worker's seed bundle carries a different valid signature).
		if err := bu.Verify(&key.PublicKey); err == nil && !bytes.Equal(bu.Signed, goodBundle.Signed) {
			t.Fatal("a changed bundle verified")
		}
	})
}
