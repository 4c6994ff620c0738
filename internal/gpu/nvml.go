package gpu

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gotune/gotune/internal/sys"
)

// nvmlLibrary is the library OpenNVML loads (dlopen's search rules apply).
const nvmlLibrary = "libnvidia-ml.so.1"

// Bounds on the affinity masks asked of NVML.
const (
	nvmlMaxCPUs  = 8192
	nvmlMaxNodes = 1024
)

// NVML is the Source backed by the NVIDIA Management Library. It holds NVML
// initialised until Close.
type NVML struct {
	lib  nvml.Interface
	devs []nvml.Device
}

var _ Source = (*NVML)(nil)

// OpenNVML loads libnvidia-ml.so.1 and initialises NVML. Nothing is loaded
// before it is called, so gotune runs on machines without the driver; there
// it fails with an error matching ErrNotSupported that says why.
func OpenNVML() (*NVML, error) { return openNVML(nvmlLibrary) }

func openNVML(path string) (*NVML, error) {
	lib := nvml.New(nvml.WithLibraryPath(path))
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, initError(path, ret)
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil, nvmlError("nvmlDeviceGetCount", ret)
	}
	s := &NVML{lib: lib, devs: make([]nvml.Device, n)}
	for i := range n {
		if s.devs[i], ret = lib.DeviceGetHandleByIndex(i); ret != nvml.SUCCESS {
			lib.Shutdown()
			return nil, fmt.Errorf("gpu %d: %w", i, nvmlError("nvmlDeviceGetHandleByIndex", ret))
		}
	}
	return s, nil
}

// initError says why NVML cannot be used; "not here" matches ErrNotSupported.
func initError(path string, ret nvml.Return) error {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return sys.NotSupported("NVML", path+" cannot be loaded (no NVIDIA driver installed?)", nil)
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return sys.NotSupported("NVML", "the NVIDIA kernel driver is not loaded", nil)
	case nvml.ERROR_NO_PERMISSION:
		return sys.NotSupported("NVML", "no permission to open the NVIDIA devices", nil)
	case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND:
		return sys.NotSupported("NVML", "the installed driver does not support it", nvmlError("nvmlInit", ret))
	}
	return nvmlError("nvmlInit", ret)
}

// nvmlError is a failed NVML call; errors.As finds the nvml.Return.
func nvmlError(call string, ret nvml.Return) error {
	return fmt.Errorf("%s: %w", call, ret)
}

// Close shuts NVML down. It is safe to call more than once.
func (s *NVML) Close() error {
	if s == nil || s.lib == nil {
		return nil
	}
	lib := s.lib
	s.lib, s.devs = nil, nil
	if ret := lib.Shutdown(); ret != nvml.SUCCESS {
		return nvmlError("nvmlShutdown", ret)
	}
	return nil
}

func (s *NVML) device(i int) (nvml.Device, error) {
	if s.lib == nil {
		return nil, errors.New("gpu: NVML is closed")
	}
	if i < 0 || i >= len(s.devs) {
		return nil, fmt.Errorf("gpu: no GPU %d (%d GPUs)", i, len(s.devs))
	}
	return s.devs[i], nil
}

// Count implements Source.
func (s *NVML) Count() (int, error) {
	if s.lib == nil {
		return 0, errors.New("gpu: NVML is closed")
	}
	return len(s.devs), nil
}

// Device implements Source. CPUs come from nvmlDeviceGetCpuAffinity and the
// NUMA node from nvmlDeviceGetMemoryAffinity (when it names one node).
func (s *NVML) Device(i int) (DeviceInfo, error) {
	d, err := s.device(i)
	if err != nil {
		return DeviceInfo{}, err
	}
	info := DeviceInfo{Index: i, NUMANode: -1}
	var ret nvml.Return
	if info.Name, ret = d.GetName(); ret != nvml.SUCCESS {
		return info, nvmlError("nvmlDeviceGetName", ret)
	}
	if info.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
		return info, nvmlError("nvmlDeviceGetUUID", ret)
	}
	pci, ret := d.GetPciInfo()
	if ret != nvml.SUCCESS {
		return info, nvmlError("nvmlDeviceGetPciInfo", ret)
	}
	if info.BusID, err = busID(pci); err != nil {
		return info, err
	}
	switch current, _, ret := d.GetMigMode(); ret {
	case nvml.SUCCESS:
		info.MIG = MIGDisabled
		if current == nvml.DEVICE_MIG_ENABLE {
			info.MIG = MIGEnabled
		}
	case nvml.ERROR_NOT_SUPPORTED:
		info.MIG = MIGUnsupported
	default:
		return info, nvmlError("nvmlDeviceGetMigMode", ret)
	}
	// Affinity is a fallback for sysfs: where NVML cannot say, it is unknown.
	if mask, ret := d.GetCpuAffinity(nvmlMaxCPUs); ret == nvml.SUCCESS {
		info.CPUs = maskBits(mask)
	}
	if mask, ret := d.GetMemoryAffinity(nvmlMaxNodes, nvml.AFFINITY_SCOPE_NODE); ret == nvml.SUCCESS {
		if nodes := maskBits(mask); len(nodes) == 1 {
			info.NUMANode = nodes[0]
		}
	}
	return info, nil
}

// busID reads NVML's PCI bus id ("00000000:18:00.0") in sysfs's form.
func busID(pci nvml.PciInfo) (string, error) {
	b := pci.BusId[:]
	for k, c := range b {
		if c == 0 {
			b = b[:k]
			break
		}
	}
	return NormalizeBusID(string(b))
}

