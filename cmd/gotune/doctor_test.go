package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/bytesize"
	"github.com/gotune/gotune/internal/gpu"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/launchenv"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cma"
	"github.com/gotune/gotune/transports/cudaipc"
	"github.com/gotune/gotune/transports/gpumem"
	"github.com/gotune/gotune/transports/sm"
)

var (
	update = flag.Bool("update", false, "rewrite the golden files under testdata")
	golden = testutil.GoldenFile // testdata/name, rewritten under -update
)

// Option sets of the fake drivers: sm's is read by cma and cudaipc too, and
// gpu's belongs to no transport.
var (
	fakeSM = &transports.OptionSet{Name: "sm", Options: []transports.Option{
		{Key: sm.KeyDepth, Type: "int", Default: "64", Help: "cells per channel"},
		{Key: sm.KeyFrag, Type: "size", Default: "64K", Help: "fragment size"},
	}}
	fakeCMA = &transports.OptionSet{Name: "cma", Options: []transports.Option{
		{Key: cma.KeyThreshold, Type: "size", Help: "smallest message sent by single copy"},
	}}
	fakeIPC = &transports.OptionSet{Name: "cudaipc", Options: []transports.Option{
		{Key: cudaipc.KeyPinnedThreshold, Type: "size", Default: "256K", Help: "smallest pinned send offered for single copy"},
	}}
	fakeGPU = &transports.OptionSet{Name: "gpu", Options: []transports.Option{
		{Key: gpumem.OptionKey, Type: "plain|worker|pool", Help: "GPU buffer allocator"},
	}}
	fakeDrivers = []*transports.Driver{
		{Name: "auto"},
		{Name: "cma", Options: []*transports.OptionSet{fakeSM, fakeCMA}},
		{Name: "cudaipc", Options: []*transports.OptionSet{fakeSM, fakeIPC, fakeGPU}},
		{Name: "sm", Options: []*transports.OptionSet{fakeSM}},
	}
)

// gpuFake is a gpu.MemorySource: GPUs 0 and 1 joined by 4 NVLinks, the
// rest (if any) reached over the SMP interconnect, on bus ids no machine
// has (sysfs knows nothing of them).
type gpuFake struct {
	n      int
	memErr error
}

func (f gpuFake) Count() (int, error) { return f.n, nil }

func (f gpuFake) Device(i int) (gpu.DeviceInfo, error) {
	return gpu.DeviceInfo{Index: i, Name: "NVIDIA H200", UUID: fmt.Sprintf("GPU-%d", i),
		BusID: fmt.Sprintf("ffff:%02x:00.0", 0x18+i), MIG: gpu.MIGDisabled, NUMANode: i / 2}, nil
}

func (f gpuFake) NVLinks(i int) ([]gpu.NVLink, error) {
	if i > 1 {
		return nil, nil
	}
	links := make([]gpu.NVLink, 4)
	for l := range links {
		links[l] = gpu.NVLink{Link: l, Remote: fmt.Sprintf("ffff:%02x:00.0", 0x18+1-i), Type: gpu.RemoteGPU}
	}
	return links, nil
}

func (f gpuFake) Link(i, j int) (gpu.LinkInfo, error) {
	if i < 2 && j < 2 {
		return gpu.LinkInfo{Ancestor: gpu.LevelNode, P2P: gpu.P2P{Read: gpu.P2POK, Write: gpu.P2POK, NVLink: gpu.P2POK}}, nil
	}
	return gpu.LinkInfo{Ancestor: gpu.LevelSystem, P2P: gpu.P2P{Read: gpu.P2PChipsetNotSupported, Write: gpu.P2PChipsetNotSupported, NVLink: gpu.P2PNotSupported}}, nil
}

func (f gpuFake) TotalMemory(i int) (uint64, error) {
	if f.memErr != nil {
		return 0, f.memErr
	}
	return 143771 << 20, nil
}

