package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/payload"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/verbs"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/ib"
)

// H7: fork with registered memory (rdma-core's fork safety). Two ranks over
// ib keep persistent registered buffers; every iteration each rank forks a
// child that holds the address space, then writes its buffer (the sender
// its payload, the receiver zeroes its receive buffer), moves the message
// (eager and rendezvous), validates it and releases the child. Without
// protection, on a kernel that shares the pinned pages copy-on-write with
// the child, the parent's write moves it to a new page while the device
// keeps the old one: the receiver sees stale or missing bytes, or the
// queue pair fails. Safe form: ibv_fork_init (registered ranges
// MADV_DONTFORK) before anything is registered; where the kernel copies
// pinned pages for the child at fork (Linux 5.9 and later; rdma-core says
// IBV_FORK_UNNEEDED) that is what protects, and the verdict says which.
// Unsafe form: no ibv_fork_init, RDMAV_FORK_SAFE and IBV_FORK_SAFE unset.

const h7Kind = "probe-h7"

const h7Iterations = 8

// h7Sizes: an eager message, and rendezvous ones (ib.eager is 8K by default).
var h7Sizes = []int{4 << 10, 64 << 10, 1 << 20}

type h7Params struct {
	Options    transports.Options `json:"options"`
	Unsafe     bool               `json:"unsafe"`
	Iterations int                `json:"iterations"`
}

type h7Report struct {
	Fork     string `json:"fork"` // libibverbs' fork status after setup
	Device   string `json:"device"`
	Forks    int    `json:"forks"`
	Messages int    `json:"messages"`
}

func init() {
	launch.Register(h7Kind, h7Rank)
	register(&Probe{
		ID:          "H7",
		Hazard:      "fork with registered (pinned) memory: the child takes the pages the device still uses (rdma-core fork safety)",
		Description: "2 ranks over ib (RDMA verbs): each forks a child holding its address space during traffic, then writes its registered buffers; eager and rendezvous payloads validated; safe: ibv_fork_init (or the kernel's copy-on-fork), unsafe: no fork protection",
		RunOptions:  runH7,
	})
}

func runH7(ctx context.Context, unsafe bool, deadline time.Duration, opts transports.Options) (v Verdict) {
	o := transports.Options{}
	for k, val := range opts {
		if len(k) > 3 && k[:3] == "ib." {
			o[k] = val
		}
	}
	if _, err := ib.ParseParams(o); err != nil {
		v.Outcome, v.Detail = ProbeFailed, err.Error()
		return v
	}
	params, _ := json.Marshal(h7Params{Options: o, Unsafe: unsafe, Iterations: h7Iterations})
	out, err := launch.Run(ctx, launch.Job{Kind: h7Kind, Size: 2, Params: params, Stall: max(deadline, 30*time.Second)}, quiet)
	if errors.Is(err, sys.ErrNotSupported) {
		v.Outcome, v.Detail = ProbeFailed, "no RDMA device to probe: "+err.Error()
		return v
	}
	if v.Outcome, v.Detail, v.Stacks = classify(err); v.Outcome != Passed {
		if v.Outcome == ProbeFailed && unsafe {
			// A queue pair that fails after the fork (a completion error)
			// is the hazard too.
			v.Outcome, v.Detail = HazardDetected, "traffic failed after fork: "+v.Detail
		}
		return v
	}
	var rep h7Report
	if err := json.Unmarshal(out[0], &rep); err != nil {
		v.Outcome, v.Detail = ProbeFailed, fmt.Sprintf("decode rank 0's report: %v", err)
		return v
	}
	v.Detail = fmt.Sprintf("%s: %d forks during traffic, %d validated messages (eager and rendezvous, %v); fork protection %s",
		rep.Device, rep.Forks, rep.Messages, h7Sizes, rep.Fork)
	if unsafe && rep.Fork == verbs.ForkUnneeded.String() {
		v.Detail += "; the unsafe form cannot corrupt here: this kernel copies pinned pages for the child at fork, so only a kernel without copy-on-fork (before Linux 5.9) shows the hazard"
	}
	return v
}

func h7Rank(r *launch.Rank) (any, error) {
	var par h7Params
	if err := r.Params(&par); err != nil {
		return nil, err
	}
	if par.Unsafe {
		os.Unsetenv("RDMAV_FORK_SAFE")
		os.Unsetenv("IBV_FORK_SAFE")
	} else if err := verbs.ForkInit(); err != nil { // before anything is registered
		return nil, err
	}
	env := rankEnv(r, par.Options)
	tr, err := ib.New(env)
	if err != nil {
		return nil, err
	}
	if err := ib.Check(tr, env); err != nil {
		return nil, err
	}
	st, err := verbs.Fork()
	if err != nil {
		return nil, err
	}
	rep := h7Report{Fork: st.String(), Device: tr.(*ib.Transport).Device()}
	total := 0
	for _, n := range h7Sizes {
		total += n
	}
	buf, err := sys.MapAnon(total, true)
	if err != nil {
		return nil, err
	}
	peer := 1 - r.ID
	for i := range par.Iterations {
		off := 0
		for k, n := range h7Sizes {
			b := buf[off : off+n]
			off += n
			release, err := forkHold()
			if err != nil {
				return nil, err
			}
			rep.Forks++
			if r.ID == 0 {
				payload.Fill(b, h7Key(i, k)) // the parent writes registered memory after the fork
				err = tr.Send(peer, b)
			} else {
				clear(b)
				_, err = tr.Recv(peer, b)
				if err == nil {
					if at := payload.Check(b, h7Key(i, k)); at >= 0 {
						err = fmt.Errorf("payload validation failed: iteration %d, %d-byte message: word at byte %d differs after a fork", i, n, at)
					}
				}
			}
			if rerr := release(); err == nil {
				err = rerr
			}
			if err != nil {
				return nil, err
			}
			rep.Messages++
			r.Beat()
		}
	}
	return rep, tr.Close()
}

// forkHold forks a child that holds this address space until release.
func forkHold() (release func() error, err error) {
	rd, wr, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	pid, err := verbs.ForkHold(int(rd.Fd()), int(wr.Fd()))
	rd.Close()
	if err != nil {
		wr.Close()
		return nil, err
	}
	return func() error {
		wr.Close()
		p, err := os.FindProcess(pid)
		if err != nil {
			return err
		}
		_, err = p.Wait()
		return err
	}, nil
}

// h7Key names message k of iteration i.
func h7Key(i, k int) uint64 { return uint64(i)<<48 ^ uint64(k)<<40 ^ 0x7f4a7c15 }