// maskBits lists the set bits of a mask of machine words, lowest first.
func maskBits(mask []uint) []int {
	var set []int
	for w, word := range mask {
		for word != 0 {
			b := bits.TrailingZeros(word)
			set = append(set, w*bits.UintSize+b)
			word &= word - 1
		}
	}
	return set
}

// NVLinks implements Source: the links nvmlDeviceGetNvLinkState reports
// active among 0..NVLINK_MAX_LINKS-1, with their far ends.
func (s *NVML) NVLinks(i int) ([]NVLink, error) {
	d, err := s.device(i)
	if err != nil {
		return nil, err
	}
	var links []NVLink
	for l := range nvml.NVLINK_MAX_LINKS {
		state, ret := d.GetNvLinkState(l)
		if ret == nvml.ERROR_NOT_SUPPORTED && l == 0 {
			return nil, nil // a GPU without NVLink
		}
		if ret != nvml.SUCCESS || state != nvml.FEATURE_ENABLED {
			continue // no such link on this GPU, or not up
		}
		link := NVLink{Link: l, Type: RemoteUnknown}
		if pci, ret := d.GetNvLinkRemotePciInfo(l); ret == nvml.SUCCESS {
			link.Remote, _ = busID(pci) // an unreadable one stays unknown
		}
		if t, ret := d.GetNvLinkRemoteDeviceType(l); ret == nvml.SUCCESS {
			switch t {
			case nvml.NVLINK_DEVICE_TYPE_GPU:
				link.Type = RemoteGPU
			case nvml.NVLINK_DEVICE_TYPE_SWITCH:
				link.Type = RemoteSwitch
			case nvml.NVLINK_DEVICE_TYPE_IBMNPU:
				link.Type = RemoteCPU
			}
		}
		links = append(links, link)
	}
	return links, nil
}

// Link implements Source with nvmlDeviceGetTopologyCommonAncestor and
// nvmlDeviceGetP2PStatus (read, write, NVLink).
func (s *NVML) Link(i, j int) (LinkInfo, error) {
	a, err := s.device(i)
	if err != nil {
		return LinkInfo{}, err
	}
	b, err := s.device(j)
	if err != nil {
		return LinkInfo{}, err
	}
	var li LinkInfo
	switch level, ret := a.GetTopologyCommonAncestor(b); ret {
	case nvml.SUCCESS:
		li.Ancestor = levelOf(level)
	case nvml.ERROR_NOT_SUPPORTED:
		li.Ancestor = LevelUnknown
	default:
		return li, nvmlError("nvmlDeviceGetTopologyCommonAncestor", ret)
	}
	for _, c := range []struct {
		index nvml.GpuP2PCapsIndex
		into  *P2PStatus
	}{
		{nvml.P2P_CAPS_INDEX_READ, &li.P2P.Read},
		{nvml.P2P_CAPS_INDEX_WRITE, &li.P2P.Write},
		{nvml.P2P_CAPS_INDEX_NVLINK, &li.P2P.NVLink},
	} {
		switch status, ret := a.GetP2PStatus(b, c.index); ret {
		case nvml.SUCCESS:
			*c.into = p2pOf(status)
		case nvml.ERROR_NOT_SUPPORTED:
			*c.into = P2PNotSupported
		default:
			*c.into = P2PUnknown
		}
	}
	return li, nil
}

func levelOf(l nvml.GpuTopologyLevel) Level {
	switch l {
	case nvml.TOPOLOGY_INTERNAL:
		return LevelInternal
	case nvml.TOPOLOGY_SINGLE:
		return LevelSingle
	case nvml.TOPOLOGY_MULTIPLE:
		return LevelMultiple
	case nvml.TOPOLOGY_HOSTBRIDGE:
		return LevelHostBridge
	case nvml.TOPOLOGY_NODE:
		return LevelNode
	case nvml.TOPOLOGY_SYSTEM:
		return LevelSystem
	}
	return LevelUnknown
}

func p2pOf(s nvml.GpuP2PStatus) P2PStatus {
	switch s {
	case nvml.P2P_STATUS_OK:
		return P2POK
	case nvml.P2P_STATUS_CHIPSET_NOT_SUPPORTED:
		return P2PChipsetNotSupported
	case nvml.P2P_STATUS_GPU_NOT_SUPPORTED:
		return P2PGPUNotSupported
	case nvml.P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED:
		return P2PTopologyNotSupported
	case nvml.P2P_STATUS_DISABLED_BY_REGKEY:
		return P2PDisabledByRegkey
	case nvml.P2P_STATUS_NOT_SUPPORTED:
		return P2PNotSupported
	}
	return P2PUnknown
}

// Versions reports the NVIDIA driver's version ("580.95.05") and the CUDA
// version its driver API implements ("13.0").
func (s *NVML) Versions() (driver, cuda string, err error) {
	if s.lib == nil {
		return "", "", errors.New("gpu: NVML is closed")
	}
	driver, ret := s.lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return "", "", nvmlError("nvmlSystemGetDriverVersion", ret)
	}
	v, ret := s.lib.SystemGetCudaDriverVersion()
	if ret != nvml.SUCCESS {
		return "", "", nvmlError("nvmlSystemGetCudaDriverVersion", ret)
	}
	return driver, fmt.Sprintf("%d.%d", v/1000, v%1000/10), nil
}