func TestDoctorGolden(t *testing.T) {
	noCUDA := fmt.Errorf("probe cudaipc: rank 0 of probe-transport: not supported: start cudaipc: %w",
		sys.NotSupported("CUDA driver", "libcuda.so.1 not found", nil))
	noNVML := sys.NotSupported("NVML", "libnvidia-ml.so.1 cannot be loaded (no NVIDIA driver installed?)", nil)
	cases := []struct {
		name    string
		probe   map[string]error
		src     gpu.Source
		openErr error
		failed  int
		job     map[string]string // the launcher's variables (nil: none)
		nccl    error             // NCCL 2.28.9 loads (nil), or not
	}{
		{name: "no-gpu", probe: map[string]error{"cudaipc": noCUDA}, openErr: noNVML,
			nccl: sys.NotSupported("nccl", "no libnccl.so.2 loads (set GOTUNE_LIBNCCL to its path): libnccl.so.2: cannot open shared object file", nil)},
		{name: "two-gpus", src: gpuFake{n: 2}, job: map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1",
			"SLURM_NODEID": "0", "SLURM_TASKS_PER_NODE": "2(x2)", "SLURM_JOB_ID": "4242"}},
		{name: "three-gpus", src: gpuFake{n: 3}},
		{name: "no-devices", src: gpuFake{n: 0}, probe: map[string]error{"cudaipc": noCUDA}},
		{name: "failed", probe: map[string]error{"cma": errors.New("probe cma: rank 1 of probe-transport: exited with status 2")},
			src: gpuFake{n: 1, memErr: errors.New("nvmlDeviceGetMemoryInfo: Unknown Error")}, failed: 1},
		{name: "nvml-failed", openErr: errors.New("nvmlDeviceGetCount: GPU is lost"), failed: 2,
			nccl: errors.New("ncclGetVersion: NCCL error 1 (unhandled cuda error)")},
		{name: "bad-launcher", src: gpuFake{n: 0}, probe: map[string]error{"cudaipc": noCUDA},
			job: map[string]string{"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "2"}, failed: 1},
		{name: "coordinator-without-token", src: gpuFake{n: 0}, probe: map[string]error{"cudaipc": noCUDA},
			job: map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "PMIX_NAMESPACE": "prterun-x-1@1",
				"GOTUNE_COORDINATOR": "10.0.0.1:7000"}, failed: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var probed []string
			env := doctorEnv{
				host: func() hostinfo.Provenance {
					return hostinfo.Provenance{Host: "node1", CPUModel: "Intel(R) Xeon(R) Gold 6338", Cores: 64, NUMANodes: 2, Kernel: "6.1.0-18-amd64", MemBytes: 256 << 30}
				},
				ptrace:  func() ([]byte, error) { return []byte("1\n"), nil },
				drivers: func() []*transports.Driver { return fakeDrivers },
				probe: func(_ context.Context, name string) error {
					probed = append(probed, name)
					return c.probe[name]
				},
				gpus: func() (gpu.Source, func() error, error) {
					if c.openErr != nil {
						return nil, nil, c.openErr
					}
					return c.src, func() error { return nil }, nil
				},
				job: func() (launchenv.Info, error) {
					return launchenv.FromEnv(func(k string) (string, bool) { v, ok := c.job[k]; return v, ok })
				},
				nccl: func() (string, string, error) {
					if c.nccl != nil {
						return "", "", c.nccl
					}
					return "2.28.9", "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2", nil
				},
				getenv: func(k string) string { return c.job[k] },
				pickIP: func() string { return "10.1.2.3" },
			}
			var b bytes.Buffer
			if failed := doctor(context.Background(), &b, env, 0); failed != c.failed {
				t.Errorf("%d failed checks, want %d", failed, c.failed)
			}
			if got := strings.Join(probed, " "); got != "sm cma cudaipc" {
				t.Errorf("probed %q, want each transport but auto once, sm first", got)
			}
			golden(t, "doctor-"+c.name+".golden", b.Bytes())
		})
	}
}

// Every option set appears once, under its own transport, however many
// transports read it.
func TestDoctorListsEachOptionOnce(t *testing.T) {
	out, e, code := run(t, "doctor")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, e)
	}
	for _, name := range transports.Names() {
		d, _ := transports.Lookup(name)
		for _, s := range d.Options {
			if name == "auto" {
				continue
			}
			for _, o := range s.Options {
				if n := strings.Count(out, "--opt "+o.Key+"="); n != 1 {
					t.Errorf("--opt %s= appears %d times, want once", o.Key, n)
				}
			}
		}
	}
	if !strings.Contains(out, "\nGPUs: ") {
		t.Errorf("no GPU section:\n%s", out)
	}
}

// The ranks line says where --cpus auto puts a pair: in the affinity mask,
// in the cpuset past a launcher's binding, or nowhere.
func TestDoctorCPUs(t *testing.T) {
	for _, c := range []struct {
		name                string
		mask, cpuset, ranks []int
		want                string
	}{
		{"free", []int{0, 1, 2, 3}, []int{0, 1, 2, 3}, []int{0, 1},
			"ranks: a pair on CPUs 0,1 (--cpus auto; this process may run on 0-3)\n"},
		{"bound by mpirun", []int{4}, []int{0, 1, 2, 3, 4, 5, 6, 7}, []int{0, 1},
			"ranks: a pair on CPUs 0,1 of this process's cpuset 0-7 (--cpus auto; the launcher bound this process to 4)\n"},
		{"one CPU", []int{3}, []int{3}, nil,
			"ranks: not pinned: this process may run on CPU 3 only (cpuset 3), so a pair's two ranks on this node share it (give it two: srun --cpus-per-task=2, a wider taskset)\n"},
	} {
		var b strings.Builder
		doctorCPUs(&b, c.mask, c.cpuset, c.ranks)
		if b.String() != c.want {
			t.Errorf("%s: %q\nwant %q", c.name, b.String(), c.want)
		}
	}
}

// The footprint line is for the ranks asked for, one per core unless
// --ranks says otherwise, and sized as sm lays out that many ranks.
func TestDoctorFootprintAtRanks(t *testing.T) {
	host := hostinfo.Provenance{Cores: 64, MemBytes: 256 << 30}
	for _, c := range []struct {
		ranks int
		n     int    // the ranks the size is for
		at    string // how the line names them
	}{
		{0, 64, "at one rank per core (64 ranks)"},
		{16, 16, "at 16 ranks (--ranks; 64 cores)"},
		{128, 128, "at 128 ranks (--ranks; 64 cores)"},
	} {
		var b bytes.Buffer
		doctorFootprint(&b, host, c.ranks)
		d := sm.DefaultParams().ForRanks(c.n)
		want := fmt.Sprintf("sm memory: %s of shared memory %s,", bytesize.Human(int64(d.SegmentBytes(c.n))), c.at)
		if !strings.HasPrefix(b.String(), want) {
			t.Errorf("--ranks %d: %q, want it to open with %q", c.ranks, b.String(), want)
		}
	}
}

// --ranks below 2 has no footprint to give: an error names the flag.
func TestDoctorRefusesFewerThanTwoRanks(t *testing.T) {
	for _, arg := range []string{"--ranks=1", "--ranks=0", "--ranks=-3"} {
		_, e, code := run(t, "doctor", arg)
		if code == 0 || !strings.Contains(e, "--ranks") {
			t.Errorf("doctor %s: exit %d, stderr %q; want a failure naming --ranks", arg, code, e)
		}
	}
}
