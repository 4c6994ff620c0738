package mpistack

import (
	"context"
	"fmt"
	"io"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/transports"
)

// Contender is one configuration in a side-by-side comparison.
type Contender struct {
	Label string
	Ours  bool // gotune's own (true) or the reference stack's
	// Run measures spec (whose Reps is 1) once.
	Run func(ctx context.Context, spec bench.Spec) (bench.Result, error)
}

// Interleave measures every contender rounds times, one repetition per
// contender per round, in bench.InterleaveOrder (each contender runs first,
// and directly after each other one, equally often), and pools the samples
// per contender and size. On a machine whose speed drifts over minutes (a
// VM whose host moves it around), running each contender in its own block
// would compare different machines; interleaving compares like with like.
// Percentiles of the pooled points come from the pooled samples.
//
// block > 0 splits the sizes into runs of that many, in order: each round
// measures the first block with every contender, then the next, so the
// contenders' points at one size are taken seconds apart rather than a
// whole ladder apart. block 0 (or at least the number of sizes) measures
// the whole ladder in each run. The sample of round k is the k-th of every
// point either way.
//
// settle > 0 puts one discarded point of that many bytes before the sizes
// of every run, the same for every contender (bench.WithSettle says why).
//
// m, if not nil, is told of the runs: the pattern as the stage, planned
// rounds x size blocks x contenders, and each run as it ends ("round 2/5:
// gotune sm bw (sizes 4K-64K)").
func Interleave(ctx context.Context, cs []Contender, spec bench.Spec, rounds, settle, block int, m Meter) ([]bench.Result, error) {
	if rounds < 1 {
		return nil, fmt.Errorf("interleave: %d rounds", rounds)
	}
	if settle < 0 {
		return nil, fmt.Errorf("interleave: settle size %d", settle)
	}
	if block < 0 {
		return nil, fmt.Errorf("interleave: block of %d sizes", block)
	}
	pools := make([]pool, len(cs))
	blocks := sizeBlocks(spec.Sizes, block)
	stage := string(spec.Pattern)
	if m != nil {
		m.Plan(stage, rounds*len(blocks)*len(cs))
	}
	for round := range rounds {
		for _, sizes := range blocks {
			part := spec
			part.Sizes = sizes
			one := bench.WithSettle(part, settle)
			one.Reps = 1
			for _, i := range bench.InterleaveOrder(len(cs), round+1) {
				c := cs[i]
				res, err := c.Run(ctx, one)
				if err == nil {
					err = bench.DropSettle(&res, settle, sizes)
				}
				if err != nil {
					return nil, fmt.Errorf("%s, round %d: %w", c.Label, round+1, err)
				}
				pools[i].add(res)
				if m != nil {
					m.Step(stage, fmt.Sprintf("round %d/%d: %s %s%s", round+1, rounds, c.Label, spec.Pattern, blockLabel(sizes, len(blocks))))
				}
			}
		}
	}
	pooled := make([]bench.Result, len(cs))
	for i, c := range cs {
		r, err := pools[i].result(c.Label, spec.Sizes, rounds)
		if err != nil {
			return nil, err
		}
		pooled[i] = r
	}
	return pooled, nil
}

// pool gathers one contender's runs: every sample per size, in round
// order, and the first point of each size for its loop constants.
type pool struct {
	run     bench.Result // the first run: provenance and spec
	samples map[int][]float64
	first   map[int]bench.Point
}

func (p *pool) add(res bench.Result) {
	if p.samples == nil {
		p.run, p.samples, p.first = res, map[int][]float64{}, map[int]bench.Point{}
	}
	for _, pt := range res.Points {
		p.samples[pt.Size] = append(p.samples[pt.Size], pt.Samples...)
		if _, ok := p.first[pt.Size]; !ok {
			p.first[pt.Size] = pt
		}
	}
}

// result is the pooled run: sizes in order, each point summarising every
// round's samples.
func (p *pool) result(label string, sizes []int, rounds int) (bench.Result, error) {
	r := p.run
	r.Label = label
	r.Spec.Sizes = sizes
	r.Spec.Reps = rounds
	r.Points = nil
	for _, size := range sizes {
		pt, ok := p.first[size]
		if !ok {
			return bench.Result{}, fmt.Errorf("%s: no point of %d bytes", label, size)
		}
		q := bench.Summarize(size, pt.Unit, p.samples[size], nil)
		q.Iters, q.Warmup, q.Validated = pt.Iters, pt.Warmup, pt.Validated
		r.Points = append(r.Points, q)
	}
	return r, nil
}

// sizeBlocks cuts sizes into runs of block sizes each (0: one run).
func sizeBlocks(sizes []int, block int) [][]int {
	if block <= 0 || block >= len(sizes) {
		return [][]int{sizes}
	}
	var out [][]int
	for lo := 0; lo < len(sizes); lo += block {
		out = append(out, sizes[lo:min(lo+block, len(sizes))])
	}
	return out
}

// blockLabel names a block in progress lines when the ladder is split.
func blockLabel(sizes []int, blocks int) string {
	if blocks == 1 {
		return ""
	}
	if len(sizes) == 1 {
		return " (size " + transports.FormatSize(sizes[0]) + ")"
	}
	return " (sizes " + transports.FormatSize(sizes[0]) + "-" + transports.FormatSize(sizes[len(sizes)-1]) + ")"
}

// Meter is told how far an interleaving has got; internal/progress's
// Meter satisfies it (bars on a terminal, periodic lines elsewhere).
// Declared here so that bench/mpistack does not depend on how it is shown.
type Meter interface {
	// Plan says that stage (the pattern) will take runs more runs.
	Plan(stage string, runs int)
	// Step says that a run of stage ended; line says which.
	Step(stage, line string)
}

// Lines is a Meter that writes each run's line to w as it ends (nil w:
// a nil Meter, nothing), for callers whose progress is a stream of lines
// (the sweep's stack tuning).
func Lines(w io.Writer) Meter {
	if w == nil {
		return nil
	}
	return lines{w}
}

type lines struct{ w io.Writer }

func (lines) Plan(string, int)             {}
func (l lines) Step(_ string, line string) { fmt.Fprintln(l.w, line) }

// Split separates ours from theirs, keeping the order.
func Split(cs []Contender, results []bench.Result) (ours, theirs []bench.Result) {
	for i, c := range cs {
		if c.Ours {
			ours = append(ours, results[i])
		} else {
			theirs = append(theirs, results[i])
		}
	}
	return ours, theirs
}
