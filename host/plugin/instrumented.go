package plugin

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"

	"devhost/abi"
	"devhost/host/plugin/fuel"
	"devhost/host/plugin/stackguard"
	"devhost/host/plugin/trust"
)

// instrumentedPrefix starts the directory of the kept rewrites, beside the compiled code.
const instrumentedPrefix = "instrumented-"

// instrument returns the module as the host compiles it: with fuel's refuel calls (unless
// the engine is unbounded) and stackguard's stack bound. Both rewrites are pure functions of
// the module, the stack budget and this executable's code, and cost a start after a reboot
// about a third of its time (a profile of BenchmarkStart/boot: tens of milliseconds for a
// module of a few megabytes, as much as wazero's decoding). With a cache directory the
// result is kept on the flash beside the compiled code and read back at the next cold start;
// the file ends with a CRC-32C of the rest (damage is what it guards against: the file is
// trusted as the compiled code beside it is). The checksum of a kept file is computed on a
// goroutine of its own while the caller compiles the bytes: intact waits for it and tells
// whether they are the rewrite (nil when the rewrite was made here). The caller must not
// run or keep anything of bytes that are not, and rewrites the module instead (rewrite).
// key is the module's SHA-256 in hex.
func (e *engine) instrument(module []byte, key string) (guarded []byte, intact func() bool, err error) {
	path := e.instrumentedPath(key)
	if body, sum, ok := readKept(path); ok {
		done := make(chan bool, 1)
		go func() { done <- crc32.Checksum(body, castagnoli) == sum }()
		return body, sync.OnceValue(func() bool { return <-done }), nil
	}
	guarded, err = e.rewrite(module, path)
	return guarded, nil, err
}

// rewrite instruments the module and keeps the result at path ("": nowhere).
func (e *engine) rewrite(module []byte, path string) ([]byte, error) {
	out := module
	if !e.unbounded {
		fueled, err := fuel.Instrument(out, abi.Module)
		if err != nil {
			return nil, permanent(fmt.Errorf("compile: %w", err))
		}
		out = fueled
	}
	guarded, err := stackguard.Instrument(out, e.stack)
	if err != nil {
		return nil, permanent(fmt.Errorf("compile: %w", err))
	}
	if path != "" {
		// Without it the next cold start rewrites again: a failure costs time, not safety.
		_ = writeInstrumented(path, guarded)
	}
	return guarded, nil
}

// instrumentedPath names the kept rewrite of the module whose SHA-256 is key: a file named
// by it, the stack budget and whether fuel is in, under a directory named by this
// executable's build ID, so that any change of the host's code (fuel's and stackguard's
// included) looks elsewhere. "" when nothing is kept: no cache directory, or no build ID.
func (e *engine) instrumentedPath(key string) string {
	id := executableID()
	if e.cacheDir == "" || id == "" {
		return ""
	}
	return filepath.Join(e.cacheDir, instrumentedPrefix+id, fmt.Sprintf("%s-%d-%t", key, e.stack, !e.unbounded))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// readKept reads a kept rewrite: its bytes and the checksum it ends with, unchecked.
func readKept(path string) (body []byte, sum uint32, ok bool) {
	if path == "" {
		return nil, 0, false
	}
	b, err := os.ReadFile(path)
	if err != nil || len(b) < crc32.Size {
		return nil, 0, false
	}
	body = b[:len(b)-crc32.Size]
	return body, binary.LittleEndian.Uint32(b[len(body):]), true
}

// readInstrumented reads a kept rewrite and checks it.
func readInstrumented(path string) ([]byte, bool) {
	body, sum, ok := readKept(path)
	if !ok || crc32.Checksum(body, castagnoli) != sum {
		return nil, false
	}
	return body, true
}

func writeInstrumented(path string, module []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("plugin: instrumented module: %w", err)
	}
	b := make([]byte, 0, len(module)+crc32.Size)
	b = binary.LittleEndian.AppendUint32(append(b, module...), crc32.Checksum(module, castagnoli))
	return trust.WriteFileAtomic(path, b, 0o644)
}

// pruneInstrumented removes the rewrites an earlier executable kept: they are never read
// again, and a device's flash is small.
func pruneInstrumented(cacheDir string) {
	old, err := filepath.Glob(filepath.Join(cacheDir, instrumentedPrefix+"*"))
	if err != nil {
		return
	}
	keep := instrumentedPrefix + executableID()
	for _, o := range old {
		if filepath.Base(o) != keep {
			_ = os.RemoveAll(o)
		}
	}
}

// executableID is a short digest of the running executable's Go build ID, which changes
// with any change of its code; "" when it cannot be read (then nothing is kept).
var executableID = sync.OnceValue(func() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	f, err := elf.Open(exe)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := f.Section(".note.go.buildid")
	if s == nil {
		return ""
	}
	b, err := s.Data()
	if err != nil || len(b) == 0 {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
})
