package gpu

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

// fake is a Source made of fixed facts.
type fake struct {
	devs  []DeviceInfo
	links map[int][]NVLink    // per GPU, its active NVLinks
	pairs map[[2]int]LinkInfo // i < j
	err   map[string]error    // "count", "device", "nvlinks", "link": fail that call
	calls map[string]int      // how often each was asked
}

func (f *fake) call(name string) error {
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[name]++
	return f.err[name]
}

func (f *fake) Count() (int, error) {
	if err := f.call("count"); err != nil {
		return 0, err
	}
	return len(f.devs), nil
}

func (f *fake) Device(i int) (DeviceInfo, error) {
	if err := f.call("device"); err != nil {
		return DeviceInfo{}, err
	}
	return f.devs[i], nil
}

func (f *fake) NVLinks(i int) ([]NVLink, error) {
	if err := f.call("nvlinks"); err != nil {
		return nil, err
	}
	return f.links[i], nil
}

func (f *fake) Link(i, j int) (LinkInfo, error) {
	if err := f.call("link"); err != nil {
		return LinkInfo{}, err
	}
	if i >= j {
		return LinkInfo{}, fmt.Errorf("fake: Link(%d, %d): want i < j", i, j)
	}
	return f.pairs[[2]int{i, j}], nil
}

// gpuDev is a GPU of the fakes: "GPU-<i>" on bus 0000:<bus>:00.0, MIG
// disabled, with the affinity NVML would report.
func gpuDev(i int, bus string, cpus CPUList, node int) DeviceInfo {
	return DeviceInfo{Index: i, Name: "NVIDIA H200", UUID: fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i),
		BusID: "0000:" + bus + ":00.0", MIG: MIGDisabled, CPUs: cpus, NUMANode: node}
}

// direct returns n links from a GPU to the GPU on bus.
func direct(first, n int, bus string) []NVLink {
	var l []NVLink
	for k := range n {
		l = append(l, NVLink{Link: first + k, Remote: "0000:" + bus + ":00.0", Type: RemoteGPU})
	}
	return l
}

// switched returns n links to NVSwitches.
func switched(n int) []NVLink {
	var l []NVLink
	for k := range n {
		l = append(l, NVLink{Link: k, Remote: fmt.Sprintf("0000:%02x:00.0", 0xc0+k%4), Type: RemoteSwitch})
	}
	return l
}

var (
	allOK = P2P{Read: P2POK, Write: P2POK, NVLink: P2POK}
	pcie  = P2P{Read: P2POK, Write: P2POK, NVLink: P2PNotSupported}
	noP2P = P2P{Read: P2PChipsetNotSupported, Write: P2PChipsetNotSupported, NVLink: P2PNotSupported}
)

// fourGPUs is a two-socket box: GPUs 0,1 on socket 0 behind one PCIe switch,
// 2,3 on socket 1 behind host bridges; 0-1 joined by 4 NVLinks, 2-3 by 2, and
// GPU 3 in MIG mode.
func fourGPUs() *fake {
	d3 := gpuDev(3, "b1", nil, -1)
	d3.MIG = MIGEnabled
	return &fake{
		devs: []DeviceInfo{
			gpuDev(0, "18", nil, -1),
			gpuDev(1, "2a", nil, -1),
			gpuDev(2, "9a", CPUList{1, 3, 5, 7}, 1), // no sysfs entry: NVML's answer stands
			d3,
		},
		links: map[int][]NVLink{
			0: direct(0, 4, "2a"),
			1: direct(0, 4, "18"),
			2: direct(0, 2, "b1"),
			3: direct(0, 2, "9a"),
		},
		pairs: map[[2]int]LinkInfo{
			{0, 1}: {Ancestor: LevelSingle, P2P: allOK},
			{0, 2}: {Ancestor: LevelSystem, P2P: noP2P},
			{0, 3}: {Ancestor: LevelSystem, P2P: noP2P},
			{1, 2}: {Ancestor: LevelSystem, P2P: noP2P},
			{1, 3}: {Ancestor: LevelSystem, P2P: noP2P},
			{2, 3}: {Ancestor: LevelNode, P2P: allOK},
		},
	}
}

// sysfsTree writes files (path relative to bus/pci/devices -> content) under
// a fresh root and returns it. The tree is built here rather than kept under
// testdata/ because PCI bus ids contain ':', which Go module zips reject.
func sysfsTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	testutil.WriteTree(t, filepath.Join(root, "bus", "pci", "devices"), files)
	return root
}

// fourGPUsSysfs is the sysfs of fourGPUs: GPUs 0,1 on node 0 (CPUs 0-15 and
// their SMT siblings 32-47), GPU 3 on node 1; GPU 2 has no entry.
func fourGPUsSysfs(t *testing.T) string {
	return sysfsTree(t, map[string]string{
		"0000:18:00.0/numa_node":     "0\n",
		"0000:18:00.0/local_cpulist": "0-15,32-47\n",
		"0000:2a:00.0/numa_node":     "0\n",
		"0000:2a:00.0/local_cpulist": "0-15,32-47\n",
		"0000:b1:00.0/numa_node":     "1\n",
		"0000:b1:00.0/local_cpulist": "16-31,48-63\n",
	})
}
