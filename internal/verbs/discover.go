package verbs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/gotune/gotune/internal/sys"
)

// Device is what discovery finds of one RDMA device, as ibv_devinfo shows it.
type Device struct {
	Name     string
	NodeGUID string // from sysfs
	FW       string
	Ports    []Port
}

// Port is one port of a device.
type Port struct {
	Num       int
	State     string // ACTIVE, DOWN, ...
	LinkLayer string // InfiniBand, Ethernet
	ActiveMTU int    // bytes
	MaxMTU    int    // bytes
	LID       uint16
	GIDs      []GIDEntry // non-empty entries of the GID table
	// Chosen is the GID index a transport uses on this port by default
	// (-1: none fits) and Why says why.
	Chosen int
	Why    string
}

// GIDEntry is one populated GID table entry.
type GIDEntry struct {
	Index  int
	GID    GID
	Type   string // "RoCE v2", "RoCE v1" (sysfs says "IB/RoCE v1"), or "IB"
	Netdev string // the network device a RoCE GID belongs to
}

// portSource answers what only libibverbs knows (state, MTU, LID).
type portSource interface {
	Port(dev string, port int) (PortAttr, error)
	FW(dev string) (string, error)
}

// SysfsRoot is where Discover reads /sys/class/infiniband from.
const SysfsRoot = "/"

// Discover lists every RDMA device under root's sys/class/infiniband
// with its ports and GIDs (their RoCE types from gid_attrs/types), state,
// MTU and LID from libibverbs, and the GID index chosen for each port.
// No library is an ErrNotSupported error naming it; no device is one
// saying "no RDMA devices".
func Discover(root fs.FS) ([]Device, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	names, err := DeviceNames()
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, sys.NotSupported("InfiniBand verbs", NoDevices, nil)
	}
	src := &libSource{open: map[string]*Context{}}
	defer src.close()
	return discover(root, names, src)
}

type libSource struct{ open map[string]*Context }

func (s *libSource) ctx(dev string) (*Context, error) {
	if c := s.open[dev]; c != nil {
		return c, nil
	}
	c, err := Open(dev)
	if err != nil {
		return nil, err
	}
	s.open[dev] = c
	return c, nil
}

func (s *libSource) Port(dev string, port int) (PortAttr, error) {
	c, err := s.ctx(dev)
	if err != nil {
		return PortAttr{}, err
	}
	return c.QueryPort(port)
}

func (s *libSource) FW(dev string) (string, error) {
	c, err := s.ctx(dev)
	if err != nil {
		return "", err
	}
	a, err := c.Query()
	return a.FW, err
}

func (s *libSource) close() {
	for _, c := range s.open {
		c.Close()
	}
}

const classDir = "sys/class/infiniband"

// discover builds the devices named (libibverbs' list) from sysfs and src.
func discover(root fs.FS, names []string, src portSource) ([]Device, error) {
	var devs []Device
	for _, name := range names {
		d := Device{Name: name}
		dir := path.Join(classDir, name)
		d.NodeGUID = readTrim(root, path.Join(dir, "node_guid"))
		fw, err := src.FW(name)
		if err != nil {
			return nil, err
		}
		d.FW = fw
		ents, err := fs.ReadDir(root, path.Join(dir, "ports"))
		if err != nil {
			return nil, fmt.Errorf("device %s: ports: %w", name, err)
		}
		for _, e := range ents {
			num, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			a, err := src.Port(name, num)
			if err != nil {
				return nil, err
			}
			p := Port{Num: num, State: a.State.String(), LinkLayer: a.LinkLayer, ActiveMTU: a.ActiveMTU.Bytes(), MaxMTU: a.MaxMTU.Bytes(), LID: a.LID}
			if p.LinkLayer == "" {
				p.LinkLayer = readTrim(root, path.Join(dir, "ports", e.Name(), "link_layer"))
			}
			if p.GIDs, err = readGIDs(root, path.Join(dir, "ports", e.Name())); err != nil {
				return nil, fmt.Errorf("device %s port %d: %w", name, num, err)
			}
			p.Chosen, p.Why = ChooseGID(p)
			d.Ports = append(d.Ports, p)
		}
		sort.Slice(d.Ports, func(i, j int) bool { return d.Ports[i].Num < d.Ports[j].Num })
		devs = append(devs, d)
	}
	return devs, nil
}

