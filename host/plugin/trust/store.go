package trust

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"devhost/abi"
)

// MaxKeys bounds the operator keys a store keeps.
const MaxKeys = 16

// Errors of the store.
var (
	ErrBuiltin = errors.New("trust: built-in key cannot be removed")
	ErrFull    = errors.New("trust: key store full")
	ErrWrite   = errors.New("trust: storage failure")
)

// Key is one trusted public key as the API shows it.
type Key struct {
	ID      string `json:"kid"`
	Builtin bool   `json:"builtin"`
	// Added is when an operator added the key (unix ms); 0 for built-in keys.
	Added int64  `json:"added_ms,omitempty"`
	PEM   string `json:"pem"`

	pub *rsa.PublicKey
}

// Public is the key itself.
func (k Key) Public() *rsa.PublicKey { return k.pub }

// Store is the trust store: built-in keys in memory, operator keys as files in dir.
type Store struct {
	dir string
	now func() time.Time

	mu   sync.RWMutex
	keys map[string]Key
}

// Open loads the operator keys in dir (created when missing) beside the built-in keys. A key
// file that does not parse is skipped and returned in the error list, never trusted.
func Open(dir string, builtin []*rsa.PublicKey, now func() time.Time) (*Store, []error, error) {
	if now == nil {
		now = time.Now
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("trust: key directory: %w", err)
	}
	s := &Store{dir: dir, now: now, keys: map[string]Key{}}
	for _, pub := range builtin {
		id, err := abi.KeyID(pub)
		if err != nil {
			return nil, nil, fmt.Errorf("trust: built-in key: %w", err)
		}
		enc, _ := abi.MarshalPublicKey(pub)
		s.keys[id] = Key{ID: id, Builtin: true, PEM: string(enc), pub: pub}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("trust: key directory: %w", err)
	}
	var bad []error
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			_ = os.Remove(filepath.Join(dir, name)) // an interrupted write
			continue
		}
		if !strings.HasSuffix(name, ".pem") || e.IsDir() {
			continue
		}
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			bad = append(bad, fmt.Errorf("trust: %s: %w", path, err))
			continue
		}
		pub, err := abi.ParsePublicKey(b)
		if err != nil {
			bad = append(bad, fmt.Errorf("trust: %s: %w", path, err))
			continue
		}
		id, _ := abi.KeyID(pub)
		if name != id+".pem" {
			bad = append(bad, fmt.Errorf("trust: %s: file name does not match key id %s", path, id))
			continue
		}
		if _, dup := s.keys[id]; dup {
			continue
		}
		var added int64
		if fi, err := e.Info(); err == nil {
			added = fi.ModTime().UnixMilli()
		}
		s.keys[id] = Key{ID: id, Added: added, PEM: string(b), pub: pub}
	}
	return s, bad, nil
}

// Lookup finds a trusted key by id.
func (s *Store) Lookup(id string) (*rsa.PublicKey, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.keys[id]
	return k.pub, ok
}

// Get returns one key.
func (s *Store) Get(id string) (Key, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.keys[id]
	return k, ok
}

// List returns every key, built-in first, then by id.
func (s *Store) List() []Key {
	s.mu.RLock()
	out := make([]Key, 0, len(s.keys))
	for _, k := range s.keys {
		out = append(out, k)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Builtin != out[j].Builtin {
			return out[i].Builtin
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Add trusts a publisher key given as PEM ("PUBLIC KEY") or base64 PKIX DER. created is false
// when it was already trusted.
func (s *Store) Add(b []byte) (k Key, created bool, err error) {
	pub, err := ParsePublic(b)
	if err != nil {
		return Key{}, false, err
	}
	id, _ := abi.KeyID(pub)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.keys[id]; ok {
		return old, false, nil
	}
	n := 0
	for _, k := range s.keys {
		if !k.Builtin {
			n++
		}
	}
	if n >= MaxKeys {
		return Key{}, false, fmt.Errorf("%w: at most %d publisher keys", ErrFull, MaxKeys)
	}
	enc, _ := abi.MarshalPublicKey(pub)
	if err := WriteFileAtomic(filepath.Join(s.dir, id+".pem"), enc, 0o644); err != nil {
		return Key{}, false, fmt.Errorf("%w: %w", ErrWrite, err)
	}
	k = Key{ID: id, Added: s.now().UnixMilli(), PEM: string(enc), pub: pub}
	s.keys[id] = k
	return k, true, nil
}

// Remove stops trusting an operator key.
func (s *Store) Remove(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.keys[id]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownKey, id)
	}
	if k.Builtin {
		return fmt.Errorf("%w: %s", ErrBuiltin, id)
	}
	if err := os.Remove(filepath.Join(s.dir, id+".pem")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: remove key %s: %w", ErrWrite, id, err)
	}
	if err := SyncDir(s.dir); err != nil {
		return fmt.Errorf("%w: %w", ErrWrite, err)
	}
	delete(s.keys, id)
	return nil
}
