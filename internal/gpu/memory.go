package gpu

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// MemorySource is a Source that also knows each GPU's memory.
type MemorySource interface {
	Source
	// TotalMemory returns GPU i's memory in bytes.
	TotalMemory(i int) (uint64, error)
}

var _ MemorySource = (*NVML)(nil)

// TotalMemory implements MemorySource with nvmlDeviceGetMemoryInfo.
func (s *NVML) TotalMemory(i int) (uint64, error) {
	d, err := s.device(i)
	if err != nil {
		return 0, err
	}
	m, ret := d.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return 0, nvmlError("nvmlDeviceGetMemoryInfo", ret)
	}
	return m.Total, nil
}