func readTrim(root fs.FS, name string) string {
	b, err := fs.ReadFile(root, name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// readGIDs reads a port's populated GID entries: gids/N, with
// gid_attrs/types/N and gid_attrs/ndevs/N where the kernel has them (an
// empty entry's type cannot be read: EINVAL).
func readGIDs(root fs.FS, port string) ([]GIDEntry, error) {
	ents, err := fs.ReadDir(root, path.Join(port, "gids"))
	if err != nil {
		return nil, fmt.Errorf("GID table: %w", err)
	}
	var out []GIDEntry
	for _, e := range ents {
		idx, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		g, err := ParseGID(readTrim(root, path.Join(port, "gids", e.Name())))
		if err != nil {
			return nil, fmt.Errorf("gids/%d: %w", idx, err)
		}
		if g.IsZero() {
			continue
		}
		ge := GIDEntry{Index: idx, GID: g, Type: "IB"}
		switch t := readTrim(root, path.Join(port, "gid_attrs", "types", e.Name())); {
		case t == "RoCE v2":
			ge.Type = "RoCE v2"
		case strings.Contains(t, "RoCE v1"):
			ge.Type = "RoCE v1"
		}
		ge.Netdev = readTrim(root, path.Join(port, "gid_attrs", "ndevs", e.Name()))
		if ge.Type == "IB" && ge.Netdev != "" {
			ge.Type = "RoCE v1" // a type file the kernel did not fill, on an Ethernet port
		}
		out = append(out, ge)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, nil
}

// ParseGID reads a GID as sysfs writes it (eight groups of four hex digits).
func ParseGID(s string) (GID, error) {
	var g GID
	parts := strings.Split(s, ":")
	if len(parts) != 8 {
		return g, fmt.Errorf("GID %q: want 8 groups of 4 hex digits", s)
	}
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 16, 16)
		if err != nil || len(p) != 4 {
			return g, fmt.Errorf("GID %q: group %q", s, p)
		}
		g[2*i], g[2*i+1] = byte(v>>8), byte(v)
	}
	return g, nil
}

// ChooseGID picks the GID index a transport uses on p: on InfiniBand
// index 0 (routing by LID); on RoCE the first RoCE v2 GID with an IPv4
// address (routable over UDP/IP, what rdma_cm and perftest's -x pick),
// then RoCE v2 with a global IPv6 address, then RoCE v2 link-local, then
// RoCE v1. It returns -1 when the port has no GID.
func ChooseGID(p Port) (int, string) {
	if len(p.GIDs) == 0 {
		return -1, "no GID"
	}
	if p.LinkLayer == "InfiniBand" {
		return p.GIDs[0].Index, "InfiniBand: routed by LID, GID index " + strconv.Itoa(p.GIDs[0].Index)
	}
	rank := func(e GIDEntry) (int, string) {
		if e.Type != "RoCE v2" {
			return 3, "RoCE v1 (no RoCE v2 GID)"
		}
		if ip, ok := e.GID.IPv4(); ok {
			return 0, "RoCE v2 with IPv4 " + ip
		}
		if !e.GID.LinkLocal() {
			return 1, "RoCE v2 with a global IPv6 address"
		}
		return 2, "RoCE v2, link-local (no IP address on " + e.Netdev + ")"
	}
	best, bestRank, why := -1, 99, ""
	for _, e := range p.GIDs {
		if r, w := rank(e); r < bestRank {
			best, bestRank, why = e.Index, r, w
		}
	}
	return best, why
}

// Report writes what Discover finds, for gotune doctor: every device,
// port and GID, and the index chosen, or why there is none ("libibverbs.so.1
// not found", "no RDMA devices"). Only a failure that is not mere absence
// is returned.
func Report(w io.Writer, root fs.FS) error {
	devs, err := Discover(root)
	switch {
	case errors.Is(err, sys.ErrNotSupported):
		fmt.Fprintf(w, "RDMA: none usable (%s)\n", notSupportedReason(err))
		return nil
	case err != nil:
		fmt.Fprintf(w, "RDMA: FAILED: %v\n", err)
		return err
	}
	fs, _ := Fork()
	fmt.Fprintf(w, "RDMA: %d device(s) (%s; fork protection %s)\n", len(devs), Library, fs)
	writeDevices(w, devs)
	return nil
}

func writeDevices(w io.Writer, devs []Device) {
	for _, d := range devs {
		fmt.Fprintf(w, "  %s  node GUID %s, firmware %s\n", d.Name, orNone(d.NodeGUID), orNone(d.FW))
		for _, p := range d.Ports {
			fmt.Fprintf(w, "    port %d: %s, %s, MTU %d (max %d), LID %d\n", p.Num, p.State, orNone(p.LinkLayer), p.ActiveMTU, p.MaxMTU, p.LID)
			for _, g := range p.GIDs {
				mark := " "
				if g.Index == p.Chosen {
					mark = "*"
				}
				nd := ""
				if g.Netdev != "" {
					nd = " on " + g.Netdev
				}
				fmt.Fprintf(w, "     %s GID[%d] %s  %s%s\n", mark, g.Index, g.GID, g.Type, nd)
			}
			if p.Chosen >= 0 {
				fmt.Fprintf(w, "      chosen GID index %d: %s (ib.gid overrides)\n", p.Chosen, p.Why)
			} else {
				fmt.Fprintf(w, "      no GID index usable: %s\n", p.Why)
			}
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func notSupportedReason(err error) string {
	var ns *sys.NotSupportedError
	if errors.As(err, &ns) {
		return ns.Reason
	}
	return err.Error()
}
