package gpu

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

// -update rewrites the golden files under testdata (testutil.GoldenFile).
var _ = flag.Bool("update", false, "rewrite the golden files under testdata")

func discover(t *testing.T, src Source, sysfs string) *Topology {
	t.Helper()
	topo, err := Discover(src, WithSysfs(sysfs))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestFormatMatrix(t *testing.T) {
	cases := []struct {
		name  string
		src   *fake
		sysfs func(*testing.T) string
	}{
		{"four", fourGPUs(), fourGPUsSysfs},
		{"nvswitch", &fake{
			devs:  []DeviceInfo{gpuDev(0, "18", nil, -1), gpuDev(1, "2a", nil, -1)},
			links: map[int][]NVLink{0: switched(18), 1: switched(18)},
			pairs: map[[2]int]LinkInfo{{0, 1}: {Ancestor: LevelSystem, P2P: allOK}},
		}, func(t *testing.T) string {
			return sysfsTree(t, map[string]string{
				"0000:18:00.0/numa_node": "-1\n", "0000:18:00.0/local_cpulist": "0-15\n",
				"0000:2a:00.0/numa_node": "-1\n", "0000:2a:00.0/local_cpulist": "0-15\n",
			})
		}},
		{"one", &fake{devs: []DeviceInfo{gpuDev(0, "18", CPUList{0, 1, 2, 3}, 0)}}, func(t *testing.T) string { return t.TempDir() }},
		{"none", &fake{}, func(t *testing.T) string { return t.TempDir() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := discover(t, c.src, c.sysfs(t)).Format(&b); err != nil {
				t.Fatal(err)
			}
			testutil.GoldenFile(t, "topo-"+c.name+".golden", b.Bytes())
		})
	}
}

func TestDiscover(t *testing.T) {
	src := fourGPUs()
	topo := discover(t, src, fourGPUsSysfs(t))
	if src.calls["link"] != 6 {
		t.Errorf("%d Link calls for 4 GPUs, want 6 (i < j only)", src.calls["link"])
	}
	for _, c := range []struct {
		gpu     int
		cpus    string
		node    int
		from    string
		nvlinks int
	}{
		{0, "0-15,32-47", 0, "sysfs", 4},
		{1, "0-15,32-47", 0, "sysfs", 4},
		{2, "1,3,5,7", 1, "nvml", 2},
		{3, "16-31,48-63", 1, "sysfs", 2},
	} {
		d := topo.Devices[c.gpu]
		if d.CPUs.String() != c.cpus || d.NUMANode != c.node || d.AffinityFrom != c.from || d.NVLinks != c.nvlinks {
			t.Errorf("GPU%d: cpus %q node %d from %q nvlinks %d, want %q %d %q %d",
				c.gpu, d.CPUs, d.NUMANode, d.AffinityFrom, d.NVLinks, c.cpus, c.node, c.from, c.nvlinks)
		}
	}
	for _, c := range []struct {
		i, j  int
		label string
	}{{0, 1, "NV4"}, {1, 0, "NV4"}, {2, 3, "NV2"}, {0, 2, "SYS"}, {3, 1, "SYS"}} {
		p, ok := topo.Pair(c.i, c.j)
		if !ok || p.Label() != c.label {
			t.Errorf("Pair(%d, %d) = %v %v, want %s", c.i, c.j, p, ok, c.label)
		}
	}
	for _, bad := range [][2]int{{0, 0}, {-1, 2}, {1, 4}} {
		if _, ok := topo.Pair(bad[0], bad[1]); ok {
			t.Errorf("Pair(%d, %d): ok, want no such pair", bad[0], bad[1])
		}
	}
	if got := topo.CPUsNear(3); !slices.Equal(got, []int{16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31,
		48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63}) {
		t.Errorf("CPUsNear(3) = %v", got)
	}
	got := topo.CPUsNear(0)
	got[0] = 99 // a copy: the topology is not changed through it
	if topo.CPUsNear(0)[0] != 0 || topo.CPUsNear(4) != nil || topo.CPUsNear(-1) != nil {
		t.Errorf("CPUsNear shares its slice or answers for a GPU that does not exist")
	}
}

func TestDiscoverErrors(t *testing.T) {
	boom := errors.New("boom")
	for _, call := range []string{"count", "device", "nvlinks", "link"} {
		src := fourGPUs()
		src.err = map[string]error{call: boom}
		if _, err := Discover(src, WithSysfs(t.TempDir())); !errors.Is(err, boom) {
			t.Errorf("%s fails: Discover error %v, want it wrapped", call, err)
		}
	}
	// A sysfs file that is there but wrong is an error naming it.
	for _, c := range []struct{ file, content string }{
		{"numa_node", "zero\n"},
		{"numa_node", "-2\n"},
		{"local_cpulist", "0-15,x\n"},
		{"local_cpulist", "15-0\n"},
	} {
		name := "0000:18:00.0/" + c.file
		root := sysfsTree(t, map[string]string{name: c.content})
		_, err := Discover(fourGPUs(), WithSysfs(root))
		want := filepath.Join(root, "bus", "pci", "devices", name)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "gpu 0") {
			t.Errorf("%s = %q: error %v, want one naming %s and gpu 0", c.file, c.content, err, want)
		}
	}
}

