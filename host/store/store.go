// Package store owns the device's `nvs` partition: one buntdb file holding the configuration
// and the device state as string keys and values, with the guarantees the rest of the device
// builds on:
//
//   - Durability. Every write that returns nil has been written and fsynced. buntdb's own
//     SyncPolicy Always discards the fsync error, so the store runs buntdb with SyncPolicy
//     Never and fsyncs the file itself through a second descriptor after each commit; a failed
//     fsync is reported as a failed write (the caller answers 500 write_failed).
//   - All-or-nothing batches. buntdb writes a multi-key transaction as one append with no
//     commit marker, so a torn tail can keep part of it. Apply therefore writes the whole batch
//     first as one intent record under one reserved key (a single record is atomic: a torn
//     record is truncated at the next open), then applies the batch in a second commit and
//     removes the intent in a third. The removal must be its own commit: buntdb orders the
//     records of one commit by map iteration, so a removal inside the batch commit could land
//     on disk before some of the batch. Open replays a leftover intent, so after any power cut
//     a batch is either wholly absent or wholly present.
//   - Compaction. Open rewrites the file when it holds dead records (the equivalent of
//     buntdb's Shrink, done durably: the snapshot is fsynced before it is renamed over the file
//     and the directory is fsynced after; buntdb's Shrink does neither and sleeps 250 ms).
//     Compact may be called on a schedule by the owner; buntdb's automatic shrink is disabled.
//     A compaction at open that cannot write its snapshot (the disk is full) leaves the file
//     as it is, whole: the store opens anyway, reads are served, and CompactDeferred tells why
//     (the device raises a health condition from it). Writes then fail as the disk does.
//   - Corruption. A file that cannot be parsed as buntdb is renamed to `<path>.corrupt`
//     (replacing an older one) and a fresh store is created; ErasedAtBoot reports it, which
//     feeds `config_storage_reset` in /system/info. A torn tail alone is not corruption: buntdb
//     truncates it.
//   - One owner. `<path>.lock` is held with flock while the store is open, so a second process
//     opening the same partition fails with ErrLocked instead of interleaving appends.
//
// Keys starting with "!" are reserved for the store itself and are refused by every method.
package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/tidwall/buntdb"
)

// ReservedPrefix starts every key the store keeps for itself.
const ReservedPrefix = "!"

// intentKey holds a batch between its intent record and its removal.
const intentKey = ReservedPrefix + "intent"

var (
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("store: closed")
	// ErrLocked is returned by Open when another process holds the partition.
	ErrLocked = errors.New("store: partition in use by another process")
	// ErrReservedKey is returned for an empty key or one starting with ReservedPrefix.
	ErrReservedKey = errors.New("store: empty or reserved key")
	// errCorrupt marks a file buntdb cannot parse.
	errCorrupt = errors.New("store: unreadable partition")
)

// Store is the open `nvs` partition. It is safe for concurrent use.
type Store struct {
	path string

	mu     sync.RWMutex // guards everything below; writers hold it exclusively
	db     *buntdb.DB
	syncf  *os.File // second descriptor on the data file, for checked fsync
	lock   *os.File
	erased bool
	fail   error // set by FailWritesForTest
	// failAfter, when positive, lets that many commits succeed and fails the next ones with
	// fail; the store's own tests use it to interrupt Apply between its commits.
	failAfter int
	// staleIntent is set when Apply could not remove its intent record. It must go before any
	// later write: replayed at the next boot it would overwrite that write.
	staleIntent bool
	// writeSnapshot writes a compaction snapshot durably; a test puts a full disk here.
	writeSnapshot func(path string, data []byte) error
	// deferred is why the compaction at open was skipped, nil when it was done.
	deferred error
}

// Open opens (or creates) the partition at path, replays an interrupted batch and compacts the
// file. A file buntdb cannot parse is moved aside and replaced by an empty store.
func Open(path string) (*Store, error) { return openWith(path, writeSynced) }

func openWith(path string, writeSnapshot func(string, []byte) error) (*Store, error) {
	lock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, err
	}
	s := &Store{path: path, lock: lock, writeSnapshot: writeSnapshot}
	if err := s.open(); err != nil {
		unlockFile(lock)
		return nil, err
	}
	if err := s.replayIntent(); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("store: replay interrupted batch: %w", err)
	}
	if err := s.Compact(); err != nil {
		s.mu.Lock()
		open := s.db != nil
		s.deferred = err
		s.mu.Unlock()
		if !open {
			// The old file was already closed when the compaction failed (it could not be
			// reopened): nothing can be served.
			_ = s.Close()
			return nil, fmt.Errorf("store: compact at open: %w", err)
		}
		// The snapshot could not be written (a full disk): the data file is untouched and
		// whole, so the device boots on it and compacts another time.
	}
	return s, nil
}

