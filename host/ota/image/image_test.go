package image

import (
	"bytes"
	"crypto/rsa"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"devhost/host/ota/otatest"
)

func pack(t *testing.T, k *rsa.PrivateKey, h Header, exe []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Pack(&b, h, bytes.NewReader(exe), int64(len(exe)), k); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var hdr = Header{Project: "devhost", Version: "1.2.3", Target: "esp32s3", BuildTime: "2026-01-01T00:00:00Z"}

func TestPackParse(t *testing.T) {
	k := otatest.Key(t, "publisher")
	exe := bytes.Repeat([]byte("\x7fELF app"), 1000)
	img := pack(t, k, hdr, exe)
	h, got, err := Parse(bytes.NewReader(img), []*rsa.PublicKey{&k.PublicKey})
	if err != nil {
		t.Fatal(err)
	}
	want := hdr
	want.Size = int64(len(exe))
	if h != want || !bytes.Equal(got, exe) {
		t.Fatalf("header %+v, %d bytes", h, len(got))
	}
}

func TestEveryDamageIsRejected(t *testing.T) {
	k, other := otatest.Key(t, "publisher"), otatest.Key(t, "other")
	exe := bytes.Repeat([]byte{1, 2, 3, 4}, 300)
	img := pack(t, k, hdr, exe)
	keys := []*rsa.PublicKey{&k.PublicKey}
	flip := func(i int) []byte { b := bytes.Clone(img); b[i] ^= 0x40; return b }
	cases := map[string][]byte{
		"other key":          pack(t, other, hdr, exe),
		"not an image":       exe,
		"empty":              nil,
		"magic":              flip(0),
		"header length":      flip(len(Magic) + 3),
		"header byte":        flip(len(Magic) + 10),
		"executable byte":    flip(len(img) - SignatureSize - 5),
		"signature byte":     flip(len(img) - 1),
		"truncated":          img[:len(img)-1],
		"trailing byte":      append(bytes.Clone(img), 0),
		"no signature":       img[:len(img)-SignatureSize],
		"header only":        img[:len(Magic)+4],
		"zero-length header": append([]byte(Magic), 0, 0, 0, 0),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := Parse(bytes.NewReader(b), keys); !errors.Is(err, ErrRejected) {
				t.Fatalf("err %v, want ErrRejected", err)
			}
		})
	}
}

func TestVerifyFile(t *testing.T) {
	k := otatest.Key(t, "publisher")
	exe := []byte("executable bytes")
	img := pack(t, k, hdr, exe)
	h, raw, err := ReadHeader(bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	slot := filepath.Join(t.TempDir(), "ota_1")
	if err := os.WriteFile(slot, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	sig := img[len(img)-SignatureSize:]
	keys := []*rsa.PublicKey{&k.PublicKey}
	sum, err := VerifyFile(raw, slot, h.Size, sig, keys)
	if err != nil || sum != "028ac5ae4472db3363787732b659575b714ce38a59cd8496e39dc02cfd68a4ee" {
		t.Fatal(sum, err)
	}
	if err := os.WriteFile(slot, []byte("executable bytez"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyFile(raw, slot, h.Size, sig, keys); !errors.Is(err, ErrRejected) {
		t.Fatalf("changed slot: %v", err)
	}
}

func TestDevKeyCreatedOnce(t *testing.T) {
	dir := t.TempDir()
	k1, created, err := LoadOrCreateDevKey(dir)
	if err != nil || !created {
		t.Fatal(created, err)
	}
	k2, created, err := LoadOrCreateDevKey(dir)
	if err != nil || created || !k1.Equal(k2) {
		t.Fatal(created, err)
	}
	t.Setenv("DEVHOST_KEYS", dir)
	pub, err := DeviceKey()
	if err != nil || !pub.Equal(&k1.PublicKey) {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, DevPublicFile)); err != nil {
		t.Fatal(err)
	}
}

func FuzzReadHeader(f *testing.F) {
	f.Add([]byte(Magic + "\x00\x00\x00\x02{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, _, err := ReadHeader(bytes.NewReader(b))
		if err == nil && (h.Size <= 0 || h.Project == "") {
			t.Fatalf("accepted %+v", h)
		}
	})
}