// NUMA node: sysfs's where it names one; where it says -1 (VMs), the source's
// (NVML's memory affinity), else the host's only node, as nvidia-smi has it.
func TestNUMAFallback(t *testing.T) {
	for _, c := range []struct {
		name, sysfsNode string // "" for no sysfs entry
		srcNode         int
		online          string // devices/system/node/online; "" for none
		want            int
	}{
		{"sysfs names it", "1", 0, "0-1", 1},
		{"sysfs -1: the source's", "-1", 0, "0-1", 0},
		{"sysfs -1: the only node", "-1", -1, "0\n", 0},
		{"sysfs -1: several nodes", "-1", -1, "0-1\n", -1},
		{"sysfs -1: no node list", "-1", -1, "", -1},
		{"no sysfs entry: the only node", "", -1, "3", 3},
	} {
		files := map[string]string{}
		if c.sysfsNode != "" {
			files["0000:18:00.0/numa_node"] = c.sysfsNode + "\n"
		}
		root := sysfsTree(t, files)
		if c.online != "" {
			testutil.WriteTree(t, root, map[string]string{"devices/system/node/online": c.online})
		}
		src := &fake{devs: []DeviceInfo{gpuDev(0, "18", nil, c.srcNode)}}
		if got := discover(t, src, root).Devices[0].NUMANode; got != c.want {
			t.Errorf("%s: NUMA node %d, want %d", c.name, got, c.want)
		}
	}
	root := sysfsTree(t, map[string]string{"0000:18:00.0/numa_node": "-1\n"})
	online := filepath.Join(root, "devices", "system", "node", "online")
	testutil.WriteTree(t, root, map[string]string{"devices/system/node/online": "zero\n"})
	_, err := Discover(&fake{devs: []DeviceInfo{gpuDev(0, "18", nil, -1)}}, WithSysfs(root))
	if err == nil || !strings.Contains(err.Error(), online) {
		t.Errorf("bad node list: error %v, want one naming %s", err, online)
	}
}

