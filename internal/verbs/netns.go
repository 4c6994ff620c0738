package verbs

import (
	"fmt"
	"net"
)

// NetView is what the calling process's network namespace holds: its
// interfaces by name, with their addresses.
type NetView map[string][]net.IP

// LocalNetView lists the interfaces of the caller's network namespace
// (netlink answers for the namespace of the asking thread) and their
// addresses.
func LocalNetView() (NetView, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list network interfaces: %w", err)
	}
	v := NetView{}
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ifc.Name, err)
		}
		ips := []net.IP{}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				ips = append(ips, n.IP)
			}
		}
		v[ifc.Name] = ips
	}
	return v, nil
}

// InView reports whether GID index idx of port p belongs to view's
// namespace: on RoCE, an interface of that name in view carries the GID's
// address (names alone can repeat across namespaces: every container has
// an eth0). RDMA devices are visible in every network namespace (rdma
// system netns shared, the kernel's default), but a RoCE device moves data
// only through its own netdev, so a process must use the device whose
// netdev is in its namespace. InfiniBand ports, routed by LID, have no
// netdev and are in every view.
func (p Port) InView(idx int, view NetView) bool {
	if p.LinkLayer == "InfiniBand" {
		return true
	}
	for _, e := range p.GIDs {
		if e.Index != idx || e.Netdev == "" {
			continue
		}
		gid := net.IP(e.GID[:])
		for _, ip := range view[e.Netdev] {
			if ip.Equal(gid) {
				return true
			}
		}
	}
	return false
}
