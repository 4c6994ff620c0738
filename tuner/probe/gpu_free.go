package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gotune/gotune/bench/gpuload"
	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cudaipc"
	"github.com/gotune/gotune/transports/gpumem"
)

// H2: GPU frees that synchronise with the device, racing allocations on
// other threads while a kernel runs. A kernel on a blocking stream (an
// application's compute kernel) spins until a flag in pinned memory turns
// non-zero. The rank's communication thread allocates and frees message
// buffers, as a receive path recycles them, and only then sets the flag
// (delivers the message the kernel waits for); a second thread allocates
// and frees beside it. If a free waits for running kernels, the thread
// that would release the kernel waits for the kernel: the rank stalls
// until the kernel's bound, and the watchdog catches it first.
//
// The unsafe variant frees with cuMemFree on the calling thread
// (gpu.alloc=plain); the safe one uses the configuration's mode (default
// pool, stream-ordered, as the GPU transport's; or worker: frees on a
// thread of their own; docs/hazards.md, H2, has its verdicts). Each run also
// times allocate+free without and beside the kernel, which the tuner
// weighs among the modes that pass.

const h2Kind = "probe-h2"

// H2's loop: buffers of h2Bytes, h2Iters of them per thread.
const (
	h2Bytes = 1 << 20
	h2Iters = 64
)

type h2Params struct {
	Mode gpumem.Mode   `json:"mode"`
	Spin time.Duration `json:"spin"` // the kernel's bound: past the watchdog's deadline
	GPUs []int         `json:"gpus,omitempty"`
}

// h2Result is what the rank measured: allocate+free per buffer, without
// and beside the kernel.
type h2Result struct {
	IdleNS, LoadedNS int64
	Released         time.Duration // from the loop's start to the flag
}

// H2Mode is the allocator mode an H2 run on opts probes.
func H2Mode(opts transports.Options, unsafe bool) (gpumem.Mode, error) {
	if unsafe {
		return gpumem.Plain, nil
	}
	return gpumem.ModeOption(opts, cudaipc.DefaultAlloc)
}

func init() {
	launch.Register(h2Kind, h2Rank)
	register(&Probe{
		ID:          "H2",
		Hazard:      "GPU frees that synchronise with the device while a kernel runs, racing allocations on other threads (MLX CUDA backend, mlx#2099)",
		Description: "a kernel on a blocking stream waits for a flag that the thread recycling 1 MiB device buffers sets after its frees; a second thread allocates beside it; unsafe: cuMemFree on that thread (gpu.alloc=plain); safe: gpu.alloc (default pool; or worker). Needs a GPU",
		RunOptions:  runH2,
	})
}

func runH2(ctx context.Context, unsafe bool, deadline time.Duration, opts transports.Options) (v Verdict) {
	mode, err := H2Mode(opts, unsafe)
	if err != nil {
		v.Outcome, v.Detail = ProbeFailed, err.Error()
		return v
	}
	if _, err := cuda.DeviceCount(); err != nil {
		v.Outcome, v.Detail = ProbeFailed, "needs a GPU: "+err.Error()
		return v
	}
	par := h2Params{Mode: mode, Spin: min(deadline+10*time.Second, gpuload.MaxDuration)}
	if s, ok := opts[cudaipc.KeyGPUs]; ok {
		if par.GPUs, err = cuda.ParseOrdinals(s); err != nil {
			v.Outcome, v.Detail = ProbeFailed, fmt.Sprintf("option cudaipc.gpus=%q: %v", s, err)
			return v
		}
	}
	params, _ := json.Marshal(par) // plain data always encodes
	res, err := launch.Run(ctx, launch.Job{Kind: h2Kind, Size: 1, Params: params, Stall: deadline}, quiet)
	if v.Outcome, v.Detail, v.Stacks = classify(err); v.Outcome != Passed {
		v.Detail = fmt.Sprintf("gpu.alloc=%s: %s", mode, v.Detail)
		return v
	}
	var m h2Result
	if len(res) > 0 {
		if err := json.Unmarshal(res[0], &m); err != nil {
			v.Outcome, v.Detail = ProbeFailed, fmt.Sprintf("gpu.alloc=%s: rank result: %v", mode, err)
			return v
		}
	}
	v.Measured = map[string]float64{"alloc_free_ns": float64(m.IdleNS), "alloc_free_loaded_ns": float64(m.LoadedNS)}
	v.Detail = fmt.Sprintf("gpu.alloc=%s: the kernel was released %v after the frees began (its bound: %v); allocate+free of %s: %.1f us idle, %.1f us beside the kernel",
		mode, m.Released.Round(time.Microsecond), par.Spin, cuda.Size(h2Bytes), float64(m.IdleNS)/1e3, float64(m.LoadedNS)/1e3)
	return v
}