// Links to NVSwitches count for a pair only when NVML says P2P over NVLink
// works between them; the pair gets the fewer of the two GPUs' switch links.
func TestNVSwitchLinks(t *testing.T) {
	for _, c := range []struct {
		name   string
		l0, l1 int
		p2p    P2P
		want   string
	}{
		{"fabric", 18, 18, allOK, "NV18"},
		{"uneven", 18, 12, allOK, "NV12"},
		{"other partition", 18, 18, pcie, "PHB"},
		{"one without", 18, 0, allOK, "PHB"},
	} {
		src := &fake{
			devs:  []DeviceInfo{gpuDev(0, "18", nil, -1), gpuDev(1, "2a", nil, -1)},
			links: map[int][]NVLink{0: switched(c.l0), 1: switched(c.l1)},
			pairs: map[[2]int]LinkInfo{{0, 1}: {Ancestor: LevelHostBridge, P2P: c.p2p}},
		}
		p, _ := discover(t, src, t.TempDir()).Pair(0, 1)
		if p.Label() != c.want {
			t.Errorf("%s: %s, want %s", c.name, p.Label(), c.want)
		}
	}
	// A far end of unknown type that is none of our GPUs is taken for a switch;
	// one that is our GPU, for a direct link.
	src := &fake{
		devs: []DeviceInfo{gpuDev(0, "18", nil, -1), gpuDev(1, "2a", nil, -1), gpuDev(2, "3c", nil, -1)},
		links: map[int][]NVLink{
			0: {{Link: 0, Remote: "0000:2a:00.0"}, {Link: 1, Remote: "0000:2a:00.0"}, {Link: 2, Remote: "0000:ff:00.0"}},
			1: {{Link: 0, Remote: "0000:18:00.0"}, {Link: 1, Remote: "0000:18:00.0"}},
			2: {{Link: 0, Remote: "0000:fe:00.0"}},
		},
		pairs: map[[2]int]LinkInfo{
			{0, 1}: {Ancestor: LevelSystem, P2P: allOK},
			{0, 2}: {Ancestor: LevelSystem, P2P: allOK},
			{1, 2}: {Ancestor: LevelSystem, P2P: allOK},
		},
	}
	topo := discover(t, src, t.TempDir())
	for _, c := range []struct {
		i, j int
		want string
	}{{0, 1, "NV2"}, {0, 2, "NV1"}, {1, 2, "SYS"}} {
		if p, _ := topo.Pair(c.i, c.j); p.Label() != c.want {
			t.Errorf("unknown far ends: GPU%d-GPU%d %s, want %s", c.i, c.j, p.Label(), c.want)
		}
	}
}

func TestBestPair(t *testing.T) {
	pair := func(i, j, nv int, l Level) Pair {
		return Pair{GPUs: [2]int{i, j}, NVLinks: nv, LinkInfo: LinkInfo{Ancestor: l}}
	}
	topo := func(n int, pairs ...Pair) *Topology {
		t := &Topology{Devices: make([]Device, n)}
		for i := range n {
			for j := i + 1; j < n; j++ {
				p := pair(i, j, 0, LevelSystem)
				for _, q := range pairs {
					if q.GPUs == p.GPUs {
						p = q
					}
				}
				t.Pairs = append(t.Pairs, p)
			}
		}
		return t
	}
	cases := []struct {
		name string
		topo *Topology
		i, j int
		ok   bool
	}{
		{"NVLink beats PCIe", topo(3, pair(0, 1, 0, LevelSingle), pair(1, 2, 2, LevelSystem)), 1, 2, true},
		{"more NVLinks", topo(4, pair(0, 1, 4, LevelSingle), pair(2, 3, 12, LevelSystem)), 2, 3, true},
		{"same NVLinks: nearer", topo(4, pair(0, 1, 4, LevelSystem), pair(2, 3, 4, LevelNode)), 2, 3, true},
		{"no NVLink: nearest", topo(4, pair(0, 3, 0, LevelHostBridge), pair(1, 2, 0, LevelMultiple)), 1, 2, true},
		{"unknown is farthest", topo(3, pair(0, 1, 0, LevelUnknown), pair(0, 2, 0, LevelSystem), pair(1, 2, 0, LevelUnknown)), 0, 2, true},
		{"full tie: lowest", topo(4, pair(0, 1, 18, LevelSystem), pair(0, 2, 18, LevelSystem), pair(2, 3, 18, LevelSystem)), 0, 1, true},
		{"tie elsewhere: lowest", topo(4, pair(1, 3, 2, LevelNode), pair(2, 3, 2, LevelNode)), 1, 3, true},
		{"one GPU", topo(1), 0, 0, false},
		{"no GPU", topo(0), 0, 0, false},
	}
	for _, c := range cases {
		i, j, ok := c.topo.BestPair()
		if i != c.i || j != c.j || ok != c.ok {
			t.Errorf("%s: BestPair = %d, %d, %v; want %d, %d, %v", c.name, i, j, ok, c.i, c.j, c.ok)
		}
	}
	// On the fake box: the NV4 pair on one PCIe switch.
	if i, j, ok := discover(t, fourGPUs(), fourGPUsSysfs(t)).BestPair(); i != 0 || j != 1 || !ok {
		t.Errorf("four GPUs: BestPair = %d, %d, %v; want 0, 1", i, j, ok)
	}
}

