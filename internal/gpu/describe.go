package gpu

import "github.com/gotune/gotune/internal/hostinfo"

// Describe is the topology as a run's provenance records it.
func (t *Topology) Describe() *hostinfo.GPUs {
	g := &hostinfo.GPUs{Devices: make([]hostinfo.GPU, len(t.Devices))}
	for i, d := range t.Devices {
		g.Devices[i] = hostinfo.GPU{Index: d.Index, Name: d.Name, BusID: d.BusID, NUMANode: d.NUMANode, NVLinks: d.NVLinks}
	}
	for _, p := range t.Pairs {
		g.Links = append(g.Links, hostinfo.GPULink{GPUs: p.GPUs, Path: p.Label(), P2P: p.P2P.Read.String()})
	}
	return g
}

// Machine asks NVML for this node's GPUs, their connections and the
// driver's versions; it fails
// matching ErrNotSupported where NVML is absent.
func Machine() (*hostinfo.GPUs, error) {
	s, err := OpenNVML()
	if err != nil {
		return nil, err
	}
	t, err := Discover(s)
	var driver, cuda string
	if err == nil {
		driver, cuda, err = s.Versions()
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	g := t.Describe()
	g.Driver, g.CUDA = driver, cuda
	return g, nil
}
