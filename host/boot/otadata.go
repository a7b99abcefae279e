package boot

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// OTA partitions in the data directory.
const (
	OTADataFile = "otadata"
	slotPrefix  = "ota_"
	// sectorSize is one copy of the otadata record; the partition holds two.
	sectorSize = 4096
)

// Slot states, as the bootloader and the app move them:
//
//	empty    nothing bootable (never written, or being written by a download)
//	new      written and verified by the app, not booted yet
//	pending  booted once, waiting for the app to confirm it
//	valid    confirmed (or flashed over USB)
//	invalid  rolled back by the app (confirm timeout, POST /ota/rollback)
//	aborted  rolled back by the bootloader (a reset while pending: panic, power cut)
const (
	SlotEmpty   = "empty"
	SlotNew     = "new"
	SlotPending = "pending"
	SlotValid   = "valid"
	SlotInvalid = "invalid"
	SlotAborted = "aborted"
)

// Slot is one OTA slot's record in otadata.
type Slot struct {
	State   string `json:"state"`
	Version string `json:"version,omitempty"`
	Size    int64  `json:"size,omitempty"`
	SHA256  string `json:"sha256,omitempty"` // of the executable in the slot file
	// Verified is the slot file's stamp when the bootloader last found it to hash to SHA256;
	// while the file keeps it, later boots skip the hash (FileStamp says what that risks).
	Verified FileStamp `json:"verified,omitzero"`
}

// Failed reports whether the slot holds an image that was rolled back.
func (s Slot) Failed() bool { return s.State == SlotInvalid || s.State == SlotAborted }

// OTAData is the otadata partition's record: which slot boots and what each slot holds.
type OTAData struct {
	Seq     uint64  `json:"seq"`
	Boot    int     `json:"boot"`
	Slots   [2]Slot `json:"slots"`
	Flashed string  `json:"flashed"` // SHA-256 of the executable last flashed over USB
	// FlashedFrom is the stamp of the started executable when it last hashed to Flashed: a
	// power-on that finds the executable with the same stamp knows it is the same one.
	FlashedFrom FileStamp `json:"flashed_from,omitzero"`
}

// SlotPath is the file of OTA slot n.
func SlotPath(dir string, n int) string { return filepath.Join(dir, slotPrefix+strconv.Itoa(n)) }

// ErrNoOTAData: the partition is missing or neither copy is intact.
var ErrNoOTAData = errors.New("boot: no intact otadata")

// ReadOTAData reads the partition: of its two copies, the intact one with the higher sequence.
// A copy torn by a power cut fails its CRC and is ignored, so a write is all or nothing.
func ReadOTAData(dir string) (OTAData, error) {
	b, err := os.ReadFile(filepath.Join(dir, OTADataFile))
	if errors.Is(err, os.ErrNotExist) {
		return OTAData{}, ErrNoOTAData
	}
	if err != nil {
		return OTAData{}, fmt.Errorf("boot: read otadata: %w", err)
	}
	best, ok := OTAData{}, false
	for i := 0; i < 2; i++ {
		if len(b) < (i+1)*sectorSize {
			break
		}
		d, good := decodeSector(b[i*sectorSize : (i+1)*sectorSize])
		if good && (!ok || d.Seq > best.Seq) {
			best, ok = d, true
		}
	}
	if !ok {
		return OTAData{}, ErrNoOTAData
	}
	return best, nil
}

// decodeSector: 4-byte big-endian length, JSON, CRC-32 (IEEE) of the JSON.
func decodeSector(s []byte) (OTAData, bool) {
	n := int(binary.BigEndian.Uint32(s))
	if n <= 0 || n > sectorSize-8 {
		return OTAData{}, false
	}
	js := s[4 : 4+n]
	if crc32.ChecksumIEEE(js) != binary.BigEndian.Uint32(s[4+n:]) {
		return OTAData{}, false
	}
	var d OTAData
	if json.Unmarshal(js, &d) != nil || d.Boot < 0 || d.Boot > 1 {
		return OTAData{}, false
	}
	return d, true
}