func TestJSON(t *testing.T) {
	topo := discover(t, fourGPUs(), fourGPUsSysfs(t))
	b, err := json.MarshalIndent(topo, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	testutil.GoldenFile(t, "topo-four.json", append(b, '\n'))

	var generic struct {
		Devices []map[string]any `json:"devices"`
		Pairs   []map[string]any `json:"pairs"`
		Best    []int            `json:"best_pair"`
	}
	if err := json.Unmarshal(b, &generic); err != nil {
		t.Fatal(err)
	}
	d0, p01 := generic.Devices[0], generic.Pairs[0]
	if d0["cpus"] != "0-15,32-47" || d0["bus_id"] != "0000:18:00.0" || d0["mig"] != "disabled" ||
		d0["numa_node"] != 0.0 || d0["nvlinks"] != 4.0 || generic.Devices[3]["mig"] != "enabled" {
		t.Errorf("device 0 in JSON: %v", d0)
	}
	if p01["ancestor"] != "PIX" || p01["nvlinks"] != 4.0 || p01["p2p"].(map[string]any)["read"] != "OK" ||
		generic.Pairs[1]["p2p"].(map[string]any)["read"] != "CNS" {
		t.Errorf("pair 0-1 in JSON: %v", p01)
	}
	if !slices.Equal(generic.Best, []int{0, 1}) {
		t.Errorf("best_pair %v, want [0 1]", generic.Best)
	}

	// It reads back into the same topology.
	var back Topology
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	var f1, f2 bytes.Buffer
	if err := topo.Format(&f1); err != nil {
		t.Fatal(err)
	}
	if err := back.Format(&f2); err != nil {
		t.Fatal(err)
	}
	if f1.String() != f2.String() {
		t.Errorf("read back from JSON, it formats as\n%s\nnot\n%s", &f2, &f1)
	}
	for _, bad := range []string{`{"mig":"maybe"}`, `{"cpus":"1-x"}`} {
		var d DeviceInfo
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("%s: read without error", bad)
		}
	}
}

func TestParseCPUList(t *testing.T) {
	good := []struct {
		in   string
		want []int
		text string
	}{
		{"0-3,8-11\n", []int{0, 1, 2, 3, 8, 9, 10, 11}, "0-3,8-11"},
		{"5", []int{5}, "5"},
		{"", nil, ""},
		{" \n", nil, ""},
		{"7,1-2,2,0", []int{0, 1, 2, 7}, "0-2,7"},
		{"4-4", []int{4}, "4"},
		{"1,3,5", []int{1, 3, 5}, "1,3,5"},
	}
	for _, c := range good {
		got, err := ParseCPUList(c.in)
		if err != nil || !slices.Equal(got, c.want) || got.String() != c.text {
			t.Errorf("ParseCPUList(%q) = %v (%q), %v; want %v (%q)", c.in, got, got, err, c.want, c.text)
		}
	}
	for _, in := range []string{"a", "1-", "-1", "3-1", "1,,2", "0-15:2/4", "+1", "1-2-3", "99999999"} {
		if got, err := ParseCPUList(in); err == nil || !strings.Contains(err.Error(), in) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want an error quoting the list", in, got, err)
		}
	}
}

