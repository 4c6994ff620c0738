package hostinfo

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

func TestMemTotal(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"MemTotal:       24594612 kB\nMemFree:  1 kB\n", 24594612 << 10},
		{"MemFree:  1 kB\nMemTotal: 1024 kB", 1 << 20},
		{"MemFree:  1 kB\n", 0},
		{"MemTotal: 12 MB\n", 0},
		{"MemTotal: x kB\n", 0},
		{"MemTotal: -4 kB\n", 0},
	} {
		if got := memTotal(c.in); got != c.want {
			t.Errorf("memTotal(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// Collect reads the machine's memory from root's proc/meminfo.
func TestCollectReadsMemory(t *testing.T) {
	root := t.TempDir()
	testutil.WriteTree(t, root, map[string]string{"proc/meminfo": "MemTotal: 2048 kB\n"})
	if got := Collect(root).MemBytes; got != 2<<20 {
		t.Fatalf("MemBytes = %d, want %d", got, 2<<20)
	}
	if got := Collect(t.TempDir()).MemBytes; got != 0 {
		t.Fatalf("MemBytes without meminfo = %d, want 0", got)
	}
}

// Cores counts the node's online CPUs, not the process's affinity mask:
// the 16 of "0-15" whatever CPUs this test may run on; without the file,
// the CPUs this process may use.
func TestCollectCountsTheNodesCPUs(t *testing.T) {
	root := t.TempDir()
	testutil.WriteTree(t, root, map[string]string{"sys/devices/system/cpu/online": "0-15\n"})
	if got := Collect(root).Cores; got != 16 {
		t.Fatalf("Cores = %d, want the 16 online CPUs", got)
	}
	if got := Collect(t.TempDir()).Cores; got != runtime.NumCPU() {
		t.Fatalf("Cores without the online list = %d, want runtime.NumCPU() %d", got, runtime.NumCPU())
	}
}

// Collect lists the interfaces with a device behind them and the verbs
// devices with their ports, as sysfs under root describes them.
func TestCollectReadsNetworkDevices(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"sys/class/net/eth0/operstate":                   "up\n",
		"sys/class/net/eth0/mtu":                         "9000\n",
		"sys/class/net/eth0/speed":                       "100000\n",
		"sys/class/net/eth1/operstate":                   "down\n",
		"sys/class/net/eth1/mtu":                         "1500\n",
		"sys/class/net/eth1/speed":                       "-1\n", // no link
		"sys/class/net/lo/operstate":                     "unknown\n",
		"sys/class/net/veth0/operstate":                  "up\n",
		"sys/class/infiniband/mlx5_0/fw_ver":             "28.39.1002\n",
		"sys/class/infiniband/mlx5_0/ports/2/state":      "1: DOWN\n",
		"sys/class/infiniband/mlx5_0/ports/1/state":      "4: ACTIVE\n",
		"sys/class/infiniband/mlx5_0/ports/1/rate":       "200 Gb/sec (4X HDR)\n",
		"sys/class/infiniband/mlx5_0/ports/1/link_layer": "InfiniBand\n",
		"sys/class/infiniband/rxe0/parent":               "eth0\n",
		"sys/class/infiniband/rxe0/ports/1/state":        "4: ACTIVE\n",
		"sys/class/infiniband/rxe0/ports/1/link_layer":   "Ethernet\n",
		"sys/devices/pci0000:00/0000:00:03.0/vendor":     "0x15b3\n",
		"sys/bus/pci/drivers/mlx5_core/.keep":            "",
	}
	testutil.WriteTree(t, root, files)
	link := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	link(filepath.Join(root, "sys/devices/pci0000:00/0000:00:03.0"), "sys/class/net/eth0/device")
	link(filepath.Join(root, "sys/bus/pci/drivers/mlx5_core"), "sys/devices/pci0000:00/0000:00:03.0/driver")
	if err := os.MkdirAll(filepath.Join(root, "sys/devices/virtio2"), 0o755); err != nil {
		t.Fatal(err)
	}
	link(filepath.Join(root, "sys/devices/virtio2"), "sys/class/net/eth1/device")

	p := Collect(root)
	wantNICs := []NIC{
		{Name: "eth0", Driver: "mlx5_core", SpeedMbps: 100000, MTU: 9000, State: "up"},
		{Name: "eth1", MTU: 1500, State: "down"},
	}
	if !reflect.DeepEqual(p.NICs, wantNICs) {
		t.Errorf("NICs = %+v\nwant %+v", p.NICs, wantNICs)
	}
	wantRDMA := []RDMADevice{
		{Name: "mlx5_0", Firmware: "28.39.1002", Ports: []RDMAPort{
			{Port: 1, State: "ACTIVE", Rate: "200 Gb/sec (4X HDR)", LinkLayer: "InfiniBand"},
			{Port: 2, State: "DOWN"},
		}},
		{Name: "rxe0", Parent: "eth0", Ports: []RDMAPort{{Port: 1, State: "ACTIVE", LinkLayer: "Ethernet"}}},
	}
	if !reflect.DeepEqual(p.RDMA, wantRDMA) {
		t.Errorf("RDMA = %+v\nwant %+v", p.RDMA, wantRDMA)
	}
}