// WriteOTAData stores d as the next record: its sequence follows the current one and it goes
// into the copy the current record is not in, synced before returning. A power cut during the
// write leaves the previous record intact in the other copy.
func WriteOTAData(dir string, d OTAData) error {
	cur, err := ReadOTAData(dir)
	switch {
	case err == nil:
		d.Seq = cur.Seq + 1
	case errors.Is(err, ErrNoOTAData):
		d.Seq = 1
	default:
		return err
	}
	js, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("boot: encode otadata: %w", err)
	}
	if len(js) > sectorSize-8 {
		return fmt.Errorf("boot: otadata record of %d bytes", len(js))
	}
	sec := make([]byte, sectorSize)
	binary.BigEndian.PutUint32(sec, uint32(len(js)))
	copy(sec[4:], js)
	binary.BigEndian.PutUint32(sec[4+len(js):], crc32.ChecksumIEEE(js))

	f, err := os.OpenFile(filepath.Join(dir, OTADataFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("boot: open otadata: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteAt(sec, int64(d.Seq%2)*sectorSize); err != nil {
		return fmt.Errorf("boot: write otadata: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("boot: sync otadata: %w", err)
	}
	return nil
}

// UpdateOTAData reads the record, lets fn change it and writes it back.
func UpdateOTAData(dir string, fn func(*OTAData) error) error {
	d, err := ReadOTAData(dir)
	if err != nil {
		return err
	}
	if err := fn(&d); err != nil {
		return err
	}
	return WriteOTAData(dir, d)
}

func fileSHA256Hex(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// hashComparing hashes the file at path while comparing it with the file at other, byte for
// byte: the executable and its copy in ota_0 are read once each and hashed once, where
// hashing both cost twice the CPU (SHA-256 of 30 MB is tens of milliseconds). same reports
// that both files hold the same bytes.
func hashComparing(path, other string) (sum string, size int64, same bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, false, err
	}
	defer f.Close()
	g, err := os.Open(other)
	if err != nil {
		return "", 0, false, err
	}
	defer g.Close()
	h := sha256.New()
	a, b := make([]byte, 256<<10), make([]byte, 256<<10+1)
	same = true
	for {
		n, rerr := io.ReadFull(f, a)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			return "", 0, false, rerr
		}
		h.Write(a[:n])
		size += int64(n)
		if same {
			// At the end of path the other file must end too: one more byte is a difference.
			want := n
			if rerr != nil {
				want = n + 1
			}
			m, gerr := io.ReadFull(g, b[:want])
			if gerr != nil && gerr != io.EOF && gerr != io.ErrUnexpectedEOF {
				return "", 0, false, gerr
			}
			same = m == n && bytes.Equal(a[:n], b[:m])
		}
		if rerr != nil {
			return hex.EncodeToString(h.Sum(nil)), size, same, nil
		}
	}
}

// copyFileSynced copies src to dst so that a power cut leaves either no dst or all of it: a
// synced temporary file renamed into place, then the directory synced.
func copyFileSynced(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(dst))
}

// flashUSB is the serial flash: the started executable goes into ota_0, otadata starts over
// with ota_0 valid and ota_1 empty. The configuration (nvs) is not touched.
func (s *supervisor) flashUSB() (OTAData, error) {
	dir, exe := s.o.DataDir, s.o.Exe
	var size int64
	sum, stamp, err := hashStamped(exe, s.now(), func() (sum string, err error) {
		s.hashes++
		sum, size, err = fileSHA256Hex(exe)
		return sum, err
	})
	if err != nil {
		return OTAData{}, fmt.Errorf("boot: read the executable to flash: %w", err)
	}
	if err := copyFileSynced(exe, SlotPath(dir, 0)); err != nil {
		return OTAData{}, fmt.Errorf("boot: flash ota_0: %w", err)
	}
	d := OTAData{Boot: 0, Flashed: sum, FlashedFrom: stamp}
	d.Slots[0] = Slot{State: SlotValid, Version: s.o.Version, Size: size, SHA256: sum}
	d.Slots[1] = Slot{State: SlotEmpty}
	if err := WriteOTAData(dir, d); err != nil {
		return OTAData{}, err
	}
	return ReadOTAData(dir)
}

// slotIntact reports whether slot n's file holds the executable its record names, and the
// stamp to record for it (the zero stamp: none). A file that keeps the stamp recorded when it
// was last hashed is not hashed again.
func (s *supervisor) slotIntact(n int, rec Slot) (bool, FileStamp) {
	if rec.SHA256 == "" {
		return false, FileStamp{}
	}
	path := SlotPath(s.o.DataDir, n)
	if vouches(rec.Verified, path, rec.SHA256) && rec.Verified.Size == rec.Size {
		return true, rec.Verified
	}
	var size int64
	sum, stamp, err := hashStamped(path, s.now(), func() (sum string, err error) {
		s.hashes++
		sum, size, err = fileSHA256Hex(path)
		return sum, err
	})
	if err != nil || sum != rec.SHA256 || size != rec.Size {
		return false, FileStamp{}
	}
	return true, stamp
}

// now is the wall time file times are compared with.
func (s *supervisor) now() time.Time {
	if s.o.Clock == nil {
		return time.Now()
	}
	return s.o.Clock.Now()
}

// bootable: a slot the bootloader may start.
func bootable(s Slot) bool {
	return s.State == SlotValid || s.State == SlotNew || s.State == SlotPending
}