// CompactDeferred tells why the compaction at open was skipped (nil when it was done or a
// later Compact succeeded): typically a full disk. The store works meanwhile; its file
// keeps its dead records.
func (s *Store) CompactDeferred() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.deferred
}

// open loads the data file, moving an unreadable one aside.
func (s *Store) open() error {
	// A compaction interrupted before its rename leaves its snapshot behind; the data file is
	// still the whole truth, so the snapshot is dropped.
	_ = os.Remove(s.compactPath())
	db, err := openDB(s.path)
	if errors.Is(err, errCorrupt) {
		if rerr := os.Rename(s.path, s.path+".corrupt"); rerr != nil {
			return fmt.Errorf("store: move unreadable partition aside: %w", rerr)
		}
		if serr := syncDir(s.path); serr != nil {
			return serr
		}
		s.erased = true
		db, err = openDB(s.path)
	}
	if err != nil {
		return fmt.Errorf("store: open %s: %w", s.path, err)
	}
	return s.attach(db)
}

// openDB opens the buntdb file, turning every sign of a malformed file into errCorrupt. buntdb
// indexes command names without checking their length, so some malformed files panic inside
// its loader; that panic is a property of the file, not of the program.
func openDB(path string) (db *buntdb.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%w: %v", errCorrupt, r)
		}
	}()
	db, err = buntdb.Open(path)
	var numErr *strconv.NumError
	if errors.Is(err, buntdb.ErrInvalid) || errors.As(err, &numErr) {
		return nil, fmt.Errorf("%w: %v", errCorrupt, err)
	}
	return db, err
}

// ErasedAtBoot reports whether Open found an unreadable partition and started empty.
func (s *Store) ErasedAtBoot() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.erased
}

// FailWritesForTest makes every later write fail with err (nil restores normal writes)
// without touching the file. Other packages use it to exercise their storage-failure paths.
func (s *Store) FailWritesForTest(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail, s.failAfter = err, 0
}

// Get returns the value of key and whether it is stored.
func (s *Store) Get(key string) (string, bool, error) {
	if !userKey(key) {
		return "", false, ErrReservedKey
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return "", false, ErrClosed
	}
	return get(s.db, key)
}

func get(db *buntdb.DB, key string) (string, bool, error) {
	var v string
	var found bool
	err := db.View(func(tx *buntdb.Tx) error {
		val, err := tx.Get(key)
		if errors.Is(err, buntdb.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		v, found = val, true
		return nil
	})
	if err != nil {
		return "", false, fmt.Errorf("store: get %q: %w", key, err)
	}
	return v, found, nil
}

// Scan calls fn for every stored key starting with prefix, in key order, until fn returns
// false. fn runs outside the store's locks and may write.
func (s *Store) Scan(prefix string, fn func(k, v string) bool) error {
	type kv struct{ k, v string }
	var items []kv
	s.mu.RLock()
	if s.db == nil {
		s.mu.RUnlock()
		return ErrClosed
	}
	err := s.db.View(func(tx *buntdb.Tx) error {
		return tx.AscendGreaterOrEqual("", prefix, func(k, v string) bool {
			if !strings.HasPrefix(k, prefix) {
				return false
			}
			if userKey(k) {
				items = append(items, kv{k, v})
			}
			return true
		})
	})
	s.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("store: scan %q: %w", prefix, err)
	}
	for _, it := range items {
		if !fn(it.k, it.v) {
			break
		}
	}
	return nil
}

