package probe

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/gotune/gotune/bench/gpuload"
	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cudaipc"
)

// H4: an eager device message staged through a synchronous copy that
// queues behind a running kernel, while the kernel waits for that message.
// Rank 1 launches a kernel on a blocking stream (as an application's
// compute kernel runs) that spins until a flag in device memory turns
// non-zero, then receives rank 0's eight-byte device message into that
// flag. Staged on a non-blocking stream (cudaipc.staging=async), the copy
// runs beside the kernel and releases it at once. Staged on the legacy
// stream (cudaipc.staging=sync, the unsafe variant), the copy waits for the
// kernel, which waits for the copy: the rank stalls until the kernel's own
// bound, and the watchdog catches it first.

const h4Kind = "probe-h4"

type h4Params struct {
	Unsafe bool               `json:"unsafe"`
	Spin   time.Duration      `json:"spin"` // the kernel's bound: past the watchdog's deadline
	Base   transports.Options `json:"base,omitempty"`
}

func h4Options(base transports.Options, unsafe bool) transports.Options {
	o := cudaipc.Polling(base)      // a copy to change
	o[cudaipc.KeyThreshold] = "64K" // the 8-byte message is staged, not single-copied
	if o[cudaipc.KeyStaging] == "" {
		o[cudaipc.KeyStaging] = "async" // the safe form of a configuration that does not say
	}
	if unsafe {
		o[cudaipc.KeyStaging] = "sync"
	}
	return o
}

func init() {
	launch.Register(h4Kind, h4Rank)
	register(&Probe{
		ID:          "H4",
		Hazard:      "eager device message staged by a synchronous copy that queues behind a kernel waiting for it (MVAPICH2 eager path with blocking cudaMemcpy)",
		Description: "a kernel on a blocking stream spins until an 8-byte device message lands in its flag; unsafe: staging on the legacy stream (cudaipc.staging=sync). Needs a GPU",
		RunOptions:  runH4,
	})
}

func runH4(ctx context.Context, unsafe bool, deadline time.Duration, base transports.Options) (v Verdict) {
	if _, err := cuda.DeviceCount(); err != nil {
		v.Outcome, v.Detail = ProbeFailed, "needs a GPU: "+err.Error()
		return v
	}
	opts := h4Options(base, unsafe)
	drv, err := transports.Lookup("cudaipc")
	if err != nil {
		v.Outcome, v.Detail = ProbeFailed, err.Error()
		return v
	}
	seg, err := drv.SharedBytes(2, opts)
	if err != nil {
		v.Outcome, v.Detail = ProbeFailed, err.Error()
		return v
	}
	spin := min(deadline+10*time.Second, gpuload.MaxDuration)
	params, _ := json.Marshal(h4Params{Unsafe: unsafe, Spin: spin, Base: opts}) // plain data always encodes
	res, err := launch.Run(ctx, launch.Job{Kind: h4Kind, Size: 2, SegmentBytes: seg, Params: params, Stall: deadline}, quiet)
	if v.Outcome, v.Detail, v.Stacks = classify(err); v.Outcome != Passed {
		v.Detail = fmt.Sprintf("staging=%s: %s", opts[cudaipc.KeyStaging], v.Detail)
		return v
	}
	var took time.Duration
	var s string
	if len(res) > 1 && json.Unmarshal(res[1], &s) == nil {
		took, _ = time.ParseDuration(s) // the rank wrote it with Duration.String; 0 only blurs the detail line
	}
	v.Detail = fmt.Sprintf("staging=%s: the kernel waiting on a blocking stream was released by the staged message %v after the send began (its bound: %v)", opts[cudaipc.KeyStaging], took.Round(time.Microsecond), spin)
	return v
}

// h4Rank: rank 0 sends the flag value from device memory; rank 1 holds the
// kernel and receives into its flag.
func h4Rank(r *launch.Rank) (any, error) {
	var par h4Params
	if err := r.Params(&par); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	t, err := cudaipc.New(rankEnv(r, par.Base))
	if err != nil {
		return nil, err
	}
	// The transport holds the rank's context: what h4Side allocates is
	// freed before Close releases it.
	res, err := h4Side(r, par, t.(*cudaipc.Transport))
	return res, errors.Join(err, t.Close())
}

func h4Side(r *launch.Rank, par h4Params, tr *cudaipc.Transport) (any, error) {
	dev := tr.GPU()
	buf, err := dev.Alloc(cuda.MemDevice, 8)
	if err != nil {
		return nil, err
	}
	defer buf.Free()
	view := sys.BytesAt(buf.Ptr(), 8)
	if r.ID == 0 {
		one := make([]byte, 8)
		binary.LittleEndian.PutUint32(one, 1)
		if err := cuda.CopyHtoD(buf.Ptr(), one); err != nil {
			return nil, err
		}
		if _, err := tr.Recv(1, make([]byte, 1)); err != nil { // rank 1's kernel runs
			return nil, err
		}
		return nil, tr.Send(1, view)
	}
	if err := cuda.Memset(buf.Ptr(), 0, 8); err != nil {
		return nil, err
	}
	blocking, stop, err := spinKernel(dev, buf.Ptr(), par.Spin)
	if err != nil {
		return nil, err
	}
	defer stop()
	start := time.Now()
	if err := tr.Send(0, make([]byte, 1)); err != nil {
		return nil, err
	}
	q, err := tr.Irecv(0, view)
	if err != nil {
		return nil, err
	}
	for !q.Done() {
		r.Beat()
		tr.Progress()
	}
	if err := tr.Wait(q); err != nil {
		return nil, err
	}
	took := time.Since(start)
	if err := blocking.Synchronize(); err != nil {
		return nil, err
	}
	if took >= par.Spin {
		return nil, fmt.Errorf("%s: the message landed only when the kernel's %v bound ran out (%v)", couplingMarker, par.Spin, took)
	}
	got := make([]byte, 8)
	if err := cuda.CopyDtoH(got, buf.Ptr()); err != nil {
		return nil, err
	}
	if binary.LittleEndian.Uint32(got) != 1 {
		return took.String(), fmt.Errorf("%s: the flag holds %x, want 1", corruptionMarker, got)
	}
	return took.String(), nil
}

// couplingMarker starts the error of a copy that waited for the kernel it
// was meant to release (errors cross the process boundary as text).
const couplingMarker = "copy coupled to the kernel"
