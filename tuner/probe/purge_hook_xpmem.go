package probe

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/hostmem"
	"github.com/gotune/gotune/transports/xpmem"
)

// H1X: H1 for the xpmem attachment cache. Two ranks over xpmem take fresh
// rendezvous-size buffers every iteration from an allocator that purges
// immediately and whose release hook reaches the transport's Invalidate;
// the receiver attaches each of the sender's buffers (xpmem.align=4K: one
// cache entry per buffer, so the table must grow), and every payload is
// checked. The safe form's hook posts on the notice board and never takes
// the cache lock, and its table lives on the Go heap. The unsafe form
// (xpmem.hook=lock) keeps the table in the hooked allocator's memory and
// grows it under the cache lock: the old table's free purges it, the hook
// runs on the same goroutine and blocks on the lock it holds.

const h1xKind = "probe-h1x"

func init() {
	launch.Register(h1xKind, h1xRank)
	register(&Probe{
		ID:          "H1X",
		Hazard:      "H1 in the xpmem attachment cache: the allocator's release hook takes the cache lock the allocating thread holds",
		Description: "2 ranks over xpmem (the module, or xpmem.device=fake): fresh 64K-1M buffers every iteration from an allocator that purges at once, each attached by the receiver (one cache entry per buffer), validated; unsafe: xpmem.hook=lock with the cache's table in hooked memory, grown under its lock",
		RunOptions:  runH1X,
	})
}

// h1xOptions: opts under the probe's stress (immediate purges, one
// attachment per buffer), safe or unsafe.
func h1xOptions(opts transports.Options, unsafe bool) transports.Options {
	o := opts.With(nil)
	o[hostmem.KeyPurge] = hostmem.Immediate.String()
	o[xpmem.KeyAlign] = "4K"
	o[xpmem.KeyMode] = "pull"
	o[xpmem.KeyHook] = "queue"
	if unsafe {
		o[xpmem.KeyHook] = "lock"
	}
	return o
}

type h1xReport struct {
	Alloc    hostmem.Stats `json:"alloc"`
	Cache    xpmem.Stats   `json:"cache"`
	Messages int           `json:"messages"`
	Version  uint32        `json:"version"`
}

func runH1X(ctx context.Context, unsafe bool, deadline time.Duration, opts transports.Options) (v Verdict) {
	o := h1xOptions(opts, unsafe)
	_, err := hostmem.ParseConfig(o)
	if err == nil {
		_, err = xpmem.Probe(o)
	}
	dev := o[xpmem.KeyDevice]
	if dev == "" {
		dev = "/dev/xpmem"
	}
	setting := fmt.Sprintf("xpmem.hook=%s, alloc.purge=immediate, device %s", o[xpmem.KeyHook], dev)
	reps, ok := runH1Ranks[h1xReport](ctx, h1xKind, o, err, deadline, setting, &v)
	if !ok {
		return v
	}
	c := reps[1].Cache
	v.Detail = fmt.Sprintf("%s (version %#x): 2 ranks, %d iterations x %d fresh buffers (64K-1M), %d validated messages; receiver: %d attaches, %d invalidations from %d notices, table growths %d; sender: %d purges through the release hook",
		setting, reps[1].Version, h1Iterations, h1Window, reps[1].Messages, c.Attaches, c.Invalidations, c.Notices, c.Grows, reps[0].Alloc.Purges)
	if c.Grows == 0 || c.Invalidations == 0 {
		v.Outcome, v.Detail = ProbeFailed, "the stress did not happen (no table growth or no invalidation): "+v.Detail
	}
	return v
}

// h1xRank: rank 0 sends, rank 1 receives (and attaches); both allocate
// and free a window of buffers every iteration.
func h1xRank(r *launch.Rank) (any, error) {
	par, t, heap, err := h1Setup(r, xpmem.New, xpmem.Check)
	if err != nil {
		return nil, err
	}
	unhook := heap.OnRelease(t.Invalidate)
	if t.XPMEMParams().LockedHook {
		if err := t.UseTableAllocator(heap); err != nil {
			return nil, err
		}
	}
	var rep h1xReport
	// The sender's buffers go back only after the receiver's copies.
	if rep.Messages, _, err = h1Traffic(r, par, t, heap, nil, r.Barrier); err != nil {
		return nil, err
	}
	rep.Alloc, rep.Cache, rep.Version = heap.Stats(), t.Stats(), t.Version()
	if err := r.Barrier(); err != nil {
		return nil, err
	}
	unhook()
	return rep, errors.Join(t.Close(), heap.Close())
}
