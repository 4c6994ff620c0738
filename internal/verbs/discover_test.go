package verbs

import (
	"bytes"
	"errors"
	"flag"
	"net"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
)

var _ = flag.Bool("update", false, "rewrite golden files")

type fakePorts map[string]PortAttr

func (f fakePorts) Port(dev string, port int) (PortAttr, error) { return f[dev], nil }
func (f fakePorts) FW(dev string) (string, error)               { return "fw-" + dev, nil }

const zeroGID = "0000:0000:0000:0000:0000:0000:0000:0000"

// sysfsPort adds a port's GID table: entries as index, GID, type, netdev.
func sysfsPort(m fstest.MapFS, dev string, port string, linkLayer string, gids [][4]string) {
	d := "sys/class/infiniband/" + dev
	m[d+"/node_guid"] = &fstest.MapFile{Data: []byte("7cfe:90ff:fecb:1234\n")}
	p := d + "/ports/" + port
	m[p+"/link_layer"] = &fstest.MapFile{Data: []byte(linkLayer + "\n")}
	for _, g := range gids {
		m[p+"/gids/"+g[0]] = &fstest.MapFile{Data: []byte(g[1] + "\n")}
		if g[2] != "" {
			m[p+"/gid_attrs/types/"+g[0]] = &fstest.MapFile{Data: []byte(g[2] + "\n")}
		}
		if g[3] != "" {
			m[p+"/gid_attrs/ndevs/"+g[0]] = &fstest.MapFile{Data: []byte(g[3] + "\n")}
		}
	}
}

// The fixtures are shaped after what rxe0 on a veth and a ConnectX port
// show in sysfs: empty entries read as zero GIDs and have no type.
func TestDiscoverFromSysfs(t *testing.T) {
	m := fstest.MapFS{}
	sysfsPort(m, "rxe0", "1", "Ethernet", [][4]string{
		{"0", "fe80:0000:0000:0000:a0b1:c2ff:fed3:e4f5", "IB/RoCE v1", "veth0"},
		{"1", "fe80:0000:0000:0000:a0b1:c2ff:fed3:e4f5", "RoCE v2", "veth0"},
		{"2", "0000:0000:0000:0000:0000:ffff:0a09:0001", "IB/RoCE v1", "veth0"},
		{"3", "0000:0000:0000:0000:0000:ffff:0a09:0001", "RoCE v2", "veth0"},
		{"4", zeroGID, "", ""},
	})
	sysfsPort(m, "rxe1", "1", "Ethernet", [][4]string{
		{"0", "fe80:0000:0000:0000:a0b1:c2ff:fed3:0001", "IB/RoCE v1", "veth1"},
		{"1", "fe80:0000:0000:0000:a0b1:c2ff:fed3:0001", "RoCE v2", "veth1"},
	})
	sysfsPort(m, "mlx5_0", "1", "InfiniBand", [][4]string{
		{"0", "fe80:0000:0000:0000:0c42:a103:0012:3456", "", ""},
		{"1", zeroGID, "", ""},
	})
	src := fakePorts{
		"rxe0":   {State: Active, ActiveMTU: 3, MaxMTU: 5, LinkLayer: "Ethernet"},
		"rxe1":   {State: 1, ActiveMTU: 3, MaxMTU: 5},
		"mlx5_0": {State: Active, ActiveMTU: 5, MaxMTU: 5, LID: 17, LinkLayer: "InfiniBand"},
	}
	devs, err := discover(m, []string{"rxe0", "rxe1", "mlx5_0"}, src)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dev    string
		chosen int
	}{{"rxe0", 3}, {"rxe1", 1}, {"mlx5_0", 0}} {
		for _, d := range devs {
			if d.Name == c.dev && d.Ports[0].Chosen != c.chosen {
				t.Errorf("%s: chose GID %d (%s), want %d", c.dev, d.Ports[0].Chosen, d.Ports[0].Why, c.chosen)
			}
		}
	}
	var b bytes.Buffer
	writeDevices(&b, devs)
	testutil.GoldenFile(t, "devices.golden", b.Bytes())
}

func TestDiscoverBadSysfs(t *testing.T) {
	m := fstest.MapFS{}
	sysfsPort(m, "rxe0", "1", "Ethernet", [][4]string{{"0", "fe80::1", "RoCE v2", "veth0"}})
	_, err := discover(m, []string{"rxe0"}, fakePorts{})
	if err == nil || !strings.Contains(err.Error(), "rxe0 port 1: gids/0") {
		t.Fatalf("got %v, want an error naming device, port and entry", err)
	}
	_, err = discover(fstest.MapFS{}, []string{"rxe9"}, fakePorts{})
	if err == nil || !strings.Contains(err.Error(), "rxe9") {
		t.Fatalf("got %v, want an error naming the device", err)
	}
}

