package hostinfo

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// Version is gotune's version, set at link time (-X); otherwise the module
// version or VCS revision from the build information.
var Version = ""

// Provenance says where and with what a result was produced.
type Provenance struct {
	Host      string            `json:"host"`
	CPUModel  string            `json:"cpu_model"`
	Cores     int               `json:"cores"`
	NUMANodes int               `json:"numa_nodes"`
	MemBytes  int64             `json:"mem_bytes,omitempty"` // physical memory (MemTotal)
	Kernel    string            `json:"kernel"`
	GoVersion string            `json:"go_version"`
	Gotune    string            `json:"gotune_version"`
	Libraries map[string]string `json:"libraries,omitempty"` // e.g. "openmpi": "4.1.4"
	Time      time.Time         `json:"time"`
	// Ranks says where each rank's message buffers lived, for runs whose
	// ranks had GPUs (Spec.UsesGPU); empty for host-only runs.
	Ranks []RankInfo `json:"ranks,omitempty"`
}

// RankInfo is one rank's buffers and GPU, as the rank found them.
type RankInfo struct {
	Rank int      `json:"rank"`
	Mem  string   `json:"mem"`           // memory kind of its message buffers
	GPU  *GPUInfo `json:"gpu,omitempty"` // the device it bound
}

// GPUInfo identifies a device.
type GPUInfo struct {
	Ordinal  int    `json:"ordinal"`
	Name     string `json:"name"`       // "NVIDIA H200"
	PCIBusID string `json:"pci_bus_id"` // "0000:19:00.0"
}

// GotuneVersion reports the running binary's version.
func GotuneVersion() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "devel-" + s.Value[:12]
			}
		}
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
	}
	return "devel"
}

// Collect reads provenance from the running system; root is where /proc and
// /sys are found ("/" normally, a fixture directory in tests).
func Collect(root string) Provenance {
	p := Provenance{
		Cores:     runtime.NumCPU(),
		GoVersion: runtime.Version(),
		Gotune:    GotuneVersion(),
		Time:      time.Now().UTC().Truncate(time.Second),
	}
	p.Host, _ = os.Hostname()
	if b, err := os.ReadFile(filepath.Join(root, "proc/sys/kernel/osrelease")); err == nil {
		p.Kernel = strings.TrimSpace(string(b))
	}
	if f, err := os.Open(filepath.Join(root, "proc/cpuinfo")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				p.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile(filepath.Join(root, "proc/meminfo")); err == nil {
		p.MemBytes = memTotal(string(b))
	}
	nodes, _ := filepath.Glob(filepath.Join(root, "sys/devices/system/node/node[0-9]*"))
	p.NUMANodes = max(len(nodes), 1)
	return p
}

// memTotal reads MemTotal from /proc/meminfo's text, in bytes; 0 if absent.
func memTotal(meminfo string) int64 {
	for _, line := range strings.Split(meminfo, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != "MemTotal" {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0
		}
		return kb << 10
	}
	return 0
}
