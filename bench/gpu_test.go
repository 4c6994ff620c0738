package bench_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cudaipc"
	"github.com/gotune/gotune/transports/sm"
)

const (
	H  = cuda.MemHost
	P  = cuda.MemPinned
	D  = cuda.MemDevice
	M  = cuda.MemManaged
	MD = cuda.MemManagedDevice
	MH = cuda.MemManagedHost
)

func TestParseMem(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []cuda.MemKind
		err  string
	}{
		{in: "host", want: []cuda.MemKind{H, H}},
		{in: "H", want: []cuda.MemKind{H, H}},
		{in: "pinned", want: []cuda.MemKind{P, P}},
		{in: "device", want: []cuda.MemKind{D, D}},
		{in: "D", want: []cuda.MemKind{D, D}},
		{in: "managed", want: []cuda.MemKind{M, M}},
		{in: "H,D", want: []cuda.MemKind{H, D}},
		{in: "D,H", want: []cuda.MemKind{D, H}},
		{in: "MD,MH", want: []cuda.MemKind{MD, MH}},
		{in: "managed-device,managed-host", want: []cuda.MemKind{MD, MH}},
		{in: " device , Pinned ", want: []cuda.MemKind{D, P}},
		{in: "cuda,m", want: []cuda.MemKind{D, M}},
		{in: "", err: `unknown memory kind ""`},
		{in: "gpu", err: `unknown memory kind "gpu"`},
		{in: "H,", err: `unknown memory kind ""`},
		{in: "H,D,H", err: "want KIND or SRC,DST"},
		{in: "pool", err: "use device"},
		{in: "H,async", err: "use device"},
	} {
		got, err := bench.ParseMem(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseMem(%q) = %v, %v; want an error containing %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseMem(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestParseGPUs(t *testing.T) {
	cases := map[string]string{
		"": "[]", "  ": "[]", "0": "[0]", "0,1": "[0 1]", " 1, 0 ": "[1 0]", "3,3,2": "[3 3 2]",
		"x": "error", "0,,1": "error", "-1": "error", "1,": "error", "0.5": "error",
	}
	checkParses(t, "ParseGPUs", bench.ParseGPUs, cases)
	for in := range cases {
		if got, err := bench.ParseGPUs(in); err == nil && len(got) > 0 {
			if back, _ := bench.ParseGPUs(bench.FormatGPUs(got)); !reflect.DeepEqual(back, got) {
				t.Errorf("FormatGPUs(%v) = %q does not read back", got, bench.FormatGPUs(got))
			}
		}
	}
}

func TestParseKernel(t *testing.T) {
	for in, want := range map[string]float64{"none": 0, "partial": 0.5, "full": 1, "0.3": 0.3, "25%": 0.25, "Full": 1} {
		if got, err := bench.ParseKernel(in); err != nil || got != want {
			t.Errorf("ParseKernel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "2", "-0.5", "150%"} {
		if got, err := bench.ParseKernel(bad); err == nil {
			t.Errorf("ParseKernel(%q) = %v, want an error", bad, got)
		}
	}
}

// The rank → GPU rule, the same as the cudaipc transport's.
func TestGPUFor(t *testing.T) {
	for _, c := range []struct {
		rank  int
		gpus  []int
		count int
		want  int
		err   string
	}{
		{rank: 0, count: 1, want: 0},
		{rank: 1, count: 1, want: 0}, // both ranks on the only GPU
		{rank: 1, count: 2, want: 1},
		{rank: 3, count: 2, want: 1},
		{rank: 2, count: 8, want: 2},
		{rank: 0, gpus: []int{1, 0}, count: 2, want: 1},
		{rank: 1, gpus: []int{1, 0}, count: 2, want: 0},
		{rank: 1, gpus: []int{3}, count: 4, want: 3}, // one entry: every rank
		{rank: 2, gpus: []int{0, 1}, count: 2, want: 0},
		{rank: 1, gpus: []int{0, 5}, count: 2, err: "rank 1's device 5 does not exist (2 CUDA device(s))"},
		{rank: 0, count: 0, err: "no CUDA device"},
		{rank: 0, gpus: []int{0}, count: 0, err: "no CUDA device"},
	} {
		got, err := bench.GPUFor(c.rank, c.gpus, c.count)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("GPUFor(%d, %v, %d) = %d, %v; want an error containing %q", c.rank, c.gpus, c.count, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("GPUFor(%d, %v, %d) = %d, %v; want %d", c.rank, c.gpus, c.count, got, err, c.want)
		}
	}
}

func TestSpecGPUFields(t *testing.T) {
	base := func(mod func(*bench.Spec)) bench.Spec {
		s := bench.Spec{Transport: "cudaipc", Pattern: bench.Bandwidth, Sizes: []int{8}}
		mod(&s)
		return s
	}
	for _, c := range []struct {
		name  string
		spec  bench.Spec
		check func(bench.Spec) string
		err   string
	}{
		{name: "one kind is both ranks'", spec: base(func(s *bench.Spec) { s.Mem = []cuda.MemKind{D} }),
			check: func(s bench.Spec) string {
				if !reflect.DeepEqual(s.Mem, []cuda.MemKind{D, D}) || s.MemKind(0) != D || s.MemKind(1) != D || !s.UsesGPU() {
					return fmt.Sprintf("mem %v", s.Mem)
				}
				return ""
			}},
		{name: "host on both is the old spec", spec: base(func(s *bench.Spec) { s.Mem = []cuda.MemKind{H, H} }),
			check: func(s bench.Spec) string {
				if s.Mem != nil || s.UsesGPU() || s.MemKind(1) != H {
					return fmt.Sprintf("mem %v", s.Mem)
				}
				return ""
			}},
		{name: "host ranks with a GPU list keep their kinds", spec: base(func(s *bench.Spec) { s.Mem, s.GPUs, s.GPULoad = []cuda.MemKind{H}, []int{0}, 1 }),
			check: func(s bench.Spec) string {
				if !reflect.DeepEqual(s.Mem, []cuda.MemKind{H, H}) || !s.UsesGPU() || s.Options[cudaipc.KeyGPUs] != "0" {
					return fmt.Sprintf("mem %v, options %v", s.Mem, s.Options)
				}
				return ""
			}},
		{name: "SRC,DST", spec: base(func(s *bench.Spec) { s.Mem = []cuda.MemKind{H, D} }),
			check: func(s bench.Spec) string {
				if s.MemKind(0) != H || s.MemKind(1) != D || !s.UsesGPU() {
					return fmt.Sprintf("mem %v", s.Mem)
				}
				return ""
			}},
		{name: "the option's list is the bench's", spec: base(func(s *bench.Spec) { s.Options = transports.Options{cudaipc.KeyGPUs: "1,0"} }),
			check: func(s bench.Spec) string {
				if !reflect.DeepEqual(s.GPUs, []int{1, 0}) {
					return fmt.Sprintf("gpus %v", s.GPUs)
				}
				return ""
			}},
		{name: "a load's bound defaults", spec: base(func(s *bench.Spec) { s.Mem, s.GPULoad = []cuda.MemKind{D}, 1 }),
			check: func(s bench.Spec) string {
				if s.GPULoadBound != bench.LoadBound {
					return fmt.Sprintf("bound %v, want %v", s.GPULoadBound, bench.LoadBound)
				}
				return ""
			}},
		{name: "a load's bound is kept", spec: base(func(s *bench.Spec) { s.Mem, s.GPULoad, s.GPULoadBound = []cuda.MemKind{D}, 1, 2*time.Second }),
			check: func(s bench.Spec) string {
				if s.GPULoadBound != 2*time.Second {
					return fmt.Sprintf("bound %v", s.GPULoadBound)
				}
				return ""
			}},
		{name: "bound without a load", spec: base(func(s *bench.Spec) { s.Mem, s.GPULoadBound = []cuda.MemKind{D}, time.Second }),
			err: "--kernel-bound 1s: bounds the load kernel, and there is none"},
		{name: "bound too long", spec: base(func(s *bench.Spec) { s.Mem, s.GPULoad, s.GPULoadBound = []cuda.MemKind{D}, 1, time.Hour }),
			err: "--kernel-bound 1h0m0s"},
		{name: "kernel without a GPU", spec: base(func(s *bench.Spec) { s.GPULoad = 0.5 }),
			err: "--kernel partial: the load kernel runs on the ranks' GPUs, and with --mem host on both ranks and no --gpus"},
		{name: "kernel out of range", spec: base(func(s *bench.Spec) { s.Mem, s.GPULoad = []cuda.MemKind{D}, 1.5 }), err: "--kernel 1.5"},
		{name: "three kinds", spec: base(func(s *bench.Spec) { s.Mem = []cuda.MemKind{H, D, H} }), err: "--mem: 3 memory kinds"},
		{name: "pool", spec: base(func(s *bench.Spec) { s.Mem = []cuda.MemKind{cuda.MemPool} }), err: "--mem: pool is not a message buffer kind"},
		{name: "negative GPU", spec: base(func(s *bench.Spec) { s.GPUs = []int{-1} }), err: "--gpus -1"},
		{name: "alloc pattern on the GPU", spec: base(func(s *bench.Spec) { s.Pattern, s.Mem = bench.AllocChurn, []cuda.MemKind{H, P} }),
			err: "--mem pinned: the alloc pattern allocates host buffers"},
		{name: "disagreeing lists", spec: base(func(s *bench.Spec) {
			s.GPUs, s.Options = []int{0, 1}, transports.Options{cudaipc.KeyGPUs: "1,0"}
		}), err: "disagrees"},
	} {
		err := c.spec.Normalize()
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if msg := c.check(c.spec); msg != "" {
			t.Errorf("%s: %s", c.name, msg)
		}
	}
}

// Normalize passes the GPU list to the transport in a copy of the options.
func TestSpecGPUListGoesToTheTransport(t *testing.T) {
	opts := transports.Options{sm.KeyDepth: "8"}
	s := bench.Spec{Transport: "sm", Pattern: bench.Latency, Sizes: []int{8}, Options: opts, GPUs: []int{1, 0}}
	if err := s.Normalize(); err != nil {
		t.Fatal(err)
	}
	if s.Options[cudaipc.KeyGPUs] != "1,0" || s.Options[sm.KeyDepth] != "8" {
		t.Errorf("options %v", s.Options)
	}
	if _, ok := opts[cudaipc.KeyGPUs]; ok {
		t.Errorf("the caller's options were changed: %v", opts)
	}
}

// The real thing on a machine without the driver (skipped where there is
// one: TestNoDriverFailsBeforeRanksStart simulates it everywhere).
func TestRunWithoutDriver(t *testing.T) {
	if err := cuda.Load(); err == nil {
		t.Skip("a CUDA driver is present here")
	}
	spec := bench.Spec{Transport: "cudaipc", Pattern: bench.Latency, Sizes: []int{8}, Mem: []cuda.MemKind{D}}
	started := false
	_, err := bench.Run(context.Background(), spec, 0, launch.Hooks{Started: func([]int) { started = true }})
	if err == nil || !strings.HasPrefix(err.Error(), "bench: --mem device: CUDA not available: ") || !errors.Is(err, cuda.ErrNotSupported) {
		t.Fatalf("got %v, want bench: --mem device: CUDA not available: ... matching ErrNotSupported", err)
	}
	if started {
		t.Error("ranks were started")
	}
}

// needGPU skips without a driver (or fails, with GOTUNE_REQUIRE=cuda).
func needGPU(t *testing.T) {
	t.Helper()
	testutil.SkipUnless(t, "cuda", cuda.Load())
}

// oneGPU says whether the machine has a single GPU, which both ranks then
// share.
func oneGPU(t *testing.T) bool {
	t.Helper()
	n, err := cuda.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// refusedOnOneGPU checks that spec, a load kernel beside device buffers,
// is refused before any rank starts where both ranks share the GPU.
func refusedOnOneGPU(t *testing.T, spec bench.Spec) {
	t.Helper()
	started := false
	_, err := bench.Run(context.Background(), spec, 0, launch.Hooks{Started: func([]int) { started = true }})
	if err == nil || !strings.Contains(err.Error(), "ranks 0 and 1 share GPU 0 (1 CUDA device(s))") || started {
		t.Errorf("on one GPU: error %v, ranks started %v; want a refusal naming the shared GPU before any rank starts", err, started)
	}
}

// relayRefusedOnOneGPU checks that spec, with cudaipc.relay, fails where
// both ranks share the GPU, naming the option and the shared GPU: two
// resident relay blocks in two contexts would time-slice it.
func relayRefusedOnOneGPU(t *testing.T, spec bench.Spec) {
	t.Helper()
	_, err := bench.Run(context.Background(), spec, 0, launch.Hooks{})
	if err == nil || !strings.Contains(err.Error(), cudaipc.KeyRelay) || !strings.Contains(err.Error(), "ranks 0 and 1 share GPU 0") {
		t.Errorf("on one GPU: error %v; want a refusal naming %s and the shared GPU", err, cudaipc.KeyRelay)
	}
}

// needCUDAIPC skips the test without a GPU or without cudaipc built in.
func needCUDAIPC(t *testing.T) {
	t.Helper()
	needGPU(t)
	if _, err := transports.Lookup("cudaipc"); err != nil {
		t.Skip(err)
	}
}

func checkGPURun(t *testing.T, spec bench.Spec, res bench.Result) {
	t.Helper()
	checkPoints(t, spec, res.Points)
	for _, p := range res.Points {
		for _, w := range p.Warnings {
			if !strings.Contains(w, "samples for confidence interval") { // 2 reps: expected
				t.Errorf("size %d: warning %q", p.Size, w)
			}
		}
	}
	if len(res.Provenance.Ranks) != 2 {
		t.Fatalf("provenance ranks %+v, want both", res.Provenance.Ranks)
	}
	for r, ri := range res.Provenance.Ranks {
		if ri.Rank != r || ri.Mem != spec.MemKind(r).String() || ri.GPU == nil || ri.GPU.Name == "" || ri.GPU.PCIBusID == "" {
			t.Errorf("rank %d provenance %+v (gpu %+v)", r, ri, ri.GPU)
		}
	}
	t.Logf("%s %v: rank 0 %+v, rank 1 %+v", spec.Pattern, spec.Mem, *res.Provenance.Ranks[0].GPU, *res.Provenance.Ranks[1].GPU)
}

// Host-visible GPU kinds over the host transport, validated, with and
// without the load kernel: the CPU may touch pinned and managed memory.
func TestGPUHostVisibleBuffersAcrossProcesses(t *testing.T) {
	needGPU(t)
	for _, c := range []struct {
		mem  []cuda.MemKind
		load float64
	}{
		{[]cuda.MemKind{P, P}, 0},
		{[]cuda.MemKind{P, M}, 0.5},
		{[]cuda.MemKind{H, MD}, 1},
		{[]cuda.MemKind{H, H}, 0.5}, // host buffers, a GPU per rank from --gpus, for the load
	} {
		for _, pat := range []bench.Pattern{bench.Latency, bench.Bandwidth, bench.BiBandwidth} {
			t.Run(fmt.Sprintf("%v/%v/%s", c.mem, c.load, pat), func(t *testing.T) {
				spec := bench.Spec{Transport: "sm", Pattern: pat, Sizes: []int{8, 64 << 10}, Reps: 2, Iters: 10, Warmup: 1, Window: 4,
					Validate: true, Mem: c.mem, GPULoad: c.load}
				if c.mem[0] == H && c.mem[1] == H {
					spec.GPUs = []int{0}
				}
				res := mustRun(t, spec)
				checkGPURun(t, spec, res)
				if res.Spec.GPULoad != c.load {
					t.Errorf("recorded load %v, want %v", res.Spec.GPULoad, c.load)
				}
			})
		}
	}
}

// Device memory over the GPU transport: what OSU's D D, H D, MD D and MH MD
// measure, validated through staging, with and without the load kernel; the SM copy
// (sizes off the 16-byte vector, so its tail moves too); and an IPC mapping
// cache of 2 under 5 buffers in turn, so every rendezvous opens a mapping
// and closes the oldest; and single copies completed by stream
// synchronization or a flag in shared memory instead of IPC events.
func TestGPUDeviceBuffersOverCUDAIPC(t *testing.T) {
	needCUDAIPC(t)
	smCopy := transports.Options{cudaipc.KeyCopy: "sm"}
	syncDone := transports.Options{cudaipc.KeyCompletion: "sync"}
	flagDone := transports.Options{cudaipc.KeyCompletion: "flag"}
	relayed := transports.Options{cudaipc.KeyRelay: "64K"}
	relayedFlag := transports.Options{cudaipc.KeyRelay: "64K", cudaipc.KeyCompletion: "flag", cudaipc.KeyCopy: "sm"}
	for _, c := range []struct {
		name    string
		mem     []cuda.MemKind
		load    float64
		opts    transports.Options
		buffers int
	}{
		{"", []cuda.MemKind{D, D}, 0, nil, 0},
		{"", []cuda.MemKind{D, D}, 0.5, nil, 0},
		{"", []cuda.MemKind{H, D}, 0, nil, 0},
		{"", []cuda.MemKind{D, P}, 0.5, nil, 0},
		{"", []cuda.MemKind{P, D}, 0, nil, 0},   // 1 MiB: pushed from pinned memory by one DMA
		{"", []cuda.MemKind{P, D}, 0.5, nil, 0}, // beside a kernel
		{"", []cuda.MemKind{P, P}, 0, nil, 0},   // 1 MiB: offered, streamed through the fragments
		{"sm-copy", []cuda.MemKind{D, D}, 0, smCopy, 0},
		{"sm-copy", []cuda.MemKind{D, D}, 0.5, smCopy, 0},
		{"sm-copy", []cuda.MemKind{D, P}, 0, smCopy, 0}, // host side: the copy engines
		{"cache2", []cuda.MemKind{D, D}, 0, transports.Options{cudaipc.KeyCache: "2"}, 5},
		{"managed", []cuda.MemKind{MD, D}, 0, nil, 0}, // managed memory goes as pageable host: staged
		{"managed", []cuda.MemKind{D, MH}, 0.5, nil, 0},
		{"managed", []cuda.MemKind{MH, MD}, 0, nil, 0},
		{"sync-completion", []cuda.MemKind{D, D}, 0, syncDone, 0},
		{"sync-completion", []cuda.MemKind{P, D}, 0.5, syncDone, 0},
		{"flag-completion", []cuda.MemKind{D, D}, 0, flagDone, 0},
		{"flag-completion", []cuda.MemKind{D, D}, 0.5, flagDone, 0},
		{"flag-completion", []cuda.MemKind{P, D}, 0, flagDone, 0},
		{"flag-completion", []cuda.MemKind{D, P}, 0, flagDone, 0},
		{"relay", []cuda.MemKind{D, D}, 0, relayed, 0}, // 8 B and 64 KiB by the relay, 1 MiB by the stream
		{"relay", []cuda.MemKind{D, D}, 0.5, relayed, 0},
		{"relay", []cuda.MemKind{P, D}, 0, relayed, 0}, // host side: the stream
		{"relay", []cuda.MemKind{D, D}, 0, relayedFlag, 0},
		{"relay", []cuda.MemKind{D, D}, 0, relayed.With(transports.Options{cudaipc.KeyCache: "2"}), 5}, // mappings closed under relayed copies
	} {
		for _, pat := range []bench.Pattern{bench.Latency, bench.Bandwidth, bench.BiBandwidth} {
			t.Run(fmt.Sprintf("%s%v/%v/%s", c.name, c.mem, c.load, pat), func(t *testing.T) {
				sizes := []int{8, 64 << 10, 1 << 20}
				if c.name == "sm-copy" {
					sizes = []int{8, 4099, 1<<20 + 7}
				}
				if pat == bench.Latency {
					sizes = append([]int{0}, sizes...) // a 1-byte allocation behind an empty view
				}
				window := 4
				if c.name == "relay" {
					window = 40 // past the relay's ring: the rest of a window takes the stream
				}
				spec := bench.Spec{Transport: "cudaipc", Options: c.opts, Pattern: pat, Sizes: sizes, Reps: 2, Iters: 10, Warmup: 1, Window: window,
					Validate: true, Buffers: c.buffers, Mem: c.mem, GPULoad: c.load}
				if c.load > 0 && slices.Contains(c.mem, D) && oneGPU(t) {
					refusedOnOneGPU(t, spec)
					return
				}
				if c.name == "relay" && oneGPU(t) {
					relayRefusedOnOneGPU(t, spec)
					return
				}
				res := mustRun(t, spec)
				checkGPURun(t, spec, res)
			})
		}
	}
}

// More device buffers than a rank's handle table holds (a ring of 256
// entries), taken in turn and validated: the oldest entries are
// overwritten and their allocations exported again when they come round.
func TestGPUHandleRingWraps(t *testing.T) {
	needCUDAIPC(t)
	// Message k of a pass takes buffer k mod 300: a latency pass of 300
	// iterations, or a bandwidth pass of 100 windows of 4, uses all 300.
	for _, c := range []struct {
		pat   bench.Pattern
		iters int
	}{{bench.Latency, 300}, {bench.Bandwidth, 100}} {
		t.Run(string(c.pat), func(t *testing.T) {
			spec := bench.Spec{Transport: "cudaipc", Pattern: c.pat, Sizes: []int{8, 64 << 10}, Reps: 2, Iters: c.iters, Warmup: 1, Window: 4,
				Validate: true, Buffers: 300, Mem: []cuda.MemKind{D, D}}
			res := mustRun(t, spec)
			checkGPURun(t, spec, res)
		})
	}
}

// With every SM held by the load kernel (bound 1 s), each loaded point
// records the longest single step of its passes, warm-up included, and
// calls the path stalled exactly when that step reached half the bound.
// Staging on the legacy stream (hazard H4's coupling) and the SM copy
// (which needs a free SM) must wait for the kernel to end; the copy
// engines, reached from a non-blocking stream, must not.
func TestGPUFullLoadMarksStalledPaths(t *testing.T) {
	needCUDAIPC(t)
	for _, c := range []struct {
		name   string
		mem    []cuda.MemKind
		opts   transports.Options
		stalls bool
	}{
		{"staged-sync", []cuda.MemKind{D, D}, transports.Options{cudaipc.KeyThreshold: "1G", cudaipc.KeyStaging: "sync"}, true},
		{"staged-async", []cuda.MemKind{D, D}, transports.Options{cudaipc.KeyThreshold: "1G"}, false},
		{"ipc", []cuda.MemKind{D, D}, nil, false},
		{"ipc-sync-completion", []cuda.MemKind{D, D}, transports.Options{cudaipc.KeyCompletion: "sync"}, false},
		{"ipc-flag-completion", []cuda.MemKind{D, D}, transports.Options{cudaipc.KeyCompletion: "flag"}, false},
		{"ipc-sm-copy", []cuda.MemKind{D, D}, transports.Options{cudaipc.KeyCopy: "sm"}, true},
		{"pinned-push", []cuda.MemKind{P, D}, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := bench.Spec{Transport: "cudaipc", Options: c.opts, Pattern: bench.Latency, Sizes: []int{8, 1 << 20},
				Reps: 2, Iters: 10, Warmup: 1, Mem: c.mem, GPULoad: 1, GPULoadBound: time.Second}
			if oneGPU(t) {
				refusedOnOneGPU(t, spec)
				return
			}
			res := mustRun(t, spec)
			for _, p := range res.Points {
				t.Logf("%s %d B: median %.1f us, longest step %v, stalled %v, passes late %d of %d",
					c.name, p.Size, p.Median, p.LoadWait, p.Stalled(), p.LoadLate, len(p.Samples)+1)
				if p.LoadWait <= 0 {
					t.Errorf("%d B: no longest wait recorded for a loaded point", p.Size)
				}
				if p.Stalled() != (p.LoadWait >= time.Second/2) {
					t.Errorf("%d B: stalled %v with a longest step of %v (bound 1s)", p.Size, p.Stalled(), p.LoadWait)
				}
				if p.Stalled() != c.stalls {
					t.Errorf("%d B: stalled %v beside a full-GPU kernel, want %v (longest step %v)", p.Size, p.Stalled(), c.stalls, p.LoadWait)
				}
			}
		})
	}
}
