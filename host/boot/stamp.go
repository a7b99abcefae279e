package boot

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// The bootloader checks an OTA slot (and, at power-on, the started executable) by its
// SHA-256 before it runs it. Hashing a 40 MB executable is tens of milliseconds of CPU at
// every boot, so a file found to hash to its record is remembered in otadata with its stamp:
// what the file system says about the file without reading it (device, inode, size,
// modification and change times). A later boot that finds the same stamp skips the hash.
//
// What the stamp protects against: any change to the file made through the file system.
// Writing into it, truncating it, replacing it (a rename over it, a copy, a rebuild of the
// executable), even with the same size and the old modification time set back: every write
// sets the change time (ctime), which no system call but a change of the system clock can
// set back, and a replaced file has another inode or other times. A change made within the
// file system's timestamp granularity of the recorded state could keep the stamp, so a
// stamp is recorded only for a file whose times are at least racyWindow in the past (the
// "racily clean" rule of git's index; racyWindow is longer than the file system's timestamp
// granularity): any later change gets a later time.
//
// What it does not protect against, and a full hash at every boot did: a change below the
// file system that leaves the inode alone (bits rotting on the medium, a write to the block
// device), and a file changed while the system clock was set back to within the recorded
// times. On this device the executable's pages usually come from the page cache, which a
// full hash read too, so the medium was not really checked before either. Nor does it, nor
// did the hash, protect against someone who can write the data directory: otadata's records
// carry no signature, so whoever can replace a slot can replace its record too; a slot's
// signature is checked when the app stores a downloaded image.
type FileStamp struct {
	// SHA256 is the hash the file had when the stamp was taken; the stamp vouches only for it.
	SHA256  string `json:"sha256"`
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	Size    int64  `json:"size"`
	MtimeNS int64  `json:"mtime_ns"`
	CtimeNS int64  `json:"ctime_ns"`
}

// A file changed less than racyWindow ago is not stamped (see FileStamp). The window must be
// longer than the file system's timestamp granularity: Linux file systems with nanosecond
// fields stamp times from the kernel's coarse clock (one tick, at most 10 ms), while FAT and
// file systems with whole seconds have 1 or 2 s. Times with no fraction of a second read as
// the latter (a nanosecond file system gives a zero fraction once in a billion writes, which
// only makes that file wait longer).
const (
	racyWindow       = 100 * time.Millisecond
	racyWindowCoarse = 2 * time.Second
)

// statStamp is the file's stamp without a hash.
func statStamp(path string) (FileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return FileStamp{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return FileStamp{}, errors.New("boot: no stat record for " + path)
	}
	return FileStamp{
		Dev: st.Dev, Ino: st.Ino, Size: st.Size,
		MtimeNS: st.Mtim.Nano(), CtimeNS: st.Ctim.Nano(),
	}, nil
}

// vouches reports whether rec, a stamp recorded for the hash sum, still describes the file at
// path: the file is then the one that hashed to sum.
func vouches(rec FileStamp, path, sum string) bool {
	if rec == (FileStamp{}) || rec.SHA256 == "" || rec.SHA256 != sum {
		return false
	}
	cur, err := statStamp(path)
	if err != nil {
		return false
	}
	cur.SHA256 = sum
	return cur == rec
}

// hashStamped hashes the file at path (hash does the reading) and returns with the hash the
// stamp to record for it: the zero stamp when the file changed while it was read or changed
// too recently to be stamped (racy).
func hashStamped(path string, now time.Time, hash func() (string, error)) (string, FileStamp, error) {
	pre, perr := statStamp(path)
	sum, err := hash()
	if err != nil || perr != nil {
		return sum, FileStamp{}, err
	}
	post, serr := statStamp(path)
	if serr != nil || post != pre || racy(pre, now) {
		return sum, FileStamp{}, nil
	}
	pre.SHA256 = sum
	return sum, pre, nil
}

// racy reports whether st changed too recently to be recorded (see racyWindow).
func racy(st FileStamp, now time.Time) bool {
	window := racyWindow
	if st.MtimeNS%int64(time.Second) == 0 && st.CtimeNS%int64(time.Second) == 0 {
		window = racyWindowCoarse
	}
	limit := now.Add(-window).UnixNano()
	return st.MtimeNS > limit || st.CtimeNS > limit
}
