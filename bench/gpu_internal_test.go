package bench

import (
	"context"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cudaipc"
	"github.com/gotune/gotune/transports/sm"
)

// forbidCUDAEnv, set in the environment of a test's rank processes, makes
// any path of theirs into the driver fail the run.
const forbidCUDAEnv = "GOTUNE_TEST_FORBID_CUDA"

var errCUDATouched = errors.New("test: a run whose ranks need no GPU reached the CUDA driver")

func init() {
	if os.Getenv(forbidCUDAEnv) != "" {
		cudaLoad = func() error { return errCUDATouched }
	}
}

// stubCUDALoad replaces cudaLoad for one test and counts the calls.
func stubCUDALoad(t *testing.T, err error) *int {
	t.Helper()
	saved := cudaLoad
	t.Cleanup(func() { cudaLoad = saved })
	calls := new(int)
	cudaLoad = func() error { *calls++; return err }
	return calls
}

// Host buffers and no GPU list: neither the launcher nor either rank loads
// the driver, whatever the pattern.
func TestHostOnlyRunsNeverTouchCUDA(t *testing.T) {
	calls := stubCUDALoad(t, errCUDATouched)
	t.Setenv(forbidCUDAEnv, "1") // the ranks' own hook
	for _, spec := range []Spec{
		{Transport: "sm", Pattern: Latency, Sizes: []int{8}, Reps: 1, Iters: 4, Warmup: 1, Validate: true},
		{Transport: "cma", Pattern: Bandwidth, Sizes: []int{0, 64 << 10}, Reps: 1, Iters: 2, Warmup: 1, Window: 4, Validate: true,
			Mem: []cuda.MemKind{cuda.MemHost, cuda.MemHost}},
		{Transport: "sm", Pattern: AllocChurn, Sizes: []int{4096}, Reps: 1, Iters: 2, Warmup: 1, Window: 2, Mem: []cuda.MemKind{cuda.MemHost}},
	} {
		res, err := Run(context.Background(), spec, 0, launch.Hooks{})
		if err != nil {
			t.Fatalf("%s %s: %v", spec.Transport, spec.Pattern, err)
		}
		if res.Spec.Mem != nil || res.Spec.UsesGPU() || len(res.Provenance.Ranks) != 0 {
			t.Errorf("%s %s: a host run recorded GPU fields: %+v, ranks %+v", spec.Transport, spec.Pattern, res.Spec, res.Provenance.Ranks)
		}
		if len(res.Points) != len(spec.Sizes) {
			t.Errorf("%s %s: %d points", spec.Transport, spec.Pattern, len(res.Points))
		}
	}
	// The in-process entry points too.
	s := Spec{Transport: "sm", Pattern: Bandwidth, Sizes: []int{8}}
	if err := checkGPUs(&s); err != nil {
		t.Error(err)
	}
	if g, err := openRankGPU(&s, 1); g != nil || err != nil {
		t.Errorf("openRankGPU of a host spec: %v, %v", g, err)
	}
	if *calls != 0 {
		t.Errorf("the launcher called cuda.Load %d times", *calls)
	}
}

// Without a usable driver, a run that asks for GPUs fails before any rank
// starts, naming what asked, with the driver's reason, matching
// ErrNotSupported. The driver's absence is simulated, so this runs on GPU
// machines too (TestRunWithoutDriver is the real one).
func TestNoDriverFailsBeforeRanksStart(t *testing.T) {
	calls := stubCUDALoad(t, sys.NotSupported("CUDA driver", "libcuda.so.1 not found", nil))
	const reason = "CUDA not available: CUDA driver: not supported: libcuda.so.1 not found"
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{Mem: []cuda.MemKind{cuda.MemDevice}}, "bench: --mem device: " + reason},
		{Spec{Mem: []cuda.MemKind{cuda.MemHost, cuda.MemManaged}}, "bench: --mem managed: " + reason},
		{Spec{Mem: []cuda.MemKind{cuda.MemPinned, cuda.MemDevice}, GPULoad: 1}, "bench: --mem pinned: " + reason},
		{Spec{GPUs: []int{0, 1}, GPULoad: 0.5}, "bench: --gpus 0,1: " + reason},
	} {
		c.spec.Transport, c.spec.Pattern, c.spec.Sizes = "cudaipc", Bandwidth, []int{8}
		started := false
		_, err := Run(context.Background(), c.spec, 0, launch.Hooks{Started: func([]int) { started = true }})
		if err == nil || err.Error() != c.want || !errors.Is(err, cuda.ErrNotSupported) {
			t.Errorf("%+v: got %v, want %q matching ErrNotSupported", c.spec, err, c.want)
		}
		if started {
			t.Errorf("%+v: ranks were started", c.spec)
		}
	}
	if *calls == 0 {
		t.Error("cuda.Load was never asked")
	}
	// A rank reports the same, naming itself.
	s := Spec{Transport: "sm", Pattern: Latency, Sizes: []int{8}, Mem: []cuda.MemKind{cuda.MemHost, cuda.MemDevice}}
	if _, err := openRankGPU(&s, 0); err == nil || !strings.HasPrefix(err.Error(), "rank 0: --mem device: "+reason) || !errors.Is(err, cuda.ErrNotSupported) {
		t.Errorf("openRankGPU: %v", err)
	}
}

