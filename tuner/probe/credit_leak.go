package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// H3: persistent operations take FIFO credits that are never returned
// (nccl#1251: "after N graph executions all processes stall", N growing with
// NCCL_WORK_FIFO_DEPTH). Both ranks run iterations that each set up a
// persistent send and a persistent receive, start them a few times with
// ordinary sends and receives in between, check every payload and free
// them, at the smallest FIFO (one fragment slot) with depth 1 and then 2.
// A live persistent send holds one of its channel's depth credits (see
// transports/sm), and freeing it must give the credit back. The unsafe
// variant (sm.persist=leak) forgets to: after as many iterations as the
// FIFO is deep, the next persistent start waits forever and the watchdog
// reports the hang. Iterations-to-hang that scales with the depth is the
// signature of a leak; the verdict reports it per depth.

const h3Kind = "probe-h3"

type h3Params struct {
	Options    transports.Options `json:"options"`
	Iterations int                `json:"iterations"`
}

// h3Depths are the FIFO depths probed; h3Starts the starts per request.
var (
	h3Depths = []int{1, 2}
	h3Starts = 3
)

// h3Persistent and h3Ordinary are the message sizes, in turn: eager (at
// most 64 bytes) and pipelined.
var (
	h3Persistent = []int{8, 64, 200}
	h3Ordinary   = []int{0, 65, 8, 130}
)

func init() {
	launch.Register(h3Kind, h3Rank)
	register(&Probe{
		ID:          "H3",
		Hazard:      "persistent operations take FIFO credits that are never returned (NCCL work FIFO with CUDA graphs, nccl#1251)",
		Description: "iterations of persistent sends/receives (set up, started 3 times among ordinary traffic, validated, freed) at FIFO depth 1 and 2; unsafe: Free forgets the credit (sm.persist=leak), iterations-to-hang per depth",
		RunOptions:  runH3,
	})
}

// h3Options: the configuration's local settings (progress mode, copy
// routine, persistent credits policy) on the smallest FIFO of the given
// depth; the unsafe variant leaks.
func h3Options(base transports.Options, depth int, unsafe bool) transports.Options {
	o := base.With(tinyFIFO(depth))
	if unsafe {
		o[sm.KeyPersist] = "leak"
	}
	return o
}

func runH3(ctx context.Context, unsafe bool, deadline time.Duration, base transports.Options) (v Verdict) {
	const iterations = 500
	var hangs, passes []string
	var scaling []int // iterations-to-hang by depth, while every depth hangs
	for _, depth := range h3Depths {
		o := h3Options(base, depth, unsafe)
		p, err := sm.ParseParams(o)
		if err != nil {
			v.Outcome, v.Detail = ProbeFailed, err.Error()
			return v
		}
		params, _ := json.Marshal(h3Params{Options: o, Iterations: iterations}) // plain data always encodes
		_, err = launch.Run(ctx, launch.Job{Kind: h3Kind, Size: 2, SegmentBytes: p.SegmentBytes(2), Params: params, Stall: deadline}, quiet)
		var stall *launch.StallError
		switch outcome, detail, stacks := classify(err); {
		case errors.As(err, &stall):
			n := h3Done(stall.Stacks)
			v.Stacks = stacks
			hangs = append(hangs, fmt.Sprintf("hang after %d iteration(s) at depth %d", n, depth))
			if len(scaling) == len(hangs)-1 {
				scaling = append(scaling, n)
			}
		case outcome == Passed:
			passes = append(passes, strconv.Itoa(depth))
		default:
			v.Outcome, v.Detail, v.Stacks = outcome, fmt.Sprintf("depth %d: %s", depth, detail), stacks
			return v
		}
	}
	if len(hangs) == 0 {
		v.Outcome = Passed
		v.Detail = fmt.Sprintf("%d iterations at FIFO depth %s (1 fragment slot), each a persistent send and receive set up, started %d times among ordinary traffic, validated and freed; every credit returned",
			iterations, strings.Join(passes, " and "), h3Starts)
		return v
	}
	v.Outcome = HazardDetected
	v.Detail = strings.Join(hangs, ", ")
	if len(passes) > 0 {
		v.Detail += "; passed at depth " + strings.Join(passes, ", ")
	}
	switch {
	case len(scaling) == len(h3Depths) && increasing(scaling):
		v.Detail += ": iterations-to-hang grows with the FIFO depth, the signature of a credit leak"
	case len(scaling) == len(h3Depths):
		v.Detail += ": iterations-to-hang does not grow with the FIFO depth (a hang, not the shape of a leak)"
	}
	return v
}

