package gpu

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gotune/gotune/internal/sys"
)

// CPUList is a sorted set of CPU numbers. As text it is the kernel's cpu-list
// syntax, "0-15,32-47", which is how it appears in JSON.
type CPUList []int

// ParseCPUList parses the kernel's cpu-list syntax ("0-15,32-47", "3", or
// empty) into sorted, distinct CPU numbers.
func ParseCPUList(s string) (CPUList, error) {
	l, err := sys.ParseCPUList(s)
	return CPUList(l), err
}

// String writes the list in cpu-list syntax with the longest ranges.
func (l CPUList) String() string {
	var b strings.Builder
	for i := 0; i < len(l); {
		j := i
		for j+1 < len(l) && l[j+1] == l[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(l[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(l[j]))
		}
		i = j + 1
	}
	return b.String()
}

// MarshalText writes cpu-list syntax.
func (l CPUList) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText reads cpu-list syntax.
func (l *CPUList) UnmarshalText(b []byte) error {
	c, err := ParseCPUList(string(b))
	if err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	*l = c
	return nil
}

// NormalizeBusID returns a PCI bus id as sysfs names it, lower-case
// "dddd:bb:dd.f", from NVML's forms ("00000000:18:00.0", upper-case hex) or
// from a bus id without a domain ("18:00.0", domain 0).
func NormalizeBusID(s string) (string, error) {
	bad := func() (string, error) { return "", fmt.Errorf("gpu: bad PCI bus id %q", s) }
	t := strings.TrimRight(strings.TrimSpace(s), "\x00")
	parts := strings.Split(t, ":")
	if len(parts) == 2 {
		parts = append([]string{"0"}, parts...)
	}
	if len(parts) != 3 {
		return bad()
	}
	dev, fn, ok := strings.Cut(parts[2], ".")
	if !ok {
		return bad()
	}
	var v [4]uint64
	for k, f := range []struct {
		s    string
		bits int
	}{{parts[0], 32}, {parts[1], 8}, {dev, 5}, {fn, 3}} {
		n, err := strconv.ParseUint(f.s, 16, f.bits)
		if err != nil || f.s == "" {
			return bad()
		}
		v[k] = n
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", v[0], v[1], v[2], v[3]), nil
}

// affinity is what sysfs says about the CPUs and NUMA node near a PCI device.
type affinity struct {
	cpus  CPUList
	node  int
	found bool // the device has a sysfs directory with either file
}

// sysfsAffinity reads <root>/bus/pci/devices/<busID>/{local_cpulist,numa_node}.
// A device without a directory there (a container without /sys, a VM that
// hides it) is not an error: found is false. A file that exists but cannot
// be read or parsed is, and the error names the file.
func sysfsAffinity(root, busID string) (affinity, error) {
	a := affinity{node: -1}
	dir := filepath.Join(root, "bus", "pci", "devices", busID)
	path := filepath.Join(dir, "numa_node")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || n < -1 {
			return a, fmt.Errorf("gpu: %s: bad NUMA node %q", path, strings.TrimSpace(string(b)))
		}
		a.node, a.found = n, true
	case !errors.Is(err, fs.ErrNotExist):
		return a, fmt.Errorf("gpu: %w", err)
	}
	path = filepath.Join(dir, "local_cpulist")
	b, err = os.ReadFile(path)
	switch {
	case err == nil:
		cpus, err := ParseCPUList(string(b))
		if err != nil {
			return a, fmt.Errorf("gpu: %s: %w", path, err)
		}
		a.cpus, a.found = cpus, true
	case !errors.Is(err, fs.ErrNotExist):
		return a, fmt.Errorf("gpu: %w", err)
	}
	return a, nil
}

// onlyNode returns the host's NUMA node when <root>/devices/system/node/online
// lists exactly one, else -1.
func onlyNode(root string) (int, error) {
	path := filepath.Join(root, "devices", "system", "node", "online")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return -1, fmt.Errorf("gpu: %w", err)
	}
	nodes, err := ParseCPUList(string(b)) // the same list syntax
	if err != nil {
		return -1, fmt.Errorf("gpu: %s: %w", path, err)
	}
	if len(nodes) != 1 {
		return -1, nil
	}
	return nodes[0], nil
}