func h2Rank(r *launch.Rank) (any, error) {
	var par h2Params
	if err := r.Params(&par); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	n, err := cuda.DeviceCount()
	if err != nil {
		return nil, err
	}
	dev, err := cuda.Open(cuda.OrdinalFor(0, n, par.GPUs))
	if err != nil {
		return nil, err
	}
	res, err := h2Run(r, par, dev)
	return res, errors.Join(err, dev.Close())
}

// h2Run holds everything it allocates until it returns, before the
// device's context is released.
func h2Run(r *launch.Rank, par h2Params, dev *cuda.Device) (res h2Result, err error) {
	if err := dev.Bind(); err != nil {
		return res, err
	}
	a, err := gpumem.New(dev, par.Mode)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, a.Close()) }()
	cycle := func(count int, beat func()) (int64, error) {
		start := time.Now()
		for range count {
			b, err := a.Alloc(h2Bytes)
			if err != nil {
				return 0, err
			}
			if err := a.Free(b); err != nil {
				return 0, err
			}
			beat()
		}
		return time.Since(start).Nanoseconds() / int64(count), nil
	}
	if res.IdleNS, err = cycle(h2Iters, r.Beat); err != nil {
		return res, err
	}

	flagBuf, err := dev.Alloc(cuda.MemPinned, 8)
	if err != nil {
		return res, err
	}
	defer flagBuf.Free()
	flag := (*uint32)(unsafe.Pointer(unsafe.SliceData(flagBuf.Bytes())))
	atomic.StoreUint32(flag, 0)
	blocking, stop, err := spinKernel(dev, flagBuf.Ptr(), par.Spin)
	if err != nil {
		return res, err
	}
	defer stop()
	// Whatever happens below, the kernel is released before the deferred
	// frees run.
	defer func() {
		atomic.StoreUint32(flag, 1)
		err = errors.Join(err, blocking.Synchronize())
	}()

	var wg sync.WaitGroup
	var raceErr error
	wg.Go(func() { // the racing thread
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if raceErr = dev.Bind(); raceErr == nil {
			_, raceErr = cycle(h2Iters, func() {})
		}
	})
	start := time.Now()
	res.LoadedNS, err = cycle(h2Iters, r.Beat)
	res.Released = time.Since(start)
	atomic.StoreUint32(flag, 1) // the message the kernel waits for
	wg.Wait()
	if err != nil || raceErr != nil {
		return res, errors.Join(err, raceErr)
	}
	if err := blocking.Synchronize(); err != nil {
		return res, err
	}
	if res.Released >= par.Spin {
		return res, fmt.Errorf("%s: the frees ended only when the kernel's %v bound ran out (%v)", couplingMarker, par.Spin, res.Released)
	}
	return res, nil
}

// spinKernel launches gpuload's kernel on dev, on a new blocking stream as
// an application's compute kernel runs, spinning until the word at flag
// turns non-zero or spin runs out. stop, once the kernel has ended,
// destroys the stream and unloads the kernel.
func spinKernel(dev *cuda.Device, flag uintptr, spin time.Duration) (blocking *cuda.Stream, stop func(), err error) {
	k, err := gpuload.Load(dev)
	if err != nil {
		return nil, nil, err
	}
	if blocking, err = cuda.NewStream(cuda.StreamBlocking); err != nil {
		k.Close()
		return nil, nil, err
	}
	stop = func() {
		blocking.Destroy()
		k.Close()
	}
	if err := k.Launch(blocking, gpuload.Spec{Fraction: gpuload.Partial, Duration: spin, Flag: flag}); err != nil {
		stop()
		return nil, nil, err
	}
	return blocking, stop, nil
}