// Set stores value under key durably.
func (s *Store) Set(key, value string) error {
	if !userKey(key) {
		return ErrReservedKey
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commit(func(tx *buntdb.Tx) error {
		_, _, err := tx.Set(key, value, nil)
		return err
	})
}

// Delete removes key durably; removing an absent key is not an error.
func (s *Store) Delete(key string) error {
	if !userKey(key) {
		return ErrReservedKey
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commit(func(tx *buntdb.Tx) error {
		return deleteKey(tx, key)
	})
}

// Apply stores sets and removes deletes as one batch that survives a power cut either whole or
// not at all. A key may not appear in both.
func (s *Store) Apply(sets map[string]string, deletes []string) error {
	for k := range sets {
		if !userKey(k) {
			return ErrReservedKey
		}
	}
	for _, k := range deletes {
		if !userKey(k) {
			return ErrReservedKey
		}
		if _, dup := sets[k]; dup {
			return fmt.Errorf("store: key %q both set and deleted in one batch", k)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch len(sets) + len(deletes) {
	case 0:
		if s.db == nil {
			return ErrClosed
		}
		return nil
	case 1:
		// One record is atomic by itself.
		return s.commit(func(tx *buntdb.Tx) error { return applyBatch(tx, sets, deletes) })
	}
	intent := encodeIntent(sets, deletes)
	if err := s.commit(func(tx *buntdb.Tx) error {
		_, _, err := tx.Set(intentKey, intent, nil)
		return err
	}); err != nil {
		return fmt.Errorf("store: batch intent: %w", err)
	}
	if err := s.commit(func(tx *buntdb.Tx) error { return applyBatch(tx, sets, deletes) }); err != nil {
		// Withdraw the intent so a later boot does not apply a batch reported as failed. If
		// even that fails, a power cut now makes the next boot apply the whole batch, which is
		// still whole, and the next write retries the removal first.
		s.staleIntent = true
		_ = s.removeStaleIntent()
		return fmt.Errorf("store: batch: %w", err)
	}
	s.staleIntent = true
	if err := s.removeStaleIntent(); err != nil {
		return fmt.Errorf("store: batch intent removal: %w", err)
	}
	return nil
}

// EraseAll removes every stored value (factory reset). The erase is one record, so a power
// cut leaves either everything or nothing; the file is then rewritten so no erased value
// remains readable in it.
func (s *Store) EraseAll() error {
	s.mu.Lock()
	err := s.commit(func(tx *buntdb.Tx) error { return tx.DeleteAll() })
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("store: erase: %w", err)
	}
	return s.Compact()
}

// Compact rewrites the file without dead records when it holds any. Writers wait meanwhile.
func (s *Store) Compact() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return ErrClosed
	}
	var snap bytes.Buffer
	if err := s.db.Save(&snap); err != nil {
		return fmt.Errorf("store: snapshot: %w", err)
	}
	fi, err := s.syncf.Stat()
	if err != nil {
		return fmt.Errorf("store: stat: %w", err)
	}
	if fi.Size() <= int64(snap.Len()) {
		s.deferred = nil
		return nil
	}
	tmp := s.compactPath()
	if err := s.writeSnapshot(tmp, snap.Bytes()); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	_ = s.db.Close()
	_ = s.syncf.Close()
	s.db, s.syncf = nil, nil
	if err := os.Rename(tmp, s.path); err != nil {
		_ = os.Remove(tmp)
		if oerr := s.reopen(); oerr != nil {
			return errors.Join(fmt.Errorf("store: replace partition: %w", err), oerr)
		}
		return fmt.Errorf("store: replace partition: %w", err)
	}
	if err := syncDir(s.path); err != nil {
		return errors.Join(err, s.reopen())
	}
	if err := s.reopen(); err != nil {
		return err
	}
	s.deferred = nil
	return nil
}

func (s *Store) reopen() error {
	db, err := openDB(s.path)
	if err != nil {
		return fmt.Errorf("store: reopen after compaction: %w", err)
	}
	return s.attach(db)
}

// attach makes db the open partition: buntdb's own syncing and shrinking are off (the store
// syncs the file itself at each acknowledged write and compacts on its own terms), and the
// file is opened a second time for that sync. On failure db is closed.
func (s *Store) attach(db *buntdb.DB) error {
	if err := db.SetConfig(buntdb.Config{SyncPolicy: buntdb.Never, AutoShrinkDisabled: true}); err != nil {
		_ = db.Close()
		return fmt.Errorf("store: configure: %w", err)
	}
	f, err := os.OpenFile(s.path, os.O_RDWR, 0)
	if err != nil {
		_ = db.Close()
		return fmt.Errorf("store: open for sync: %w", err)
	}
	s.db, s.syncf = db, f
	return nil
}

// Close releases the partition. Every acknowledged write is already on disk.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lock == nil {
		return ErrClosed
	}
	var errs []error
	if s.db != nil {
		errs = append(errs, s.db.Close(), s.syncf.Close())
		s.db, s.syncf = nil, nil
	}
	unlockFile(s.lock)
	s.lock = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// commit runs one buntdb write transaction and fsyncs it. Callers hold s.mu.
