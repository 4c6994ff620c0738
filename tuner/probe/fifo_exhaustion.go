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
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// H5: FIFO exhaustion. At the smallest FIFO (one cell, one fragment slot),
// ranks send bursts to each other before receiving anything: two ranks head
// to head, a flood where rank 0 sends to every peer while they all send
// to it, and, at the ranks a node will run (WithRanks, above 3), every
// rank to every other at once, through fragment rings each shared by all
// of a rank's peers. A sender blocked on a full FIFO must keep draining its
// incoming channels; the unsafe variant (sm.drain=never) does not, and
// deadlocks.

const h5Kind = "probe-h5"

type h5Params struct {
	Unsafe   bool               `json:"unsafe"`
	Messages int                `json:"messages"` // per direction per pair
	Base     transports.Options `json:"base,omitempty"`
	AllPairs bool               `json:"all_pairs,omitempty"` // every rank bursts to every other (else rank 0 to all, all to rank 0)
}

// h5Sizes mix eager (≤ 64 B) and pipelined (> 64 B) messages.
var h5Sizes = []int{8, 64, 65, 200}

// tinyFIFO is the smallest sm geometry at depth cells: cells of 128 bytes
// (eager messages up to 64) and a ring of one 64-byte fragment, which a
// few messages fill.
func tinyFIFO(depth int) transports.Options {
	return transports.Options{sm.KeyDepth: strconv.Itoa(depth), sm.KeyFrags: "1", sm.KeyCell: "128", sm.KeyEager: "64", sm.KeyFrag: "64"}
}

// h5Options are the probe's stress settings over base, a candidate
// configuration's sm.* options (its copy routine and progress mode count;
// its geometry is replaced by the smallest).
func h5Options(unsafe bool, base transports.Options) transports.Options {
	o := transports.Options{}
	for k, v := range base {
		if sm.Options.Has(k) {
			o[k] = v
		}
	}
	maps.Copy(o, tinyFIFO(1))
	if unsafe {
		o[sm.KeyDrain] = "never"
	}
	return o
}

func init() {
	launch.Register(h5Kind, h5Rank)
	register(&Probe{
		ID:              "H5",
		Hazard:          "FIFO exhaustion: head-to-head sends, many-to-one floods (ompi#12979, mpich#7171)",
		Description:     "bursts both ways before any receive, 2 ranks, a 3-rank flood and, at a node's rank count, every rank to every other, at FIFO depth 1; unsafe: a blocked send stops draining (sm.drain=never)",
		RunOptions:      runH5,
		ScalesWithRanks: true,
	})
}

func runH5(ctx context.Context, unsafe bool, deadline time.Duration, base transports.Options) Verdict {
	var v Verdict
	const messages = 500
	type scenario struct {
		ranks    int
		allPairs bool
		name     string
	}
	scenarios := []scenario{{2, false, "head-to-head"}, {3, false, "3-rank flood"}}
	if n := RanksFrom(ctx); n > 3 {
		scenarios = append(scenarios, scenario{n, true, fmt.Sprintf("%d ranks all to all", n)})
	}
	p, err := sm.ParseParams(h5Options(unsafe, base))
	if err != nil {
		v.Outcome, v.Detail = ProbeFailed, err.Error()
		return v
	}
	var names []string
	for _, sc := range scenarios {
		params, _ := json.Marshal(h5Params{Unsafe: unsafe, Messages: messages, Base: base, AllPairs: sc.allPairs}) // plain data always encodes
		_, err := launch.Run(ctx, launch.Job{Kind: h5Kind, Size: sc.ranks, SegmentBytes: p.SegmentBytes(sc.ranks),
			Params: params, Stall: deadline}, quiet)
		if v.Outcome, v.Detail, v.Stacks = classify(err); v.Outcome != Passed {
			v.Detail = sc.name + ": " + v.Detail
			break
		}
		names = append(names, sc.name)
		all := names[len(names)-1]
		if len(names) > 1 {
			all = strings.Join(names[:len(names)-1], ", ") + " and " + all
		}
		v.Detail = fmt.Sprintf("%s at FIFO depth 1, %d validated messages per direction per pair", all, messages)
	}
	return v
}

// h5Rank: rank 0 sends to every peer, then receives from every peer; every
// other rank sends to rank 0, then receives from it. With two ranks that is
// head to head; with more, rank 0 is flooded while it floods. AllPairs:
// every rank sends to every other (the next rank first), then receives.
func h5Rank(r *launch.Rank) (any, error) {
	var par h5Params
	if err := r.Params(&par); err != nil {
		return nil, err
	}
	p, err := sm.ParseParams(h5Options(par.Unsafe, par.Base))
	if err != nil {
		return nil, err
	}
	ep, err := sm.New(rankEnv(r, nil), p, nil, "sm")
	if err != nil {
		return nil, err
	}
	peers := []int{0}
	if r.ID == 0 || par.AllPairs {
		peers = nil
		for k := 1; k < r.Size; k++ {
			peers = append(peers, (r.ID+k)%r.Size)
		}
	}
	buf := make([]byte, 256)
	for i := range par.Messages {
		for _, q := range peers {
			n := h5Sizes[i%len(h5Sizes)]
			fillH5(buf[:n], r.ID, q, i)
			if err := ep.Send(q, buf[:n]); err != nil {
				return nil, err
			}
			r.Beat()
		}
	}
	want := make([]byte, 256)
	for i := range par.Messages {
		for _, q := range peers {
			n := h5Sizes[i%len(h5Sizes)]
			got, err := ep.Recv(q, buf)
			if err != nil {
				return nil, err
			}
			fillH5(want[:n], q, r.ID, i)
			if got != n || string(buf[:n]) != string(want[:n]) {
				return nil, fmt.Errorf("payload validation failed: message %d from rank %d", i, q)
			}
			r.Beat()
		}
	}
	return nil, ep.Close()
}

func fillH5(b []byte, from, to, i int) {
	for k := range b {
		b[k] = byte(from*61 + to*17 + i*7 + k)
	}
}
