package gpu

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/gotune/gotune/internal/errwriter"
)

// Topology is a snapshot of a node's GPUs and how they are connected.
type Topology struct {
	Devices []Device `json:"devices"`
	// Pairs holds every pair i < j, ordered by i then j.
	Pairs []Pair `json:"pairs"`
}

// Device is one GPU with the affinity gotune settled on.
type Device struct {
	DeviceInfo
	// AffinityFrom says where CPUs came from: "sysfs", "nvml" (the source's
	// own answer) or "" (nowhere: unknown). NUMANode is sysfs's where it names
	// a node, else the source's, else the host's only NUMA node, else -1.
	AffinityFrom string `json:"affinity_from"`
	NVLinks      int    `json:"nvlinks"` // active NVLinks, to GPUs or NVSwitches
}

// Pair is how two GPUs are connected.
type Pair struct {
	GPUs [2]int `json:"gpus"` // i < j
	LinkInfo
	// NVLinks is how many active NVLinks join the pair: direct links, or,
	// through NVSwitches, the fewer of the two GPUs' switch links.
	NVLinks int `json:"nvlinks"`
}

// Label is the pair's cell in the nvidia-smi topo -m matrix: NV# when NVLink
// joins them, else the common ancestor's name.
func (p Pair) Label() string {
	if p.NVLinks > 0 {
		return "NV" + strconv.Itoa(p.NVLinks)
	}
	return p.Ancestor.String()
}

// Option adjusts Discover.
type Option func(*options)

type options struct {
	sysfs string
}

// WithSysfs reads PCI affinity from root/bus/pci/devices instead of
// /sys/bus/pci/devices (tests point it at a testdata tree).
func WithSysfs(root string) Option { return func(o *options) { o.sysfs = root } }

// Discover asks src about every GPU and pair and settles each GPU's affinity:
// sysfs where it knows the device, else the source's answer (see Device).
func Discover(src Source, opts ...Option) (*Topology, error) {
	o := options{sysfs: "/sys"}
	for _, opt := range opts {
		opt(&o)
	}
	n, err := src.Count()
	if err != nil {
		return nil, err
	}
	t := &Topology{Devices: make([]Device, n)}
	links := make([][]NVLink, n)
	byBus := make(map[string]int, n)
	for i := range n {
		info, err := src.Device(i)
		if err != nil {
			return nil, fmt.Errorf("gpu %d: %w", i, err)
		}
		info.Index = i
		d := Device{DeviceInfo: info}
		if len(d.CPUs) > 0 || d.NUMANode >= 0 {
			d.AffinityFrom = "nvml"
		}
		if d.BusID != "" {
			byBus[d.BusID] = i
			a, err := sysfsAffinity(o.sysfs, d.BusID)
			if err != nil {
				return nil, fmt.Errorf("gpu %d: %w", i, err)
			}
			if a.found {
				d.CPUs, d.AffinityFrom = a.cpus, "sysfs"
				if a.node >= 0 {
					d.NUMANode = a.node
				}
			}
		}
		if d.NUMANode < 0 {
			// sysfs says -1 where the firmware gives no node (VMs, one-node
			// hosts): the GPU is then local to the host's only node, if it has
			// one only. nvidia-smi topo -m says the same.
			if d.NUMANode, err = onlyNode(o.sysfs); err != nil {
				return nil, fmt.Errorf("gpu %d: %w", i, err)
			}
		}
		if links[i], err = src.NVLinks(i); err != nil {
			return nil, fmt.Errorf("gpu %d: NVLinks: %w", i, err)
		}
		d.NVLinks = len(links[i])
		t.Devices[i] = d
	}
	// direct[i][j]: links of i that end at GPU j; switched[i]: links of i
	// that end at an NVSwitch (or at something that is none of our GPUs and
	// not known to be a CPU).
	direct := make([][]int, n)
	switched := make([]int, n)
	for i := range n {
		direct[i] = make([]int, n)
		for _, l := range links[i] {
			j, isGPU := byBus[l.Remote]
			switch {
			case l.Type == RemoteSwitch:
				switched[i]++
			case isGPU && (l.Type == RemoteGPU || l.Type == RemoteUnknown) && j != i:
				direct[i][j]++
			case l.Type == RemoteUnknown && !isGPU:
				switched[i]++
			}
		}
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			li, err := src.Link(i, j)
			if err != nil {
				return nil, fmt.Errorf("gpus %d and %d: %w", i, j, err)
			}
			p := Pair{GPUs: [2]int{i, j}, LinkInfo: li, NVLinks: max(direct[i][j], direct[j][i])}
			if p.NVLinks == 0 && li.P2P.NVLink == P2POK {
				p.NVLinks = min(switched[i], switched[j])
			}
			t.Pairs = append(t.Pairs, p)
		}
	}
	return t, nil
}