func (s *Store) commit(fn func(tx *buntdb.Tx) error) error {
	if s.db == nil {
		return ErrClosed
	}
	if s.staleIntent {
		if err := s.removeStaleIntent(); err != nil {
			return err
		}
	}
	return s.rawCommit(fn)
}

// removeStaleIntent drops a leftover intent record. Callers hold s.mu.
func (s *Store) removeStaleIntent() error {
	if err := s.rawCommit(func(tx *buntdb.Tx) error { return deleteKey(tx, intentKey) }); err != nil {
		return err
	}
	s.staleIntent = false
	return nil
}

func (s *Store) rawCommit(fn func(tx *buntdb.Tx) error) error {
	if s.db == nil {
		return ErrClosed
	}
	if s.fail != nil {
		if s.failAfter <= 0 {
			return fmt.Errorf("store: write: %w", s.fail)
		}
		s.failAfter--
	}
	if err := s.db.Update(fn); err != nil {
		return fmt.Errorf("store: write: %w", err)
	}
	if err := s.syncf.Sync(); err != nil {
		return fmt.Errorf("store: fsync: %w", err)
	}
	return nil
}

// replayIntent finishes a batch a power cut interrupted after its intent record.
func (s *Store) replayIntent() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, found, err := get(s.db, intentKey)
	if err != nil || !found {
		return err
	}
	sets, deletes, derr := decodeIntent(raw)
	if derr == nil {
		if err := s.commit(func(tx *buntdb.Tx) error { return applyBatch(tx, sets, deletes) }); err != nil {
			return err
		}
	}
	// An undecodable intent cannot come from Apply (the record is atomic); it is dropped.
	return s.commit(func(tx *buntdb.Tx) error { return deleteKey(tx, intentKey) })
}

func (s *Store) compactPath() string { return s.path + ".compact" }

func applyBatch(tx *buntdb.Tx, sets map[string]string, deletes []string) error {
	for k, v := range sets {
		if _, _, err := tx.Set(k, v, nil); err != nil {
			return err
		}
	}
	for _, k := range deletes {
		if err := deleteKey(tx, k); err != nil {
			return err
		}
	}
	return nil
}

func deleteKey(tx *buntdb.Tx, key string) error {
	if _, err := tx.Delete(key); err != nil && !errors.Is(err, buntdb.ErrNotFound) {
		return err
	}
	return nil
}

func userKey(k string) bool { return k != "" && !strings.HasPrefix(k, ReservedPrefix) }

// The intent record is binary-safe: 'S' key value or 'D' key, each string preceded by its
// length as a uvarint.
func encodeIntent(sets map[string]string, deletes []string) string {
	var b []byte
	for k, v := range sets {
		b = append(b, 'S')
		b = appendString(b, k)
		b = appendString(b, v)
	}
	for _, k := range deletes {
		b = append(b, 'D')
		b = appendString(b, k)
	}
	return string(b)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errBadIntent = errors.New("store: malformed batch intent")

func decodeIntent(raw string) (map[string]string, []string, error) {
	b := []byte(raw)
	sets := map[string]string{}
	var deletes []string
	next := func() (string, bool) {
		n, w := binary.Uvarint(b)
		if w <= 0 || n > uint64(len(b)-w) {
			return "", false
		}
		s := string(b[w : w+int(n)])
		b = b[w+int(n):]
		return s, true
	}
	for len(b) > 0 {
		op := b[0]
		b = b[1:]
		k, ok := next()
		if !ok || !userKey(k) {
			return nil, nil, errBadIntent
		}
		switch op {
		case 'S':
			v, ok := next()
			if !ok {
				return nil, nil, errBadIntent
			}
			sets[k] = v
		case 'D':
			deletes = append(deletes, k)
		default:
			return nil, nil, errBadIntent
		}
	}
	return sets, deletes, nil
}

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("store: create snapshot: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("store: write snapshot: %w", err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("store: fsync snapshot: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("store: close snapshot: %w", err)
	}
	return nil
}

// syncDir makes a rename in the partition's directory durable.
func syncDir(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("store: open directory: %w", err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("store: fsync directory: %w", err)
	}
	return nil
}