func increasing(x []int) bool {
	for i := 1; i < len(x); i++ {
		if x[i] <= x[i-1] {
			return false
		}
	}
	return len(x) > 1
}

// h3Line is what a rank prints on stderr after each iteration; the watchdog
// keeps the tail of a stalled rank's stderr with its stacks, so the last
// line says how far it got.
var h3Line = regexp.MustCompile(`h3: (\d+) iterations done`)

// h3Done is the fewest iterations any stalled rank completed.
func h3Done(stacks map[int]string) int {
	n := -1
	for _, s := range stacks {
		m := h3Line.FindAllStringSubmatch(s, -1)
		k := 0
		if len(m) > 0 {
			k, _ = strconv.Atoi(m[len(m)-1][1]) // \d+ matched: only overflow fails, and 0 is a fine floor then
		}
		if n < 0 || k < n {
			n = k
		}
	}
	return max(n, 0)
}

// h3Rank: both ranks run the same iterations against each other.
func h3Rank(r *launch.Rank) (any, error) {
	var par h3Params
	if err := r.Params(&par); err != nil {
		return nil, err
	}
	p, err := sm.ParseParams(par.Options)
	if err != nil {
		return nil, err
	}
	ep, err := sm.New(rankEnv(r, nil), p, nil, "sm")
	if err != nil {
		return nil, err
	}
	q := 1 - r.ID
	const most = 256
	psb, prb, osb, orb := make([]byte, most), make([]byte, most), make([]byte, most), make([]byte, most)
	want := make([]byte, most)
	for i := range par.Iterations {
		n := h3Persistent[i%len(h3Persistent)]
		send, err := ep.SendInit(q, psb[:n])
		if err != nil {
			return nil, err
		}
		recv, err := ep.RecvInit(q, prb[:n])
		if err != nil {
			return nil, err
		}
		for k := range h3Starts {
			m := h3Ordinary[(i+k)%len(h3Ordinary)]
			fillH3(psb[:n], r.ID, i, k)
			fillH3(osb[:m], r.ID, i, -k)
			poison(prb[:n])
			poison(orb[:m])
			if err := recv.Start(); err != nil {
				return nil, err
			}
			if err := send.Start(); err != nil {
				return nil, err
			}
			sreq, err := ep.Isend(q, osb[:m])
			if err != nil {
				return nil, err
			}
			rreq, err := ep.Irecv(q, orb[:m])
			if err != nil {
				return nil, err
			}
			if err := ep.Wait(send, recv, sreq, rreq); err != nil {
				return nil, fmt.Errorf("iteration %d start %d: %w", i, k, err)
			}
			fillH3(want[:n], q, i, k)
			if recv.Len() != n || string(prb[:n]) != string(want[:n]) {
				return nil, fmt.Errorf("%s: iteration %d start %d: persistent message from rank %d", corruptionMarker, i, k, q)
			}
			fillH3(want[:m], q, i, -k)
			if string(orb[:m]) != string(want[:m]) {
				return nil, fmt.Errorf("%s: iteration %d start %d: ordinary message from rank %d", corruptionMarker, i, k, q)
			}
		}
		if err := send.Free(); err != nil {
			return nil, err
		}
		if err := recv.Free(); err != nil {
			return nil, err
		}
		r.Beat()
		fmt.Fprintf(os.Stderr, "h3: %d iterations done\n", i+1)
	}
	free, total, err := ep.PersistentCredits(q)
	if err != nil {
		return nil, err
	}
	if free != total {
		return nil, fmt.Errorf("credit leak: %d of %d persistent credits free after %d iterations", free, total, par.Iterations)
	}
	return par.Iterations, ep.Close()
}

func fillH3(b []byte, from, i, k int) {
	for j := range b {
		b[j] = byte(from*59 + i*11 + k*5 + j)
	}
}
