package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/nccl"
)

// N1: NCCL's head-to-head hang. Two ranks send to each other and only
// then receive, outside a group. NCCL connects a pair within its first
// operations between them (NCCL_RUNTIME_CONNECT, the default since 2.22),
// and two blocking sends as those first operations both wait there: on
// 2 x H200 with NCCL 2.28.3 at 64 KiB already (docs/hazards.md, N1).
// Connected, a send may still wait for a receive above the receiver's
// buffer (NCCL_BUFFSIZE), a hang that a larger tuned buffer or an eager
// connection would turn into a pass at the sizes measured. The safe
// variant posts both directions and waits for them together (the nccl
// transport launches them as one group) at 64 KiB and at four buffers;
// the unsafe one sends blocking, then receives, at the same sizes on a
// fresh pair each, and must hang at one of them (caught by the
// watchdog). Payloads are validated.

const n1Kind = "probe-n1"

type n1Params struct {
	Unsafe bool               `json:"unsafe"`
	Size   int                `json:"size"`
	Opts   transports.Options `json:"opts,omitempty"`
}

// n1Below is the first size sent head to head: far below any buffer NCCL
// takes, so only the connection can hold it.
const n1Below = 64 << 10

// ncclDefaultBuffsize is NCCL's built-in NCCL_BUFFSIZE (2.28).
const ncclDefaultBuffsize = 4 << 20

func init() {
	launch.Register(n1Kind, n1Rank)
	register(&Probe{
		ID:          "N1",
		Hazard:      "NCCL head-to-head sends outside a group: a hang in the pair's connection, or above NCCL_BUFFSIZE",
		Description: "two ranks on two GPUs send to each other before receiving, through the installed NCCL, at 64 KiB and four times its buffer, a fresh pair each; unsafe: blocking sends outside a group",
		RunOptions:  runN1,
	})
}

// n1Size is four of the buffers NCCL will use under opts.
func n1Size(opts transports.Options) (int, error) {
	set, err := nccl.Settings(opts)
	if err != nil {
		return 0, err
	}
	buf := ncclDefaultBuffsize
	if v, ok := set["NCCL_BUFFSIZE"]; ok {
		if _, err := fmt.Sscan(v, &buf); err != nil {
			return 0, fmt.Errorf("NCCL_BUFFSIZE %q: %w", v, err)
		}
	}
	return 4 * buf, nil
}

func runN1(ctx context.Context, unsafe bool, deadline time.Duration, opts transports.Options) (v Verdict) {
	if err := nccl.Present(opts); err != nil {
		v.Outcome, v.Detail = ProbeFailed, "no NCCL and GPU to probe: "+err.Error()
		return v
	}
	big, err := n1Size(opts)
	if err != nil {
		v.Outcome, v.Detail = ProbeFailed, err.Error()
		return v
	}
	sizes := []int{n1Below, big}
	var passed []string
	for _, size := range sizes {
		params, _ := json.Marshal(n1Params{Unsafe: unsafe, Size: size, Opts: opts}) // plain data always encodes
		_, err := launch.Run(ctx, launch.Job{Kind: n1Kind, Size: 2, Params: params, Stall: deadline}, quiet)
		if errors.Is(err, sys.ErrNotSupported) {
			v.Outcome, v.Detail = ProbeFailed, "no NCCL pair to probe: "+err.Error()
			return v
		}
		if v.Outcome, v.Detail, v.Stacks = classify(err); v.Outcome != Passed {
			v.Detail = fmt.Sprintf("%s head to head: %s", cuda.Size(size), v.Detail)
			if len(passed) > 0 {
				v.Detail = fmt.Sprintf("%s passed; %s", passed[0], v.Detail)
			}
			return v
		}
		passed = append(passed, cuda.Size(size)+" head to head")
	}
	how := "grouped"
	if unsafe {
		how = "blocking, outside a group"
	}
	v.Detail = fmt.Sprintf("sends %s at %v, validated", how, passed)
	return v
}

// n1Rank sends Size bytes of device memory to its peer and receives as
// many from it, validating them.
func n1Rank(r *launch.Rank) (any, error) {
	var par n1Params
	if err := r.Params(&par); err != nil {
		return nil, err
	}
	nr, err := openNCCLRank(r, nil, par.Opts, par.Size)
	if err != nil {
		return nil, err
	}
	defer nr.close()
	t, send, recv := nr.t, nr.send, nr.recv
	peer := 1 - r.ID
	host := make([]byte, par.Size)
	fillN1(host, r.ID)
	if err := cuda.CopyHtoD(send.Ptr(), host); err != nil {
		return nil, err
	}
	sb, rb := sys.BytesAt(send.Ptr(), par.Size), sys.BytesAt(recv.Ptr(), par.Size)
	r.Beat()
	if par.Unsafe {
		if err := t.Send(peer, sb); err != nil {
			return nil, err
		}
		if _, err := t.Recv(peer, rb); err != nil {
			return nil, err
		}
	} else {
		s, err := t.Isend(peer, sb)
		if err != nil {
			return nil, err
		}
		q, err := t.Irecv(peer, rb)
		if err != nil {
			return nil, err
		}
		if err := t.Wait(s, q); err != nil {
			return nil, err
		}
	}
	r.Beat()
	if err := cuda.CopyDtoH(host, recv.Ptr()); err != nil {
		return nil, err
	}
	want := make([]byte, par.Size)
	fillN1(want, peer)
	for i := range host {
		if host[i] != want[i] {
			return nil, fmt.Errorf("%s: byte %d of %d from rank %d is %#x, want %#x", corruptionMarker, i, par.Size, peer, host[i], want[i])
		}
	}
	return nil, nil
}

func fillN1(b []byte, from int) {
	for i := range b {
		b[i] = byte(i*13 + from*101)
	}
}
