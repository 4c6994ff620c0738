package hostinfo

import (
	"bufio"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gotune/gotune/internal/sys"
)

// Version is gotune's version, set at link time (-X); otherwise the module
// version or VCS revision from the build information.
var Version = ""

// Provenance says where and with what a result was produced.
type Provenance struct {
	Host      string            `json:"host"`
	CPUModel  string            `json:"cpu_model"`
	Cores     int               `json:"cores"` // online CPUs of the node (nodeCores)
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
	// NICs are the network interfaces backed by a device (no loopback,
	// bridges or veths); RDMA the verbs devices, Soft-RoCE's included.
	NICs []NIC        `json:"nics,omitempty"`
	RDMA []RDMADevice `json:"rdma,omitempty"`
	// GPUs and how each pair is connected, where a run looked (a sweep
	// does, through NVML; Collect does not, to stay cheap).
	GPUs *GPUs `json:"gpus,omitempty"`
}

// NIC is one network interface as sysfs describes it.
type NIC struct {
	Name      string `json:"name"`
	Driver    string `json:"driver,omitempty"`     // the device's driver: "mlx5_core", "virtio_net"
	SpeedMbps int    `json:"speed_mbps,omitempty"` // 0: not reported (link down, virtual)
	MTU       int    `json:"mtu,omitempty"`
	State     string `json:"state,omitempty"` // operstate: "up", "down"
}

// RDMADevice is one verbs device and its ports.
type RDMADevice struct {
	Name     string     `json:"name"`
	Firmware string     `json:"firmware,omitempty"`
	Parent   string     `json:"parent,omitempty"` // Soft-RoCE's network interface
	Ports    []RDMAPort `json:"ports,omitempty"`
}

// RDMAPort is one port of a verbs device, in sysfs's words.
type RDMAPort struct {
	Port      int    `json:"port"`
	State     string `json:"state,omitempty"`      // "ACTIVE"
	Rate      string `json:"rate,omitempty"`       // "200 Gb/sec (4X HDR)"
	LinkLayer string `json:"link_layer,omitempty"` // "InfiniBand", "Ethernet"
}

// GPUs is a node's GPUs and the connection of every pair.
type GPUs struct {
	Driver  string    `json:"driver,omitempty"` // the NVIDIA driver's version
	CUDA    string    `json:"cuda,omitempty"`   // the CUDA version of its driver API
	Devices []GPU     `json:"devices"`
	Links   []GPULink `json:"links,omitempty"`
}

// GPU is one device of a node.
type GPU struct {
	Index    int    `json:"index"`
	Name     string `json:"name"`
	BusID    string `json:"bus_id"`
	NUMANode int    `json:"numa_node"` // -1: unknown
	NVLinks  int    `json:"nvlinks"`   // active NVLinks, to GPUs or NVSwitches
}

// GPULink is how two GPUs reach each other: "NV18" (18 NVLinks), else the
// PCIe/SMP path as nvidia-smi topo -m names it (PIX … SYS); P2P is
// nvidia-smi topo -p2p's read status ("OK", "NS", …).
type GPULink struct {
	GPUs [2]int `json:"gpus"`
	Path string `json:"path"`
	P2P  string `json:"p2p,omitempty"`
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

// nodeCores is the number of CPUs the kernel has online, or, where that
// cannot be read, the ones this process may use. Not the affinity mask: a
// profile's scope names a kind of node, whatever CPUs one job was given
// (a sweep under taskset -c 1-15 on a 16-CPU node made a profile no
// full-node job could load).
func nodeCores(root string) int {
	if cpus, err := sys.OnlineCPUs(root); err == nil && len(cpus) > 0 {
		return len(cpus)
	}
	return runtime.NumCPU()
}

// Collect reads provenance from the running system; root is where /proc and
// /sys are found ("/" normally, a fixture directory in tests).
func Collect(root string) Provenance {
	p := Provenance{
		Cores:     nodeCores(root),
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
	p.NICs = nics(filepath.Join(root, "sys/class/net"))
	p.RDMA = rdmaDevices(filepath.Join(root, "sys/class/infiniband"))
	return p
}

// nics lists the interfaces under dir (sysfs's class/net) that have a
// device behind them, by name.
func nics(dir string) []NIC {
	return entries(dir, func(name, base string) (NIC, bool) {
		if _, err := os.Stat(filepath.Join(base, "device")); err != nil {
			return NIC{}, false // loopback, bridge, veth, tunnel: no hardware behind it
		}
		n := NIC{Name: name, State: readLine(base, "operstate"), MTU: readInt(base, "mtu")}
		if drv, err := os.Readlink(filepath.Join(base, "device/driver")); err == nil {
			n.Driver = filepath.Base(drv)
		}
		n.SpeedMbps = max(readInt(base, "speed"), 0) // -1 where the link reports none
		return n, true
	})
}

// rdmaDevices lists the verbs devices under dir (sysfs's class/infiniband)
// with their ports, by name and port number.
func rdmaDevices(dir string) []RDMADevice {
	return entries(dir, func(name, base string) (RDMADevice, bool) {
		d := RDMADevice{Name: name, Firmware: readLine(base, "fw_ver"), Parent: readLine(base, "parent")}
		d.Ports = entries(filepath.Join(base, "ports"), func(name, pb string) (RDMAPort, bool) {
			num, err := strconv.Atoi(name)
			if err != nil {
				return RDMAPort{}, false
			}
			state := readLine(pb, "state") // "4: ACTIVE"
			if _, name, ok := strings.Cut(state, ": "); ok {
				state = name
			}
			return RDMAPort{Port: num, State: state, Rate: readLine(pb, "rate"), LinkLayer: readLine(pb, "link_layer")}, true
		})
		slices.SortFunc(d.Ports, func(a, b RDMAPort) int { return a.Port - b.Port })
		return d, true
	})
}

// entries calls f with the name and path of each entry of dir, in name
// order, and lists what f keeps; an unreadable dir lists nothing.
func entries[T any](dir string, f func(name, path string) (T, bool)) []T {
	list, _ := os.ReadDir(dir)
	var out []T
	for _, e := range list {
		if v, ok := f(e.Name(), filepath.Join(dir, e.Name())); ok {
			out = append(out, v)
		}
	}
	return out
}

// readLine is the first line of dir/name, trimmed; "" if unreadable.
func readLine(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}

// readInt is dir/name as an integer; 0 if unreadable or not a number.
func readInt(dir, name string) int {
	v, err := strconv.Atoi(readLine(dir, name))
	if err != nil {
		return 0
	}
	return v
}

// MemBytes is this node's physical memory (MemTotal); 0 if unknown.
func MemBytes() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return memTotal(string(b))
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