func TestSysfsAffinity(t *testing.T) {
	root := sysfsTree(t, map[string]string{
		"0000:18:00.0/numa_node":     "1\n",
		"0000:18:00.0/local_cpulist": "8-15\n",
		"0000:2a:00.0/numa_node":     "-1\n", // no NUMA: cpus unknown too
		"0000:3c:00.0/local_cpulist": "0-3\n",
	})
	for _, c := range []struct {
		bus   string
		cpus  string
		node  int
		found bool
	}{
		{"0000:18:00.0", "8-15", 1, true},
		{"0000:2a:00.0", "", -1, true},
		{"0000:3c:00.0", "0-3", -1, true},
		{"0000:4d:00.0", "", -1, false},
	} {
		a, err := sysfsAffinity(root, c.bus)
		if err != nil || a.cpus.String() != c.cpus || a.node != c.node || a.found != c.found {
			t.Errorf("%s: %+v, %v; want cpus %q node %d found %v", c.bus, a, err, c.cpus, c.node, c.found)
		}
	}
}

func TestNormalizeBusID(t *testing.T) {
	for in, want := range map[string]string{
		"00000000:18:00.0":         "0000:18:00.0",
		"0000:1A:00.0":             "0000:1a:00.0",
		"00000001:C1:1f.7\x00\x00": "0001:c1:1f.7",
		"18:00.0":                  "0000:18:00.0",
	} {
		if got, err := NormalizeBusID(in); got != want || err != nil {
			t.Errorf("NormalizeBusID(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "xyz", "0000:18:00", "0000:100:00.0", "0000:18:20.0", "0000:18:00.8", "0000::00.0", "a:b:c:d.e"} {
		if got, err := NormalizeBusID(in); err == nil {
			t.Errorf("NormalizeBusID(%q) = %q, want an error", in, got)
		}
	}
}

func TestTextNames(t *testing.T) {
	for l := LevelUnknown; l <= LevelSystem; l++ {
		var back Level
		b, err := l.MarshalText()
		if err != nil || back.UnmarshalText(b) != nil || back != l {
			t.Errorf("level %v does not round-trip: %q %v", l, b, err)
		}
	}
	for s := P2PUnknown; s <= P2PNotSupported; s++ {
		var back P2PStatus
		b, err := s.MarshalText()
		if err != nil || back.UnmarshalText(b) != nil || back != s {
			t.Errorf("P2P status %v does not round-trip: %q %v", s, b, err)
		}
	}
	if _, err := Level(42).MarshalText(); err == nil {
		t.Error("Level(42) marshals")
	}
	if Level(42).String() != "Level(42)" || P2PStatus(-1).String() != "P2PStatus(-1)" || MIGMode(9).String() != "MIGMode(9)" {
		t.Error("out-of-range values do not say what they are")
	}
}

// Describe keeps every GPU and every pair's label and read P2P status.
func TestDescribe(t *testing.T) {
	topo := discover(t, fourGPUs(), fourGPUsSysfs(t))
	g := topo.Describe()
	if len(g.Devices) != len(topo.Devices) || len(g.Links) != len(topo.Pairs) {
		t.Fatalf("Describe: %d devices, %d links; want %d, %d", len(g.Devices), len(g.Links), len(topo.Devices), len(topo.Pairs))
	}
	for i, d := range topo.Devices {
		got := g.Devices[i]
		if got.Index != d.Index || got.Name != d.Name || got.BusID != d.BusID || got.NUMANode != d.NUMANode || got.NVLinks != d.NVLinks {
			t.Errorf("device %d: %+v, from %+v", i, got, d)
		}
	}
	for k, p := range topo.Pairs {
		if l := g.Links[k]; l.GPUs != p.GPUs || l.Path != p.Label() || l.P2P != p.P2P.Read.String() {
			t.Errorf("link %d: %+v, from %+v", k, l, p)
		}
	}
}
