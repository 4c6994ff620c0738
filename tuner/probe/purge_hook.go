package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/payload"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cma"
	"github.com/gotune/gotune/transports/hostmem"
	"github.com/gotune/gotune/transports/sm"
)

// H1: an allocator purge fires a memory hook that takes the registration
// cache's lock, which the allocating thread already holds (libfabric#10879,
// ompi#13149 with mimalloc; earlier libfabric#9594). Two ranks over cma take
// fresh rendezvous-size buffers every iteration from an allocator that
// purges immediately, register each in a registration cache hooked to that
// allocator, and move validated payloads. The safe cache never calls the
// allocator or runs a hook under its lock; the unsafe one
// (regcache.entries=hooked) keeps its table in hooked memory and grows it
// under its lock: the first growth frees the old table, the purge runs the
// hook, and the hook blocks on the lock its own goroutine holds.

const h1Kind = "probe-h1"

// h1Sizes are rendezvous sizes (above the cma threshold) over five size
// classes, 64 KiB to 1 MiB; slot w of iteration i takes h1Sizes[(i+w)%8],
// so the classes churn from one iteration to the next.
var h1Sizes = []int{64 << 10, 96 << 10, 200 << 10, 1 << 20, 320 << 10, 128 << 10, 700 << 10, 256 << 10}

const (
	h1Iterations = 48
	h1Window     = 2 * hostmem.InitialEntries // live registrations per rank: the table must grow
	// h1MinStall is the floor of H1's stall deadline. Every iteration
	// faults in, pins, unpins and purges megabytes, and in this VM a single
	// mlock or first touch of fresh pages now and then stalls for seconds
	// (2.3-2.5 s seen under load; one safe run in five had an iteration
	// over 2 s), so the probes' 2 s default flagged the safe form.
	h1MinStall = 10 * time.Second
)

type h1Params struct {
	Options    transports.Options `json:"options"`
	Iterations int                `json:"iterations"`
	Window     int                `json:"window"`
}

// h1Report is what each rank hands back.
type h1Report struct {
	Alloc    hostmem.Stats    `json:"alloc"`
	Reg      hostmem.RegStats `json:"reg"`
	Messages int              `json:"messages"`
	Bytes    int64            `json:"bytes"`
}

// h1Options is opts (a candidate configuration: transport and allocator
// options) under H1's stress: every cached buffer purged at once, and the
// cache's table on the heap (safe) or in hooked memory (unsafe).
func h1Options(opts transports.Options, unsafe bool) transports.Options {
	o := opts.With(nil) // a copy to change
	o[hostmem.KeyPurge] = hostmem.Immediate.String()
	o[hostmem.KeyEntries] = hostmem.HeapEntries.String()
	if unsafe {
		o[hostmem.KeyEntries] = hostmem.HookedEntries.String()
	}
	return o
}

func init() {
	launch.Register(h1Kind, h1Rank)
	register(&Probe{
		ID:          "H1",
		Hazard:      "allocator purge fires a memory hook that takes the registration-cache lock the allocating thread holds (libfabric#10879, ompi#13149, libfabric#9594)",
		Description: "2 ranks over cma: fresh 64K-1M buffers every iteration from an allocator that purges at once, each registered (mlock) in a hooked registration cache, validated; unsafe: the cache grows a table in hooked memory under its lock (regcache.entries=hooked)",
		RunOptions:  runH1,
	})
}

func runH1(ctx context.Context, unsafe bool, deadline time.Duration, opts transports.Options) (v Verdict) {
	o := h1Options(opts, unsafe)
	cfg, err := hostmem.ParseConfig(o)
	if err == nil {
		_, err = hostmem.ParseEntryStorage(o)
	}
	setting := fmt.Sprintf("regcache.entries=%s, alloc.purge=%s", o[hostmem.KeyEntries], cfg.Purge)
	reports, ok := runH1Ranks[h1Report](ctx, h1Kind, o, err, deadline, setting, &v)
	if !ok {
		return v
	}
	pinned := "pinned by mlock"
	for _, rep := range reports {
		if rep.Reg.Unpinned > 0 {
			pinned = "not pinned (" + rep.Reg.PinError + ")"
			break
		}
	}
	v.Detail = fmt.Sprintf("%s: 2 ranks over cma, %d iterations x %d fresh buffers (64K-1M, 5 size classes), %d validated messages; "+
		"per rank: %d registrations %s, %d purges through the release hook, %d invalidations, table growths %d",
		setting, h1Iterations, h1Window, reports[1].Messages,
		reports[0].Reg.Misses, pinned, reports[0].Alloc.Purges, reports[0].Reg.Invalidations, reports[0].Reg.Grows)
	return v
}

