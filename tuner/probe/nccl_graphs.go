package probe

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

// N4: H3 through the installed NCCL (NVIDIA/nccl#1251: "after N graph
// executions all processes stall", N growing with the work FIFO). Two
// ranks on two GPUs capture n4Captured allreduces into a CUDA graph, then
// n4Iterations times replay it and run one allreduce outside it, checking
// the sums every n4CheckEvery iterations and beating each one: work-FIFO
// space that graph launches take and never give back stalls every rank,
// which the watchdog reports. The unsafe form runs with the smallest work
// FIFO NCCL takes (NCCL_WORK_FIFO_BYTES; NCCL raises a smaller value to
// its minimum), where a leak shows in the fewest iterations; the safe one
// with the candidate's settings. Both passing is the finding that the
// installed NCCL does not leak so (docs/hazards.md, N4).
const n4Kind = "probe-n4"

type n4Params struct {
	Env        map[string]string `json:"env"`
	Size       int               `json:"size"`
	Iterations int               `json:"iterations"`
}

const (
	n4Size        = 4 << 10 // bytes an allreduce sums: small, so the calls are many
	n4Iterations  = 4000
	n4Captured    = 4
	n4CheckEvery  = 250
	n4SmallFIFO   = 4 << 10 // below any minimum: NCCL takes its smallest
	n4FIFOVarName = "NCCL_WORK_FIFO_BYTES"
)

func init() {
	launch.Register(n4Kind, n4Rank)
	register(&Probe{
		ID:     "N4",
		Hazard: "H3 through the installed NCCL: graph-captured collectives replayed among uncaptured ones leak work-FIFO space until every rank stalls (NVIDIA/nccl#1251)",
		Description: fmt.Sprintf("two ranks on two GPUs: %d allreduces captured into a CUDA graph, then %d times the graph and one allreduce outside it, sums checked; unsafe: %s=%d (NCCL's smallest)",
			n4Captured, n4Iterations, n4FIFOVarName, n4SmallFIFO),
		RunOptions: runN4,
	})
}

func runN4(ctx context.Context, unsafe bool, deadline time.Duration, opts transports.Options) Verdict {
	var forced map[string]string
	if unsafe {
		forced = map[string]string{n4FIFOVarName: strconv.Itoa(n4SmallFIFO)}
	}
	return runNCCLPair(ctx, deadline, opts, forced, n4Kind,
		func(env map[string]string) any { return n4Params{Env: env, Size: n4Size, Iterations: n4Iterations} },
		fmt.Sprintf("%d replays of %d captured allreduces among %d uncaptured ones, sums checked every %d",
			n4Iterations, n4Captured, n4Iterations, n4CheckEvery))
}

// n4Rank captures the allreduces and replays them among uncaptured ones,
// beating every iteration and checking the sums every n4CheckEvery.
func n4Rank(r *launch.Rank) (any, error) {
	var par n4Params
	if err := r.Params(&par); err != nil {
		return nil, err
	}
	nr, err := openNCCLRank(r, par.Env, nil, par.Size)
	if err != nil {
		return nil, err
	}
	defer nr.close()
	t, send, recv := nr.t, nr.send, nr.recv
	// Element e of rank k is (k+1)(e mod 251 + 1): the sum is known, and
	// every allreduce of send into recv leaves the same.
	host, want := make([]byte, par.Size), make([]byte, par.Size)
	n := r.Size
	for e := range par.Size / 4 {
		binary.LittleEndian.PutUint32(host[4*e:], math.Float32bits(float32((r.ID+1)*(e%251+1))))
		binary.LittleEndian.PutUint32(want[4*e:], math.Float32bits(float32(n*(n+1)/2*(e%251+1))))
	}
	if err := cuda.CopyHtoD(send.Ptr(), host); err != nil {
		return nil, err
	}
	sb, rb := sys.BytesAt(send.Ptr(), par.Size), sys.BytesAt(recv.Ptr(), par.Size)
	exec, err := t.CaptureAllReduce(sb, rb, n4Captured)
	if err != nil {
		return nil, err
	}
	defer exec.Destroy()
	for it := range par.Iterations {
		r.Beat()
		g, err := t.Replay(exec)
		if err != nil {
			return nil, fmt.Errorf("iteration %d: replay: %w", it, err)
		}
		q, err := t.Collective(transports.AllReduce, sb, rb, 0)
		if err != nil {
			return nil, fmt.Errorf("iteration %d: allreduce: %w", it, err)
		}
		if err := t.Wait(g, q); err != nil {
			return nil, fmt.Errorf("iteration %d: %w", it, err)
		}
		if it%n4CheckEvery == n4CheckEvery-1 || it == par.Iterations-1 {
			if err := checkDevice(host, want, recv.Ptr(), fmt.Sprintf("allreduce sums after iteration %d", it)); err != nil {
				return nil, err
			}
		}
	}
	return nil, nil
}