func TestChooseGID(t *testing.T) {
	mk := func(t string, g string) GIDEntry {
		x, err := ParseGID(g)
		if err != nil {
			panic(err)
		}
		return GIDEntry{GID: x, Type: t, Netdev: "eth0"}
	}
	ll := "fe80:0000:0000:0000:0000:0000:0000:0001"
	v4 := "0000:0000:0000:0000:0000:ffff:c0a8:0001"
	g6 := "2001:0db8:0000:0000:0000:0000:0000:0001"
	for _, c := range []struct {
		name string
		ll   string
		gids []GIDEntry
		want int
	}{
		{"empty", "Ethernet", nil, -1},
		{"ib index 0", "InfiniBand", []GIDEntry{mk("IB", ll)}, 0},
		{"v2 ipv4 over v2 link-local", "Ethernet", []GIDEntry{mk("RoCE v1", ll), mk("RoCE v2", ll), mk("RoCE v1", v4), mk("RoCE v2", v4)}, 3},
		{"v2 global ipv6 over link-local", "Ethernet", []GIDEntry{mk("RoCE v2", ll), mk("RoCE v2", g6)}, 1},
		{"v2 link-local over v1", "Ethernet", []GIDEntry{mk("RoCE v1", v4), mk("RoCE v2", ll)}, 1},
		{"v1 only", "Ethernet", []GIDEntry{mk("RoCE v1", ll)}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			for i := range c.gids {
				c.gids[i].Index = i
			}
			got, why := ChooseGID(Port{LinkLayer: c.ll, GIDs: c.gids})
			if got != c.want {
				t.Errorf("chose %d (%s), want %d", got, why, c.want)
			}
		})
	}
}

func TestParseGID(t *testing.T) {
	g, err := ParseGID("0000:0000:0000:0000:0000:ffff:0a09:0001")
	if err != nil {
		t.Fatal(err)
	}
	if ip, ok := g.IPv4(); !ok || ip != "10.9.0.1" {
		t.Errorf("IPv4 = %q %v", ip, ok)
	}
	if g.String() != "0000:0000:0000:0000:0000:ffff:0a09:0001" {
		t.Errorf("String = %s", g)
	}
	for _, bad := range []string{"", "fe80::1", "0000:0000:0000:0000:0000:ffff:0a09:zzzz", "0:0:0:0:0:0:0:1"} {
		if _, err := ParseGID(bad); err == nil {
			t.Errorf("ParseGID(%q) accepted", bad)
		}
	}
}

func TestMTU(t *testing.T) {
	for _, b := range []int{256, 512, 1024, 2048, 4096} {
		m, err := MTUOf(b)
		if err != nil || m.Bytes() != b {
			t.Errorf("MTUOf(%d) = %d, %v", b, m, err)
		}
	}
	if _, err := MTUOf(1500); err == nil {
		t.Error("MTUOf(1500) accepted")
	}
}

// An absent library is an ErrNotSupported error that names it.
func TestAbsentLibrary(t *testing.T) {
	err := loadNamed("libgotune-absent-verbs.so.1")
	if !errors.Is(err, sys.ErrNotSupported) || !strings.Contains(err.Error(), "libgotune-absent-verbs.so.1 not found") {
		t.Fatalf("got %v", err)
	}
}

// Here, whatever the machine has: a report, or the reason there is none.
func TestReportSaysWhy(t *testing.T) {
	var b bytes.Buffer
	err := Report(&b, os.DirFS(SysfsRoot))
	out := b.String()
	t.Logf("%s", out)
	switch {
	case err != nil:
		t.Fatal(err)
	case strings.HasPrefix(out, "RDMA: none usable"):
		if !strings.Contains(out, "not found") && !strings.Contains(out, NoDevices) {
			t.Errorf("absence without a reason: %q", out)
		}
	case !strings.Contains(out, "chosen GID index"):
		t.Errorf("devices without a chosen GID: %q", out)
	}
}

func TestInView(t *testing.T) {
	gid := func(s string) GID {
		g, err := ParseGID(s)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	v4 := gid("0000:0000:0000:0000:0000:ffff:0a09:0101") // 10.9.1.1
	ll := gid("fe80:0000:0000:0000:f85c:acff:fe2d:bc75")
	port := Port{LinkLayer: "Ethernet", GIDs: []GIDEntry{{Index: 0, GID: ll, Type: "RoCE v2", Netdev: "veth2"}, {Index: 1, GID: v4, Type: "RoCE v2", Netdev: "veth2"}}}
	mine := NetView{"lo": {net.ParseIP("127.0.0.1")}, "veth2": {net.ParseIP("10.9.1.1"), net.ParseIP("fe80::f85c:acff:fe2d:bc75")}}
	for _, c := range []struct {
		name string
		p    Port
		idx  int
		view NetView
		want bool
	}{
		{"ipv4 GID on my interface", port, 1, mine, true},
		{"link-local GID on my interface", port, 0, mine, true},
		{"no such index", port, 5, mine, false},
		{"netdev elsewhere", port, 1, NetView{"veth0": {net.ParseIP("10.9.0.1")}}, false},
		{"same name, other address (another namespace's eth0)", port, 1, NetView{"veth2": {net.ParseIP("10.9.1.2")}}, false},
		{"empty view", port, 1, NetView{}, false},
		{"InfiniBand is everywhere", Port{LinkLayer: "InfiniBand", GIDs: []GIDEntry{{Index: 0, GID: ll, Type: "IB"}}}, 0, NetView{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.InView(c.idx, c.view); got != c.want {
				t.Errorf("InView(%d) = %v, want %v", c.idx, got, c.want)
			}
		})
	}
}

func TestLocalNetViewHasLoopback(t *testing.T) {
	v, err := LocalNetView()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v["lo"]; !ok {
		t.Errorf("view %v has no lo", v)
	}
}