// runH1Ranks runs H1's two ranks of kind over options o, unless o's
// check found err (then the probe fails without running); ok says whether
// the ranks passed (v says why not).
func runH1Ranks[R any](ctx context.Context, kind string, o transports.Options, err error, deadline time.Duration, setting string, v *Verdict) (reports []R, ok bool) {
	var sp sm.Params
	if err == nil {
		sp, err = sm.ParseParams(o)
	}
	if err != nil {
		v.Outcome, v.Detail = ProbeFailed, err.Error()
		return nil, false
	}
	params, _ := json.Marshal(h1Params{Options: o, Iterations: h1Iterations, Window: h1Window}) // plain data always encodes
	return runRanks[R](ctx, launch.Job{Kind: kind, Size: 2, SegmentBytes: sp.SegmentBytes(2),
		Params: params, Stall: max(deadline, h1MinStall)}, setting, v)
}

// h1Rank: rank 0 sends, rank 1 receives. Both allocate, register and free
// a window of buffers every iteration.
func h1Rank(r *launch.Rank) (any, error) {
	par, t, heap, err := h1Setup(r, cma.New, cma.Check)
	if err != nil {
		return nil, err
	}
	storage, err := hostmem.ParseEntryStorage(par.Options)
	if err != nil {
		return nil, err
	}
	rc, err := hostmem.NewRegCache(heap, storage)
	if err != nil {
		return nil, err
	}
	var rep h1Report
	rep.Messages, rep.Bytes, err = h1Traffic(r, par, t, heap, func(b []byte) error {
		_, err := rc.Register(b)
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	rep.Alloc, rep.Reg = heap.Stats(), rc.Stats()
	if err := t.Close(); err != nil {
		return nil, err
	}
	if err := rc.Close(); err != nil {
		return nil, err
	}
	return rep, heap.Close()
}

// h1Setup reads an H1 rank's parameters, opens its transport with open and
// proves it with check, and makes its allocator.
func h1Setup[T transports.Transport](r *launch.Rank, open func(transports.Env) (T, error), check func(transports.Transport, transports.Env) error) (par h1Params, t T, heap *hostmem.Allocator, err error) {
	if err = r.Params(&par); err != nil {
		return par, t, nil, err
	}
	cfg, err := hostmem.ParseConfig(par.Options)
	if err != nil {
		return par, t, nil, err
	}
	env := rankEnv(r, par.Options)
	if t, err = open(env); err != nil {
		return par, t, nil, err
	}
	if err = check(t, env); err != nil {
		return par, t, nil, err
	}
	heap, err = hostmem.New(cfg)
	return par, t, heap, err
}

// h1Traffic is the traffic of H1's shape over t: every iteration a
// window of fresh buffers from heap (each given to prepare first, if set)
// that rank 0 fills and sends and rank 1 receives and validates; after
// settle (if set) each rank frees its window, which runs the release hook
// under the traffic. It returns the messages and bytes that passed.
func h1Traffic(r *launch.Rank, par h1Params, t transports.Transport, heap *hostmem.Allocator, prepare func([]byte) error, settle func() error) (messages int, bytes int64, err error) {
	peer := 1 - r.ID
	bufs := make([][]byte, 0, par.Window)
	reqs := make([]transports.Request, 0, par.Window)
	for i := range par.Iterations {
		bufs, reqs = bufs[:0], reqs[:0]
		for w := range par.Window {
			b, err := heap.Alloc(h1Sizes[(i+w)%len(h1Sizes)])
			if err != nil {
				return 0, 0, err
			}
			if prepare != nil {
				if err := prepare(b); err != nil {
					return 0, 0, err
				}
			}
			bufs = append(bufs, b)
			var q transports.Request
			if r.ID == 0 {
				payload.Fill(b, h1Key(i, w))
				q, err = t.Isend(peer, b)
			} else {
				q, err = t.Irecv(peer, b)
			}
			if err != nil {
				return 0, 0, err
			}
			reqs = append(reqs, q)
		}
		if err := t.Wait(reqs...); err != nil {
			return 0, 0, err
		}
		if r.ID == 1 {
			for w, b := range bufs {
				if k := payload.Check(b, h1Key(i, w)); k >= 0 {
					return 0, 0, fmt.Errorf("payload validation failed: iteration %d message %d (%d bytes): word at byte %d differs", i, w, len(b), k)
				}
			}
		}
		if settle != nil {
			if err := settle(); err != nil {
				return 0, 0, err
			}
		}
		for _, b := range bufs {
			if err := heap.Free(b); err != nil {
				return 0, 0, err
			}
			messages++
			bytes += int64(len(b))
		}
		r.Beat()
	}
	return messages, bytes, nil
}

// h1Key names message w of iteration i.
func h1Key(i, w int) uint64 { return uint64(i)<<40 ^ uint64(w)<<32 ^ 0x5bd1e995 }
