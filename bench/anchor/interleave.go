package anchor

import (
	"context"
	"fmt"
	"io"

	"github.com/gotune/gotune/bench"
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
// settle > 0 puts one discarded point of that many bytes before the sizes
// of every run, the same for every contender (bench.WithSettle says why).
func Interleave(ctx context.Context, cs []Contender, spec bench.Spec, rounds, settle int, progress io.Writer) ([]bench.Result, error) {
	if rounds < 1 {
		return nil, fmt.Errorf("interleave: %d rounds", rounds)
	}
	if settle < 0 {
		return nil, fmt.Errorf("interleave: settle size %d", settle)
	}
	one := bench.WithSettle(spec, settle)
	one.Reps = 1
	pooled := make([]bench.Result, len(cs))
	samples := make([]map[int][]float64, len(cs))
	for round := range rounds {
		for _, i := range bench.InterleaveOrder(len(cs), round+1) {
			c := cs[i]
			if progress != nil {
				fmt.Fprintf(progress, "round %d/%d: %s %s\n", round+1, rounds, c.Label, spec.Pattern)
			}
			res, err := c.Run(ctx, one)
			if err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", c.Label, round+1, err)
			}
			if err := bench.DropSettle(&res, settle, spec.Sizes); err != nil {
				return nil, fmt.Errorf("%s, round %d: %w", c.Label, round+1, err)
			}
			if samples[i] == nil {
				pooled[i] = res
				pooled[i].Label = c.Label
				pooled[i].Spec.Reps = rounds
				samples[i] = map[int][]float64{}
			}
			for _, p := range res.Points {
				samples[i][p.Size] = append(samples[i][p.Size], p.Samples...)
			}
		}
	}
	for i := range pooled {
		for k, p := range pooled[i].Points {
			q := bench.Summarize(p.Size, p.Unit, samples[i][p.Size], nil)
			q.Iters, q.Warmup, q.Validated = p.Iters, p.Warmup, p.Validated
			pooled[i].Points[k] = q
		}
	}
	return pooled, nil
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
