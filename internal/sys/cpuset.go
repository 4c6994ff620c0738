package sys

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ParseCPUList parses the kernel's cpu-list syntax ("0-15,32-47", "3", or
// empty) into sorted, distinct CPU numbers.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var cpus []int
	for _, item := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(item), "-")
		first, err := cpuNumber(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		last := first
		if isRange {
			if last, err = cpuNumber(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
			if last < first {
				return nil, fmt.Errorf("cpu list %q: range %s runs backwards", s, item)
			}
		}
		for c := first; c <= last; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

// maxCPU bounds CPU numbers, so that a corrupt list cannot allocate without end.
const maxCPU = 1 << 16

func cpuNumber(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= maxCPU || strings.HasPrefix(s, "+") {
		return 0, fmt.Errorf("bad CPU number %q", s)
	}
	return n, nil
}

// CpusetCPUs lists the CPUs this process's cpuset lets it run on: what a
// process may pin itself to, however narrow its affinity mask (mpirun's
// binding narrows the mask only; Slurm's cgroup narrows the cpuset). root
// is where /proc and /sys are found ("/" normally). It reads the cgroup v2
// cpuset.cpus.effective of the process's cgroup or its nearest ancestor
// that has one, or v1's cpuset.effective_cpus, else the online CPUs.
func CpusetCPUs(root string) ([]int, error) {
	f, err := os.Open(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return OnlineCPUs(root)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "0::/path" (v2), "4:cpuset:/path" (v1)
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, file = filepath.Join(root, "sys/fs/cgroup"), "cpuset.cpus.effective"
		case slices.Contains(strings.Split(parts[1], ","), "cpuset"):
			dir, file = filepath.Join(root, "sys/fs/cgroup/cpuset"), "cpuset.effective_cpus"
		default:
			continue
		}
		for p := path.Clean("/" + parts[2]); ; p = path.Dir(p) {
			if b, err := os.ReadFile(filepath.Join(dir, p, file)); err == nil {
				cpus, err := ParseCPUList(string(b))
				if err != nil {
					return nil, fmt.Errorf("%s: %w", filepath.Join(dir, p, file), err)
				}
				if len(cpus) > 0 {
					return cpus, nil
				}
			}
			if p == "/" {
				break
			}
		}
	}
	return OnlineCPUs(root)
}

// OnlineCPUs lists the CPUs the kernel has online (root: where /sys is).
func OnlineCPUs(root string) ([]int, error) {
	name := filepath.Join(root, "sys/devices/system/cpu/online")
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("read online cpus: %w", err)
	}
	cpus, err := ParseCPUList(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return cpus, nil
}