func TestGPUOptions(t *testing.T) {
	for _, c := range []struct {
		name     string
		opts     transports.Options
		gpus     []int
		known    bool
		wantOpts transports.Options
		wantGPUs []int
		err      string
	}{
		{name: "nothing", known: true},
		{name: "list passed on", gpus: []int{1, 0}, known: true,
			wantOpts: transports.Options{cudaipc.KeyGPUs: "1,0"}, wantGPUs: []int{1, 0}},
		{name: "list next to other options", opts: transports.Options{sm.KeyDepth: "8"}, gpus: []int{2}, known: true,
			wantOpts: transports.Options{sm.KeyDepth: "8", cudaipc.KeyGPUs: "2"}, wantGPUs: []int{2}},
		{name: "option gives the list", opts: transports.Options{cudaipc.KeyGPUs: " 1, 0"}, known: true,
			wantOpts: transports.Options{cudaipc.KeyGPUs: " 1, 0"}, wantGPUs: []int{1, 0}},
		{name: "both, agreeing", opts: transports.Options{cudaipc.KeyGPUs: "0,1"}, gpus: []int{0, 1}, known: true,
			wantOpts: transports.Options{cudaipc.KeyGPUs: "0,1"}, wantGPUs: []int{0, 1}},
		{name: "both, disagreeing", opts: transports.Options{cudaipc.KeyGPUs: "1,0"}, gpus: []int{0, 1}, known: true,
			err: "--gpus 0,1 disagrees with --opt cudaipc.gpus=1,0"},
		{name: "bad option", opts: transports.Options{cudaipc.KeyGPUs: "x"}, known: true, err: `cudaipc.gpus="x"`},
		{name: "no transport takes the option", gpus: []int{0}, known: false, wantGPUs: []int{0}},
	} {
		in := transports.Options(nil)
		if c.opts != nil {
			in = transports.Options{}
			for k, v := range c.opts {
				in[k] = v
			}
		}
		opts, gpus, err := gpuOptions(in, c.gpus, c.known)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.err)
			}
			continue
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if !reflect.DeepEqual(opts, c.wantOpts) || !reflect.DeepEqual(gpus, c.wantGPUs) {
			t.Errorf("%s: got %v %v, want %v %v", c.name, opts, gpus, c.wantOpts, c.wantGPUs)
		}
		if !reflect.DeepEqual(in, c.opts) {
			t.Errorf("%s: the caller's options changed to %v", c.name, in)
		}
	}
}

func TestKernelName(t *testing.T) {
	for f, want := range map[float64]string{0: "none", 0.5: "partial", 1: "full", 0.3: "0.3", 0.25: "0.25"} {
		if got := KernelName(f); got != want {
			t.Errorf("KernelName(%v) = %q, want %q", f, got, want)
		}
	}
}

// Every rank needs a device among those present, and a load kernel beside
// device buffers is refused where two ranks share a GPU; host-visible
// buffers and a GPU each are not.
func TestRanksGPUs(t *testing.T) {
	D, P, H, MD := cuda.MemDevice, cuda.MemPinned, cuda.MemHost, cuda.MemManagedDevice
	for _, c := range []struct {
		name    string
		mem     []cuda.MemKind
		gpus    []int
		load    float64
		devices int
		err     string
	}{
		{"device buffers and a load on one GPU", []cuda.MemKind{D, D}, nil, 0.5, 1, "--kernel partial with device buffers: ranks 0 and 1 share GPU 0 (1 CUDA device(s))"},
		{"one device side is enough", []cuda.MemKind{P, D}, []int{1}, 0.25, 2, "--kernel 0.25 with device buffers: ranks 0 and 1 share GPU 1 (2 CUDA device(s))"},
		{"a GPU each", []cuda.MemKind{D, D}, nil, 0.5, 2, ""},
		{"no load", []cuda.MemKind{D, D}, nil, 0, 1, ""},
		{"pinned buffers", []cuda.MemKind{P, P}, nil, 1, 1, ""},
		{"managed buffers", []cuda.MemKind{H, MD}, nil, 1, 1, ""},
		{"host buffers and a GPU list", []cuda.MemKind{H, H}, []int{0}, 0.5, 1, ""},
		{"a device that is not there", []cuda.MemKind{D, D}, []int{0, 5}, 0, 2, "rank 1's device 5 does not exist"},
	} {
		s := Spec{Transport: "cudaipc", Pattern: Latency, Sizes: []int{8}, Mem: c.mem, GPUs: c.gpus, GPULoad: c.load}
		err := ranksGPUs(&s, c.devices)
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
		}
	}
}