// exeChanged answers at power-on whether the started executable differs from the one last
// flashed over USB, hashing it (otadata's stamp of it did not vouch for it). While ota_0 still
// holds the image flashed over USB, hashing ota_0 while comparing the executable with it
// answers both questions with one hash: an intact ota_0 equal to the executable means the same
// executable, one that differs a changed one. A damaged ota_0 says nothing about the
// executable: it is hashed itself. The stamps of what was hashed are recorded in d, and intact
// gets ota_0's answer when it was checked.
func (s *supervisor) exeChanged(d *OTAData, intact map[int]bool) (bool, error) {
	now := s.now()
	if d.Flashed != "" && d.Slots[0].SHA256 == d.Flashed {
		slot0 := SlotPath(s.o.DataDir, 0)
		var (
			size int64
			same bool
			exe  FileStamp
		)
		// The executable's stamp is the one it had through the whole comparison.
		pre, perr := statStamp(s.o.Exe)
		sum, stamp, err := hashStamped(slot0, now, func() (sum string, err error) {
			s.hashes++
			sum, size, same, err = hashComparing(slot0, s.o.Exe)
			return sum, err
		})
		if post, serr := statStamp(s.o.Exe); perr == nil && serr == nil && post == pre && !racy(pre, now) {
			exe = pre
		}
		if err == nil {
			good := sum == d.Slots[0].SHA256 && size == d.Slots[0].Size
			intact[0] = good
			if good {
				d.Slots[0].Verified = stamp
				if same && exe != (FileStamp{}) {
					exe.SHA256 = d.Flashed
					d.FlashedFrom = exe
				}
				return !same, nil
			}
		}
	}
	sum, stamp, err := hashStamped(s.o.Exe, now, func() (string, error) {
		s.hashes++
		sum, _, err := fileSHA256Hex(s.o.Exe)
		return sum, err
	})
	if err != nil {
		return false, fmt.Errorf("boot: read the executable: %w", err)
	}
	if sum != d.Flashed {
		return true, nil
	}
	d.FlashedFrom = stamp
	return false, nil
}

// chooseSlot is the bootloader, run before every start of the app: at power-on it flashes a
// changed executable over USB; then it picks the slot to boot, rolls back an image that was
// reset before it confirmed itself, and moves a new image to pending. It returns the slot and
// the SHA-256 of its executable.
func (s *supervisor) chooseSlot(powerOn bool) (int, string, error) {
	dir := s.o.DataDir
	d, err := ReadOTAData(dir)
	if err != nil && !errors.Is(err, ErrNoOTAData) {
		return 0, "", err
	}
	flash := err != nil
	before := d
	// intact holds the slots whose file was checked in this call (slotIntact's answer).
	intact := map[int]bool{}
	if powerOn && !flash && !vouches(d.FlashedFrom, s.o.Exe, d.Flashed) {
		if flash, err = s.exeChanged(&d, intact); err != nil {
			return 0, "", err
		}
	}
	if flash {
		intact = map[int]bool{}
		s.log.Info("flash over USB: the started executable goes into ota_0", "exe", s.o.Exe, "version", s.o.Version)
		if d, err = s.flashUSB(); err != nil {
			return 0, "", err
		}
		before = d
	}
	ok := func(n int) bool {
		if !bootable(d.Slots[n]) {
			return false
		}
		v, checked := intact[n]
		if !checked {
			v, d.Slots[n].Verified = s.slotIntact(n, d.Slots[n])
			intact[n] = v
		}
		return v
	}
	n := d.Boot
	switch {
	case d.Slots[n].State == SlotPending && ok(1-n):
		s.log.Warn("the image was reset before it confirmed itself: rolling back", "slot", n,
			"version", d.Slots[n].Version, "to_slot", 1-n, "to_version", d.Slots[1-n].Version)
		d.Slots[n].State = SlotAborted
		n = 1 - n
	case !ok(n):
		s.log.Warn("slot not bootable", "slot", n, "state", d.Slots[n].State)
		if d.Slots[n].State != SlotEmpty {
			d.Slots[n].State = SlotAborted
		}
		if !ok(1 - n) {
			s.log.Error("no bootable slot: flashing the started executable over USB")
			if d, err = s.flashUSB(); err != nil {
				return 0, "", err
			}
			return 0, d.Slots[0].SHA256, nil
		}
		n = 1 - n
	}
	if d.Slots[n].State == SlotNew {
		d.Slots[n].State = SlotPending
	}
	d.Boot = n
	if d != before {
		write := s.writeOTA
		if write == nil {
			write = WriteOTAData
		}
		if err := write(dir, d); err != nil {
			if withoutStamps(d) != withoutStamps(before) {
				return 0, "", err
			}
			// Only the stamps were new: they spare the next power-on a hash, no more, and a
			// full flash must not stop the boot for them (the next power-on hashes again).
			s.log.Warn("record the slot stamps", "err", err)
		}
	}
	return n, d.Slots[n].SHA256, nil
}

// withoutStamps is d with its stamps cleared: the record the boot depends on.
func withoutStamps(d OTAData) OTAData {
	d.FlashedFrom = FileStamp{}
	for i := range d.Slots {
		d.Slots[i].Verified = FileStamp{}
	}
	return d
}
