package anchor

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
func Interleave(ctx context.Context, cs []Contender, spec bench.Spec, rounds, settle, block int, progress io.Writer) ([]bench.Result, error) {
	if rounds < 1 {
		return nil, fmt.Errorf("interleave: %d rounds", rounds)
	}
	if settle < 0 {
		return nil, fmt.Errorf("interleave: settle size %d", settle)
	}
	if block < 0 {
		return nil, fmt.Errorf("interleave: block of %d sizes", block)
	}
	blocks := sizeBlocks(spec.Sizes, block)
	pooled := make([]bench.Result, len(cs))
	samples := make([]map[int][]float64, len(cs))
	first := make([]map[int]bench.Point, len(cs)) // each size's first point: its loop constants
	for round := range rounds {
		for _, sizes := range blocks {
			part := spec
			part.Sizes = sizes
			one := bench.WithSettle(part, settle)
			one.Reps = 1
			for _, i := range bench.InterleaveOrder(len(cs), round+1) {
				c := cs[i]
				if progress != nil {
					fmt.Fprintf(progress, "round %d/%d: %s %s%s\n", round+1, rounds, c.Label, spec.Pattern, blockLabel(sizes, len(blocks)))
				}
				res, err := c.Run(ctx, one)
				if err != nil {
					return nil, fmt.Errorf("%s, round %d: %w", c.Label, round+1, err)
				}
				if err := bench.DropSettle(&res, settle, sizes); err != nil {
					return nil, fmt.Errorf("%s, round %d: %w", c.Label, round+1, err)
				}
				if samples[i] == nil {
					pooled[i] = res
					pooled[i].Label = c.Label
					pooled[i].Spec.Sizes = spec.Sizes
					pooled[i].Spec.Reps = rounds
					samples[i] = map[int][]float64{}
					first[i] = map[int]bench.Point{}
				}
				for _, p := range res.Points {
					samples[i][p.Size] = append(samples[i][p.Size], p.Samples...)
					if _, ok := first[i][p.Size]; !ok {
						first[i][p.Size] = p
					}
				}
			}
		}
	}
	for i := range pooled {
		pooled[i].Points = nil
		for _, size := range spec.Sizes {
			p, ok := first[i][size]
			if !ok {
				return nil, fmt.Errorf("%s: no point of %d bytes", cs[i].Label, size)
			}
			q := bench.Summarize(p.Size, p.Unit, samples[i][p.Size], nil)
			q.Iters, q.Warmup, q.Validated = p.Iters, p.Warmup, p.Validated
			pooled[i].Points = append(pooled[i].Points, q)
		}
	}
	return pooled, nil
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
		return " " + transports.FormatSize(sizes[0])
	}
	return " " + transports.FormatSize(sizes[0]) + "-" + transports.FormatSize(sizes[len(sizes)-1])
}

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
