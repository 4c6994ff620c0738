package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cma"
	"github.com/gotune/gotune/transports/sm"
)

// H8: progress starvation. The receiver posts a rendezvous receive and a
// pipelined one larger than the fragment ring, then computes for three
// watchdog deadlines without calling into the transport (it beats: it is
// alive). The sender sends both and beats only as each send completes. With
// the progress thread (sm.progress=thread) the receiver's side answers the
// request-to-send (push) or pulls (pull) and drains the fragments while it
// computes, and the sender is done in milliseconds. With polling progress
// (the unsafe variant) the sender waits for the whole computation and the
// watchdog reports it. At a node's rank count (WithRanks, above 3) it runs
// again with every other rank sending both messages to the one computing,
// whose progress thread then serves all of them at once.

const h8Kind = "probe-h8"

type h8Params struct {
	Options  transports.Options `json:"options"`
	Compute  time.Duration      `json:"compute"`
	Rndv     int                `json:"rndv"` // bytes, by single copy
	Pipeline int                `json:"pipe"` // bytes, through the fragment ring
}

type h8Result struct {
	SendSeconds    float64 `json:"send_seconds,omitempty"`    // sender: both sends
	ComputeSeconds float64 `json:"compute_seconds,omitempty"` // receiver
}

// h8Geometry is the fixed form's fragment ring: small, so that the
// pipelined message is many rings long.
var h8Geometry = transports.Options{sm.KeyFrags: "2", sm.KeyFrag: "4K"}

func init() {
	launch.Register(h8Kind, h8Rank)
	register(&Probe{
		ID:          "H8",
		Hazard:      "progress starvation: a rendezvous completes only while the receiver polls (async-progress bugs in MPICH, Open MPI)",
		Description: "receiver posts a rendezvous and a pipelined receive (> fragment ring), then computes 3 deadlines without entering the transport; the sender must finish meanwhile, cma pull and push, and at a node's rank count every other rank sending to it; unsafe: polling progress (sm.progress=poll)",
		Run: func(ctx context.Context, unsafe bool, deadline time.Duration) Verdict {
			o := maps.Clone(h8Geometry)
			o[sm.KeyProgress] = "thread"
			return runH8(ctx, unsafe, deadline, o)
		},
		RunOptions: runH8,
		// A safe pass computes 3 deadlines in each of 4 cases (pull and
		// push, at 2 ranks and at the node's count), about 13 with their
		// starts; the unsafe one is caught after 1.
		Deadlines:       14,
		ScalesWithRanks: true,
	})
}

// h8Setup derives the probe's options and sizes from a configuration: a
// pipelined message of two and a half fragment rings, a rendezvous message
// above it (and at least 1 MiB), the single-copy threshold in between.
func h8Setup(base transports.Options, mode string, unsafe bool) (transports.Options, int, int, error) {
	o := base.With(nil) // a copy to change
	if unsafe {
		o[sm.KeyProgress] = "poll"
	}
	p, err := sm.ParseParams(o)
	if err != nil {
		return nil, 0, 0, err
	}
	pipe := max(2*p.FragSlots*p.FragSize+p.FragSize/2, p.EagerLimit+1)
	rndv := max(2*pipe, 1<<20)
	o[cma.KeyMode] = mode
	o[cma.KeyThreshold] = strconv.Itoa(pipe + 1)
	return o, pipe, rndv, nil
}

func runH8(ctx context.Context, unsafe bool, deadline time.Duration, base transports.Options) (v Verdict) {
	d, err := transports.Lookup("cma")
	if err != nil {
		v.Outcome, v.Detail = ProbeFailed, err.Error()
		return v
	}
	compute := 3 * deadline
	sizes := []int{2}
	if n := RanksFrom(ctx); n > 3 {
		sizes = append(sizes, n)
	}
	var sends []string
	var pipe, rndv int
	var progress string
	for _, size := range sizes {
		for _, mode := range []string{"pull", "push", "split"} {
			var o transports.Options
			o, pipe, rndv, err = h8Setup(base, mode, unsafe)
			if err == nil {
				var seg int
				if seg, err = d.SharedBytes(size, o); err == nil {
					params, _ := json.Marshal(h8Params{Options: o, Compute: compute, Rndv: rndv, Pipeline: pipe}) // plain data always encodes
					var res launch.Result
					res, err = launch.Run(ctx, launch.Job{Kind: h8Kind, Size: size, SegmentBytes: seg, Params: params, Stall: deadline}, quiet)
					if err == nil {
						var line string
						if line, err = h8Sends(res[:size-1], mode, size); err == nil {
							sends = append(sends, line)
						}
					}
				}
			}
			progress = o[sm.KeyProgress]
			if progress == "" {
				progress = "poll"
			}
			if v.Outcome, v.Detail, v.Stacks = classify(err); v.Outcome != Passed {
				v.Detail = fmt.Sprintf("cma %s, sm.progress=%s, %d ranks, receiver computing %v: %s", mode, progress, size, compute, v.Detail)
				return v
			}
		}
	}
	senders := "the sender's sends"
	if len(sizes) > 1 {
		senders = fmt.Sprintf("the sender's sends (and at %d ranks those of %d senders at once)", sizes[1], sizes[1]-1)
	}
	v.Detail = fmt.Sprintf("receiver computed %v without entering the transport after posting a %s rendezvous and a %s pipelined receive (> the fragment ring) per sender; "+
		"with sm.progress=%s %s completed meanwhile (%s), data validated", compute,
		transports.FormatSize(rndv), transports.FormatSize(pipe), progress, senders, strings.Join(sends, ", "))
	return v
}

