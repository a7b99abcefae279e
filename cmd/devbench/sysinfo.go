package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuModel is the first "model name" of /proc/cpuinfo, or "cpu unknown".
func cpuModel() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "cpu unknown"
	}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return "cpu unknown"
}

// fsMagic names the file systems a data folder is likely to be on (statfs f_type).
var fsMagic = map[int64]string{
	0xEF53:     "ext4",
	0x01021994: "tmpfs",
	0x858458f6: "ramfs",
	0x794c7630: "overlay",
	0x58465342: "xfs",
	0x9123683e: "btrfs",
	0x2fc12fc1: "zfs",
	0x6969:     "nfs",
	0x65735546: "fuse",
	0xf2f52010: "f2fs",
}

// fsName names the file system holding path.
func fsName(path string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	if name, ok := fsMagic[int64(st.Type)]; ok {
		return name
	}
	return fmt.Sprintf("type 0x%x", st.Type)
}

// rssKiB reads VmRSS of a process from /proc.
func rssKiB(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the memory of pid %d: %w", pid, err)
	}
	return parseVmRSS(raw)
}

// parseVmRSS finds "VmRSS:   1234 kB" in a /proc/PID/status text.
func parseVmRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS line %q", sc.Text())
		}
		return parseCount(f[0])
	}
	return 0, fmt.Errorf("no VmRSS line")
}

// childRSS is the memory of the one child of pid (the device app under its boot supervisor).
func childRSS(pid int) (int64, int, error) {
	cpid, err := onlyChild(pid)
	if err != nil {
		return 0, 0, err
	}
	kib, err := rssKiB(cpid)
	return kib, cpid, err
}

// onlyChild is the pid of the one child of pid (the device app under its boot supervisor). A
// child is listed under the thread that started it, so every thread of pid is looked at.
func onlyChild(pid int) (int, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("finding the device app: no threads listed for pid %d", pid)
	}
	var children []string
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if err != nil {
			return 0, fmt.Errorf("finding the device app: %w", err)
		}
		children = append(children, strings.Fields(string(raw))...)
	}
	if len(children) != 1 {
		return 0, fmt.Errorf("the device supervisor (pid %d) has %d children, want 1", pid, len(children))
	}
	cpid, err := strconv.Atoi(children[0])
	if err != nil {
		return 0, fmt.Errorf("child pid %q: %w", children[0], err)
	}
	return cpid, nil
}

// processCPU is the CPU time pid's threads have run so far: the sum of the first field of
// every /proc/PID/task/TID/schedstat (nanoseconds on a CPU). /proc/PID/stat counts in clock
// ticks (10 ms), too coarse for a boot of a few tens of milliseconds; a thread that already
// ended is not counted here (the Go runtime seldom ends one).
func processCPU(pid int) (time.Duration, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("reading the CPU time of pid %d: no threads listed", pid)
	}
	var sum time.Duration
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended meanwhile
		}
		if err != nil {
			return 0, fmt.Errorf("reading the CPU time of pid %d: %w", pid, err)
		}
		ns, err := parseSchedstat(raw)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", t, err)
		}
		sum += ns
	}
	return sum, nil
}

// parseSchedstat reads the time on a CPU from a schedstat line "RUN_NS WAIT_NS SLICES".
func parseSchedstat(raw []byte) (time.Duration, error) {
	f := strings.Fields(string(raw))
	if len(f) != 3 {
		return 0, fmt.Errorf("schedstat %q: want 3 fields", raw)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || ns < 0 {
		return 0, fmt.Errorf("schedstat %q: bad run time", raw)
	}
	return time.Duration(ns), nil
}
