package trust

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"devhost/abi"
)

var (
	keyOnce sync.Once
	keyA    *rsa.PrivateKey
	keyB    *rsa.PrivateKey
)

// keys are the host package's test keys (generating RSA-3072 keys is slow).
func keys(t *testing.T) (*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	keyOnce.Do(func() {
		load := func(n string) *rsa.PrivateKey {
			k, err := abi.ReadPrivateKey(filepath.Join("..", "testdata", "keys", n+".pem"))
			if err != nil {
				t.Fatal(err)
			}
			return k
		}
		keyA, keyB = load("publisher"), load("other")
	})
	return keyA, keyB
}

func pemOf(t *testing.T, k *rsa.PrivateKey) []byte {
	b, err := abi.MarshalPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStore(t *testing.T) {
	a, b := keys(t)
	dir := t.TempDir()
	now := time.UnixMilli(1_700_000_000_000)
	s, bad, err := Open(dir, []*rsa.PublicKey{&a.PublicKey}, func() time.Time { return now })
	if err != nil || len(bad) != 0 {
		t.Fatal(err, bad)
	}
	idA, _ := abi.KeyID(&a.PublicKey)
	idB, _ := abi.KeyID(&b.PublicKey)
	if l := s.List(); len(l) != 1 || !l[0].Builtin || l[0].ID != idA {
		t.Fatalf("list %+v", l)
	}
	k, created, err := s.Add(pemOf(t, b))
	if err != nil || !created || k.ID != idB || k.Added != now.UnixMilli() {
		t.Fatalf("add: %+v %v %v", k, created, err)
	}
	if _, created, _ := s.Add(pemOf(t, b)); created {
		t.Fatal("adding a trusted key again created it")
	}
	der, _ := x509.MarshalPKIXPublicKey(&b.PublicKey)
	if k, _, err := s.Add([]byte(base64.StdEncoding.EncodeToString(der))); err != nil || k.ID != idB {
		t.Fatalf("base64 DER: %v", err)
	}
	for _, junk := range []string{"", "junk", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"} {
		if _, _, err := s.Add([]byte(junk)); err == nil {
			t.Errorf("key %q accepted", junk)
		}
	}
	if err := s.Remove(idA); !errors.Is(err, ErrBuiltin) {
		t.Fatalf("remove built-in: %v", err)
	}
	if err := s.Remove("0000000000000000"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("remove unknown: %v", err)
	}
	// A second store over the same directory sees the operator key; junk files are reported.
	if err := os.WriteFile(filepath.Join(dir, "broken.pem"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".tmp-leftover"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s2, bad, err := Open(dir, nil, nil)
	if err != nil || len(bad) != 1 {
		t.Fatalf("reopen: %v %v", err, bad)
	}
	if _, ok := s2.Lookup(idB); !ok {
		t.Fatal("operator key lost")
	}
	if _, ok := s2.Lookup(idA); ok {
		t.Fatal("a built-in key of another store leaked")
	}
	if _, err := os.Stat(filepath.Join(dir, ".tmp-leftover")); !os.IsNotExist(err) {
		t.Fatal("an interrupted write was not cleaned up")
	}
	if err := s2.Remove(idB); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, idB+".pem")); !os.IsNotExist(err) {
		t.Fatal("removed key's file stayed")
	}
}

func TestStoreFull(t *testing.T) {
	_, b := keys(t)
	dir := t.TempDir()
	s, _, err := Open(dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Fill with copies of one key under fake ids: the limit counts entries.
	for i := 0; i < MaxKeys; i++ {
		s.keys[strings.Repeat("0", 15)+string(rune('a'+i%6))+string(rune(i))] = Key{ID: "x"}
	}
	if _, _, err := s.Add(pemOf(t, b)); !errors.Is(err, ErrFull) {
		t.Fatalf("add to a full store: %v", err)
	}
}

func TestDevKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	k1, created, err := LoadOrCreateDevKey(dir)
	if err != nil || !created {
		t.Fatal(err, created)
	}
	fi, err := os.Stat(filepath.Join(dir, DevPrivateFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key file: %v %v", fi.Mode(), err)
	}
	pub, err := os.ReadFile(filepath.Join(dir, DevPublicFile))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := abi.ParsePublicKey(pub); err != nil || !p.Equal(&k1.PublicKey) {
		t.Fatal("public copy does not match")
	}
	k2, created, err := LoadOrCreateDevKey(dir)
	if err != nil || created || !k2.Equal(k1) {
		t.Fatal("second call made a new key")
	}
	t.Setenv("DEVHOST_KEYS", dir)
	if d, _ := DevKeyDir(); d != dir {
		t.Fatalf("DevKeyDir %s", d)
	}
	old := FirmwareKey
	defer func() { FirmwareKey = old }()
	FirmwareKey = ""
	ks, err := DevicePublicKeys(dir)
	if err != nil || len(ks) != 1 || !ks[0].Equal(&k1.PublicKey) {
		t.Fatal("a development device does not trust the development key")
	}
	a, _ := keys(t)
	FirmwareKey = string(pemOf(t, a))
	ks, err = DevicePublicKeys(dir)
	if err != nil || len(ks) != 1 || !ks[0].Equal(&a.PublicKey) {
		t.Fatal("the compiled-in key is not the one trusted")
	}
	der, _ := x509.MarshalPKIXPublicKey(&a.PublicKey)
	FirmwareKey = base64.StdEncoding.EncodeToString(der)
	if ks, err = DevicePublicKeys(dir); err != nil || !ks[0].Equal(&a.PublicKey) {
		t.Fatal("base64 compiled-in key")
	}
	FirmwareKey = "garbage"
	if _, err := DevicePublicKeys(dir); err == nil {
		t.Fatal("a malformed compiled-in key was accepted")
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := WriteFileAtomic(p, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(p, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	ents, _ := os.ReadDir(dir)
	if string(b) != "two" || len(ents) != 1 {
		t.Fatalf("%q %d entries", b, len(ents))
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "f"), nil, 0o644); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}
