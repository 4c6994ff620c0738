package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/gpu"
)

// twoGPUs is a gpu.Source of two H200s joined through NVSwitches, on bus ids
// that no machine has, so that sysfs has nothing to say about them.
type twoGPUs struct{}

func (twoGPUs) Count() (int, error) { return 2, nil }

func (twoGPUs) Device(i int) (gpu.DeviceInfo, error) {
	return gpu.DeviceInfo{Index: i, Name: "NVIDIA H200", UUID: fmt.Sprintf("GPU-%d", i),
		BusID: fmt.Sprintf("ffff:%02x:00.0", 0x18+i), MIG: gpu.MIGDisabled, CPUs: gpu.CPUList{4 * i, 4*i + 1}, NUMANode: i}, nil
}

func (twoGPUs) NVLinks(i int) ([]gpu.NVLink, error) {
	links := make([]gpu.NVLink, 18)
	for l := range links {
		links[l] = gpu.NVLink{Link: l, Remote: "ffff:c0:00.0", Type: gpu.RemoteSwitch}
	}
	return links, nil
}

func (twoGPUs) Link(i, j int) (gpu.LinkInfo, error) {
	return gpu.LinkInfo{Ancestor: gpu.LevelSystem, P2P: gpu.P2P{Read: gpu.P2POK, Write: gpu.P2POK, NVLink: gpu.P2POK}}, nil
}

// withGPUs makes gotune topo see src (or fail to open with err).
func withGPUs(t *testing.T, src gpu.Source, err error) (closes *int) {
	t.Helper()
	saved := openGPUs
	t.Cleanup(func() { openGPUs = saved })
	closes = new(int)
	openGPUs = func() (gpu.Source, func() error, error) {
		if err != nil {
			return nil, nil, err
		}
		return src, func() error { *closes++; return nil }, nil
	}
	return closes
}

// On this machine, whatever it has: exit 0, and either the matrix or one line
// saying why there is no GPU (the build machines have no NVML).
func TestTopoHere(t *testing.T) {
	_, nvmlErr := gpu.OpenNVML()
	out, e, code := run(t, "topo")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	if errors.Is(nvmlErr, gpu.ErrNotSupported) {
		missing := strings.Contains(nvmlErr.Error(), "libnvidia-ml.so.1")
		if strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "no NVIDIA GPU: NVML: ") ||
			missing && !strings.Contains(out, "libnvidia-ml.so.1 cannot be loaded") {
			t.Errorf("without NVML (%v): %q, want one line saying there is no NVIDIA GPU and why", nvmlErr, out)
		}
		out, e, code = run(t, "topo", "--format", "json")
		var v struct {
			Devices []any  `json:"devices"`
			NoGPU   string `json:"no_gpu"`
		}
		if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || v.Devices == nil || len(v.Devices) != 0 || v.NoGPU == "" {
			t.Errorf("without NVML, json: exit %d %v: %q %s", code, err, out, e)
		}
		return
	}
	t.Logf("NVML here (%v):\n%s", nvmlErr, out)
	if !strings.Contains(out, "GPU0") && !strings.HasPrefix(out, "no NVIDIA GPU: ") {
		t.Errorf("with NVML: %q", out)
	}
}

func TestTopoFake(t *testing.T) {
	closes := withGPUs(t, twoGPUs{}, nil)
	out, e, code := run(t, "topo")
	if code != 0 || !strings.Contains(out, "│ GPU0 │ X    │ NV18 │ 0-1          │ 0         │") ||
		!strings.Contains(out, "Best pair: GPU0-GPU1 (NV18;") {
		t.Errorf("table: exit %d\n%s%s", code, out, e)
	}
	out, e, code = run(t, "topo", "-f", "json")
	var v struct {
		Devices []gpu.Device `json:"devices"`
		Best    []int        `json:"best_pair"`
	}
	if err := json.Unmarshal([]byte(out), &v); code != 0 || err != nil || len(v.Devices) != 2 ||
		v.Devices[1].CPUs.String() != "4-5" || v.Devices[1].NVLinks != 18 || len(v.Best) != 2 {
		t.Errorf("json: exit %d %v\n%s%s", code, err, out, e)
	}
	if *closes != 2 {
		t.Errorf("source closed %d times in 2 runs", *closes)
	}
}

func TestTopoErrors(t *testing.T) {
	withGPUs(t, nil, errors.New("nvmlDeviceGetCount: GPU is lost"))
	if _, e, code := run(t, "topo"); code == 0 || !strings.Contains(e, "GPU is lost") {
		t.Errorf("a failing NVML: exit %d, stderr %q: want a failure naming the cause", code, e)
	}
	if _, e, code := run(t, "topo", "--format", "xml"); code == 0 || !strings.Contains(e, "--format") {
		t.Errorf("--format xml: exit %d, stderr %q", code, e)
	}
}
