package hostmem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Mapping is the kernel's account of one virtual memory area of this
// process (/proc/self/smaps): what the allocator's advice and the
// registration cache's pins actually did.
type Mapping struct {
	Start, End uintptr
	RSS        int64    // bytes resident
	AnonHuge   int64    // bytes backed by transparent huge pages
	Locked     int64    // bytes locked (mlock)
	Flags      []string // VmFlags: "hg" MADV_HUGEPAGE, "nh" MADV_NOHUGEPAGE, "lo" locked, ...
}

// Has reports whether the area carries VmFlags flag.
func (m Mapping) Has(flag string) bool { return slices.Contains(m.Flags, flag) }

// MappingOf returns the area of this process that contains addr. Adjacent
// mappings with equal attributes are one area to the kernel.
func MappingOf(addr uintptr) (Mapping, error) {
	return mappingIn("/proc/self/smaps", addr)
}

func mappingIn(path string, addr uintptr) (Mapping, error) {
	f, err := os.Open(path)
	if err != nil {
		return Mapping{}, fmt.Errorf("read mappings: %w", err)
	}
	defer f.Close()
	var m Mapping
	found := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		key, val, isField := strings.Cut(line, ":")
		if isField && !strings.Contains(key, " ") && !strings.Contains(key, "-") {
			if !found {
				continue
			}
			switch key {
			case "Rss":
				m.RSS, err = kB(val)
			case "AnonHugePages":
				m.AnonHuge, err = kB(val)
			case "Locked":
				m.Locked, err = kB(val)
			case "VmFlags":
				m.Flags = strings.Fields(val)
				return m, nil // the area's last line
			}
			if err != nil {
				return Mapping{}, fmt.Errorf("read mappings: %s: %w", key, err)
			}
			continue
		}
		// a header: "start-end perms offset dev inode [path]"
		if found {
			return m, nil
		}
		rng, _, _ := strings.Cut(line, " ")
		lo, hi, ok := strings.Cut(rng, "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil {
			return Mapping{}, fmt.Errorf("read mappings: unexpected line %q", line)
		}
		if uintptr(start) <= addr && addr < uintptr(end) {
			found, m = true, Mapping{Start: uintptr(start), End: uintptr(end)}
		}
	}
	if err := sc.Err(); err != nil {
		return Mapping{}, fmt.Errorf("read mappings: %w", err)
	}
	if !found {
		return Mapping{}, fmt.Errorf("read mappings: no mapping contains %#x", addr)
	}
	return m, nil
}

func kB(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
	return n << 10, err
}

// THPMode returns the transparent huge page mode in force (always,
// madvise or never) from the sysfs file under root ("/" normally).
func THPMode(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "sys/kernel/mm/transparent_hugepage/enabled"))
	if err != nil {
		return "", fmt.Errorf("transparent huge page mode: %w", err)
	}
	if i := bytes.IndexByte(b, '['); i >= 0 {
		if j := bytes.IndexByte(b[i:], ']'); j > 0 {
			return string(b[i+1 : i+j]), nil
		}
	}
	return "", fmt.Errorf("transparent huge page mode: unexpected %q", bytes.TrimSpace(b))
}