// Pair returns how GPUs i and j (in either order, i != j) are connected.
func (t *Topology) Pair(i, j int) (Pair, bool) {
	n := len(t.Devices)
	if i == j || i < 0 || j < 0 || i >= n || j >= n {
		return Pair{}, false
	}
	if i > j {
		i, j = j, i
	}
	// Pairs (0,1..n-1), (1,2..n-1), ...: row i starts after i rows of
	// n-1, n-2, ... pairs.
	if k := i*(2*n-i-1)/2 + (j - i - 1); k < len(t.Pairs) && t.Pairs[k].GPUs == [2]int{i, j} {
		return t.Pairs[k], true
	}
	for _, p := range t.Pairs { // not in Discover's order (hand-made, or read back)
		if p.GPUs == [2]int{i, j} {
			return p, true
		}
	}
	return Pair{}, false
}

// BestPair returns the pair to measure GPU-to-GPU transfers on: the most
// NVLinks, then the nearest common ancestor, then the lowest indices. ok is
// false with fewer than two GPUs.
func (t *Topology) BestPair() (i, j int, ok bool) {
	var best *Pair
	for k := range t.Pairs {
		p := &t.Pairs[k]
		if best == nil || p.NVLinks > best.NVLinks ||
			p.NVLinks == best.NVLinks && p.Ancestor.rank() < best.Ancestor.rank() {
			best = p
		}
	}
	if best == nil {
		return 0, 0, false
	}
	return best.GPUs[0], best.GPUs[1], true
}

// CPUsNear returns the CPUs local to GPU i, sorted, to pin a rank that drives
// it; nil when unknown or i is out of range. Callers intersect it with the
// CPUs the process may use (sys.AllowedCPUs).
func (t *Topology) CPUsNear(i int) []int {
	if i < 0 || i >= len(t.Devices) {
		return nil
	}
	return slices.Clone(t.Devices[i].CPUs)
}

// MarshalJSON adds the chosen best pair to the devices and pairs.
func (t *Topology) MarshalJSON() ([]byte, error) {
	type plain Topology // without this method
	v := struct {
		*plain
		BestPair []int `json:"best_pair,omitempty"`
	}{plain: (*plain)(t)}
	if i, j, ok := t.BestPair(); ok {
		v.BestPair = []int{i, j}
	}
	return json.Marshal(v)
}

// Format writes the connection matrix the way nvidia-smi topo -m does (X on
// the diagonal, NV# or the PCIe/SMP path elsewhere, then each GPU's CPU
// affinity and NUMA node), a legend, and a line per GPU.
func (t *Topology) Format(w io.Writer) error {
	n := len(t.Devices)
	if n == 0 {
		_, err := fmt.Fprintln(w, "no GPUs")
		return err
	}
	tab := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off))
	header := []string{""}
	for i := range n {
		header = append(header, "GPU"+strconv.Itoa(i))
	}
	tab.Header(append(header, "CPU Affinity", "NUMA node"))
	for i, d := range t.Devices {
		row := []string{"GPU" + strconv.Itoa(i)}
		for j := range n {
			cell := "X"
			if p, ok := t.Pair(i, j); ok {
				cell = p.Label()
			}
			row = append(row, cell)
		}
		cpus, node := d.CPUs.String(), "N/A"
		if cpus == "" {
			cpus = "N/A"
		}
		if d.NUMANode >= 0 {
			node = strconv.Itoa(d.NUMANode)
		}
		if err := tab.Append(append(row, cpus, node)); err != nil {
			return fmt.Errorf("gpu: topology table: %w", err)
		}
	}
	if err := tab.Render(); err != nil {
		return fmt.Errorf("gpu: topology table: %w", err)
	}
	ew := errwriter.New(w)
	ew.Printf("Legend: X = self, NV# = # NVLinks (direct or through NVSwitches), PIX = at most one PCIe switch,\n" +
		"  PXB = several PCIe switches, PHB = a PCIe host bridge, NODE = host bridges within a NUMA node,\n" +
		"  SYS = across NUMA nodes (SMP interconnect), INT = same board, N/A = unknown\n")
	for _, d := range t.Devices {
		ew.Printf("GPU%d: %s, bus %s, MIG %s, %d active NVLink%s", d.Index, d.Name, d.BusID, d.MIG, d.NVLinks, plural(d.NVLinks))
		if d.UUID != "" {
			ew.Printf(", %s", d.UUID)
		}
		ew.Printf("\n")
	}
	if i, j, ok := t.BestPair(); ok {
		p, _ := t.Pair(i, j)
		ew.Printf("Best pair: GPU%d-GPU%d (%s; P2P read %s, write %s, NVLink %s)\n", i, j, p.Label(), p.P2P.Read, p.P2P.Write, p.P2P.NVLink)
	}
	return ew.Err()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