// h8Sends writes how long the senders of one run took: the slowest of
// them, labelled with the mode (and the ranks, above 2).
func h8Sends(results []json.RawMessage, mode string, size int) (string, error) {
	slowest := 0.0
	for i, raw := range results {
		var s h8Result
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("sender %d's result: %w", i, err)
		}
		slowest = max(slowest, s.SendSeconds)
	}
	if size > 2 {
		return fmt.Sprintf("%s at %d ranks %.1f ms", mode, size, slowest*1e3), nil
	}
	return fmt.Sprintf("%s %.1f ms", mode, slowest*1e3), nil
}

// h8Rank: the last rank receives from every other and computes; the
// others send (with two ranks: rank 0 sends, rank 1 receives).
func h8Rank(r *launch.Rank) (any, error) {
	var par h8Params
	t, err := cmaRank(r, &par, &par.Options)
	if err != nil {
		return nil, err
	}
	receiver := r.Size - 1
	per := par.Rndv + par.Pipeline // one sender's two messages
	senders := 1
	if r.ID == receiver {
		senders = r.Size - 1
	}
	buf, err := sys.MapAnon(senders*per, true)
	if err != nil {
		return nil, err
	}
	defer sys.Unmap(buf)
	// A split copy needs a pull from the peer first (the receiver must be
	// able to finish alone): one rendezvous each way before the test, so
	// that the one under test splits.
	split := par.Options[cma.KeyMode] == "split"
	if r.ID != receiver {
		rndv, pipe := buf[:par.Rndv], buf[par.Rndv:]
		if split {
			if err := t.Send(receiver, rndv); err != nil {
				return nil, fmt.Errorf("first rendezvous (split needs a pull first): %w", err)
			}
		}
		fillH6(rndv, r.ID, 1)
		fillH6(pipe, r.ID, 2)
		if err := r.Barrier(); err != nil {
			return nil, err
		}
		start := time.Now()
		for _, m := range [][]byte{rndv, pipe} {
			if err := t.Send(receiver, m); err != nil {
				return nil, fmt.Errorf("send %d bytes: %w", len(m), err)
			}
			r.Beat() // only a completed send counts as progress
		}
		return h8Result{SendSeconds: time.Since(start).Seconds()}, t.Close()
	}
	if split {
		for from := range senders {
			if _, err := t.Recv(from, buf[:par.Rndv]); err != nil {
				return nil, fmt.Errorf("first rendezvous from rank %d (split needs a pull first): %w", from, err)
			}
		}
	}
	poison(buf)
	var reqs []transports.Request
	for from := range senders {
		b := buf[from*per : (from+1)*per]
		for _, m := range [][]byte{b[:par.Rndv], b[par.Rndv:]} {
			q, err := t.Irecv(from, m)
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, q)
		}
	}
	if err := r.Barrier(); err != nil { // the sender starts now
		return nil, err
	}
	start := time.Now()
	compute(par.Compute, r.Beat)
	took := time.Since(start)
	if err := t.Wait(reqs...); err != nil {
		return nil, err
	}
	want := make([]byte, per)
	for from := range senders {
		fillH6(want[:par.Rndv], from, 1)
		fillH6(want[par.Rndv:], from, 2)
		if i := firstDiff(buf[from*per:(from+1)*per], want); i < per {
			return nil, fmt.Errorf("%s: byte %d of the rendezvous and pipelined messages from rank %d", corruptionMarker, i, from)
		}
	}
	return h8Result{ComputeSeconds: took.Seconds()}, t.Close()
}

// compute keeps the CPU busy for d without touching the transport,
// beating once per slice.
func compute(d time.Duration, beat func()) uint64 {
	x := uint64(88172645463325252)
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		for range 1 << 16 { // ~0.1 ms of xorshift
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		beat()
	}
	return x
}

// cmaRank reads the rank's parameters into par, then opens cma with the
// options that par holds at *opts.
func cmaRank(r *launch.Rank, par any, opts *transports.Options) (transports.Transport, error) {
	if err := r.Params(par); err != nil {
		return nil, err
	}
	return cma.New(rankEnv(r, *opts))
}
